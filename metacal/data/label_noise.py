"""Label noise and a small trusted held-out set: the options ``noise_rate``, ``noise_kind`` and ``trusted`` of every
dataset (:func:`metacal.data.build`).

Noise (Han et al. 2018, "Co-teaching", §4: symmetric and pair flipping). Each sample of the official training set
draws u ~ U[0, 1) and an offset j uniform in {1, …, K−1}; its label y is flipped when u < r:

- ``symmetric``: y → (y + j) mod K, uniform over the other K − 1 classes;
- ``pair``: y → (y + 1) mod K.

The draws belong to the sample (its position in the official training set), from a generator seeded by
(``draw_seed``, this stream), so they do not depend on the split, the subsets or the long-tail thinning: the same seed
flips the same samples wherever they land, another seed flips others, and the split is never touched. train, val and
meta-val carry the noisy labels; the test set keeps its clean labels (calibration is judged against the truth) and
the same rule applied to it with a stream of its own gives ``bundle.noisy_test_labels``, the view of a user whose
deployment labels are as noisy.

Trusted (``trusted`` N > 0): val and meta-val keep their clean labels and are cut to N samples in all, divided between
them in proportion to their sizes (n_val = round(N·|val| / (|val| + |meta-val|))); the kept ones have the smallest
per-sample priorities of their own stream. train is unchanged (noisy), so runs with and without a trusted set train
on the same samples and labels and differ in their held-out labels alone.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch
from torch.utils.data import Dataset

from metacal.registry import unknown_name

from .bundle import DataBundle, LabelledSubset, as_subset, base_positions
from .seeding import generator

NOISE_KINDS = ("symmetric", "pair")
NOISE_STREAM, TRUSTED_STREAM = 0x6E6F6973, 0x74727374  # "nois", "trst": streams apart from every dataset's own
TRAIN_PART, TEST_PART = 0, 1  # the official training set (train / val / meta-val) and the test set


def check_noise(rate: Any, kind: Any) -> tuple[float, str]:
    """(rate, kind) checked: a number in [0, 1) and a kind of :data:`NOISE_KINDS`; else one ValueError line."""
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= float(rate) < 1:
        raise ValueError(f"noise_rate must be a number in [0, 1) (the fraction of labels flipped), got {rate!r}")
    if kind not in NOISE_KINDS:
        raise ValueError(unknown_name("noise_kind", kind, NOISE_KINDS))
    return float(rate), str(kind)


def flip(labels: torch.Tensor, u: torch.Tensor, offset: torch.Tensor, rate: float, kind: str,
         num_classes: int) -> torch.Tensor:
    """The noisy labels: y where u ≥ rate, else (y + offset) mod K (symmetric) or (y + 1) mod K (pair)."""
    shift = offset if kind == "symmetric" else torch.ones_like(offset)
    return torch.where(u < rate, (labels + shift) % num_classes, labels)


def draws(num_samples: int, num_classes: int, draw_seed: int, part: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(u, offset) of every sample of one part (:data:`TRAIN_PART` or :data:`TEST_PART`): u ~ U[0, 1), offset
    uniform in {1, …, K−1}, from the generator seeded by (stream, ``draw_seed``, ``part``)."""
    gen = generator(NOISE_STREAM, int(draw_seed), part)
    u = torch.rand(num_samples, generator=gen, dtype=torch.float64)
    offset = torch.randint(1, max(num_classes, 2), (num_samples,), generator=gen)
    return u, offset


def noisy_split(split: Dataset, num_classes: int, rate: float, kind: str, draw_seed: int,
                part: int = TRAIN_PART) -> LabelledSubset:
    """``split`` with its labels flipped by the draws of its samples (module docstring)."""
    base, index = base_positions(split)
    u, offset = draws(len(base), num_classes, draw_seed, part)  # type: ignore[arg-type]
    subset = as_subset(split)
    clean = torch.as_tensor(subset.targets, dtype=torch.long)
    return LabelledSubset(subset, flip(clean, u[index], offset[index], rate, kind, num_classes))


def transitions(clean: torch.Tensor, noisy: torch.Tensor, num_classes: int) -> list[list[int]]:
    """K×K counts: row = clean label, column = the label the sample carries."""
    counts = torch.bincount(clean * num_classes + noisy, minlength=num_classes * num_classes)
    return counts.reshape(num_classes, num_classes).tolist()


def check_trusted(trusted: Any, pool: int | None = None) -> int:
    """``trusted`` as an integer in [0, ``pool``] (val + meta-val; unbounded when None); else one ValueError line."""
    if isinstance(trusted, bool) or not isinstance(trusted, int) or trusted < 0:
        raise ValueError(f"trusted must be a whole number of clean held-out samples (0: none), got {trusted!r}")
    if pool is not None and trusted > pool:
        raise ValueError(f"trusted {trusted} is larger than the held-out pool it is drawn from (val + meta-val = "
                         f"{pool} samples); give at most {pool}")
    return trusted


def trusted_split(split: Dataset, size: int, draw_seed: int) -> Dataset:
    """The ``size`` samples of ``split`` with the smallest priorities of the trusted stream (ascending positions)."""
    base, index = base_positions(split)
    priority = torch.rand(len(base), generator=generator(TRUSTED_STREAM, int(draw_seed)))  # type: ignore[arg-type]
    keep = priority[index].argsort()[:size].sort().values
    return as_subset(split).narrowed(keep)


def with_label_options(bundle: DataBundle, noise_rate: float = 0.0, noise_kind: str = "symmetric",
                       trusted: int = 0, draw_seed: int = 0) -> DataBundle:
    """The bundle with the trusted cut and the label noise of the module docstring; records go into ``info``
    (``label_noise``: rate, kind, realised rate and transition counts per split; ``trusted``: sizes)."""
    rate, kind = check_noise(noise_rate, noise_kind)
    held_out = {"val": bundle.val, "meta_val": bundle.meta_val}
    n_trusted = check_trusted(trusted, sum(len(d) for d in held_out.values()))
    if rate == 0 and n_trusted == 0:
        return bundle
    info, parts = dict(bundle.info), {}
    k = bundle.num_classes
    if n_trusted:
        total = sum(len(d) for d in held_out.values())
        n_val = round(n_trusted * len(bundle.val) / total)
        sizes = {"val": n_val, "meta_val": n_trusted - n_val}
        parts.update({name: trusted_split(data, sizes[name], draw_seed) for name, data in held_out.items()})
        info["trusted"] = {"n": n_trusted, **sizes}
    if rate > 0:
        noised = ["train"] + ([] if n_trusted else ["val", "meta_val"])
        record: dict[str, Any] = {"rate": rate, "kind": kind, "realised": {}, "transitions": {}}
        for name in noised:
            data = parts.get(name, getattr(bundle, name))
            if len(data) == 0:
                continue
            parts[name] = noisy_split(data, k, rate, kind, draw_seed)
            record["realised"][name] = realised(parts[name])
            record["transitions"][name] = transitions(parts[name].clean_targets, parts[name].labels, k)
        if bundle.test is not None:
            test_view = noisy_split(bundle.test, k, rate, kind, draw_seed, TEST_PART)
            parts["noisy_test_labels"] = test_view.labels
            record["realised"]["test_view"] = realised(test_view)
        info["label_noise"] = record
    return replace(bundle, **parts, info=info)


def realised(split: LabelledSubset) -> float:
    """The fraction of the split's samples whose label was flipped (NaN for an empty split)."""
    n = len(split.labels)
    return float((split.labels != split.clean_targets).sum()) / n if n else math.nan
