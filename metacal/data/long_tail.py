"""A long-tailed training distribution: the option ``imbalance`` ρ ≥ 1 of every dataset (:func:`metacal.data.build`).

Cao et al. 2019 ("LDAM", §4: exponential profile): class k of K keeps

    n_k = max(1, ⌊n_max · ρ^(−k/(K−1))⌋),   k = 0 … K−1,

so class 0 is the head (n_max samples) and class K−1 the tail (n_max/ρ). Each of train, val and meta-val is thinned
on its own, with n_max = its smallest class count (so every class can supply its n_k); the test set stays
balanced. Within a class the kept samples are those with the smallest per-sample priorities, drawn for the whole
official training set from a generator seeded by (this stream, ``draw_seed``): the thinning does not depend on the
split, and a larger ρ keeps a subset of what a smaller one keeps. ``info["imbalance"]`` records ρ.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch
from torch.utils.data import Dataset

from .bundle import DataBundle, as_subset, base_positions
from .seeding import generator

IMBALANCE_STREAM = 0x696D6261  # "imba"


def check_imbalance(rho: Any) -> float:
    """ρ as a float ≥ 1 (1: balanced, nothing thinned); else one ValueError line."""
    if isinstance(rho, bool) or not isinstance(rho, (int, float)) or not math.isfinite(rho) or rho < 1:
        raise ValueError(f"imbalance must be a number >= 1 (head-to-tail ratio of the class counts; 1: balanced), "
                         f"got {rho!r}")
    return float(rho)


def class_sizes(n_max: int, num_classes: int, rho: float) -> list[int]:
    """n_k = max(1, ⌊n_max · ρ^(−k/(K−1))⌋) for k = 0 … K−1 (a tolerance of 1e-9 keeps ⌊10.0000000001⌋ at 10)."""
    return [max(1, math.floor(n_max * rho ** (-k / (num_classes - 1)) + 1e-9)) for k in range(num_classes)]


def thin(split: Dataset, num_classes: int, rho: float, draw_seed: int) -> Dataset:
    """``split`` cut to the profile of :func:`class_sizes` (n_max = its smallest class count)."""
    subset = as_subset(split)
    if len(subset) == 0:
        return split
    base, index = base_positions(split)
    labels = torch.as_tensor(subset.targets, dtype=torch.long)
    counts = torch.bincount(labels, minlength=num_classes)
    sizes = class_sizes(int(counts.min()), num_classes, rho)
    priority = torch.rand(len(base), generator=generator(IMBALANCE_STREAM, int(draw_seed)))  # type: ignore[arg-type]
    keep = []
    for k, size in enumerate(sizes):
        members = torch.nonzero(labels == k).reshape(-1)
        keep.append(members[priority[index[members]].argsort()[:size]])
    return subset.narrowed(torch.cat(keep).sort().values)


def long_tailed(bundle: DataBundle, imbalance: float = 1.0, draw_seed: int = 0) -> DataBundle:
    """The bundle with train, val and meta-val thinned to the profile (module docstring); ρ = 1 changes nothing."""
    rho = check_imbalance(imbalance)
    if rho == 1:
        return bundle
    k = bundle.num_classes
    parts = {name: thin(getattr(bundle, name), k, rho, draw_seed) for name in ("train", "val", "meta_val")}
    return replace(bundle, **parts, info={**bundle.info, "imbalance": {"rho": rho}})


def class_counts(split: Dataset, num_classes: int) -> list[int]:
    """Samples per class of a split (its ``targets``)."""
    if len(split) == 0:  # type: ignore[arg-type]
        return [0] * num_classes
    labels = torch.as_tensor(as_subset(split).targets, dtype=torch.long)
    return torch.bincount(labels, minlength=num_classes).tolist()
