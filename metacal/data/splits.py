"""Train / val / meta-val from the official training set by one seeded permutation (Wang & Golebiowski 2024, §4: 8:1:1).

The permutation is ``torch.randperm(n, generator=torch.Generator().manual_seed(seed))`` on the CPU
generator, so a seed gives the same split on every machine and in every process. Sizes:
``n_val = round(f_val·n)``, ``n_meta = round(f_meta·n)``, ``n_train = n − n_val − n_meta``
(60,000 → 48,000 / 6,000 / 6,000; 50,000 → 40,000 / 5,000 / 5,000).
"""

from __future__ import annotations

import math
from typing import NamedTuple, Sequence

import torch
from torch.utils.data import Dataset

from .bundle import DataSubset

DEFAULT_SPLIT = (0.8, 0.1, 0.1)


class SplitIndices(NamedTuple):
    train: torch.Tensor
    val: torch.Tensor
    meta_val: torch.Tensor


def check_fractions(split: Sequence[float]) -> tuple[float, float, float]:
    """Validate ``(train, val, meta_val)`` fractions: three non-negative numbers summing to 1."""
    try:
        fractions = tuple(float(f) for f in split)
    except (TypeError, ValueError):
        raise ValueError(f"split must be three fractions (train, val, meta_val), got {split!r}") from None
    if len(fractions) != 3 or any(not math.isfinite(f) or f < 0 for f in fractions):
        raise ValueError(f"split must be three non-negative fractions (train, val, meta_val), got {split!r}")
    if abs(sum(fractions) - 1.0) > 1e-6:
        raise ValueError(f"split fractions must sum to 1, got {split!r} (sum {sum(fractions):g})")
    if fractions[0] == 0:
        raise ValueError(f"split must leave a non-empty training part, got {split!r}")
    return fractions  # type: ignore[return-value]


def split_indices(n: int, split: Sequence[float] = DEFAULT_SPLIT, seed: int = 0,
                  fold_meta_val: bool = False) -> SplitIndices:
    """Disjoint index sets covering ``range(n)``, each sorted ascending.

    ``fold_meta_val=True`` puts the meta-val part back into train (for methods without a meta step),
    leaving meta-val empty; val is the same as without folding.
    """
    _, f_val, f_meta = check_fractions(split)
    n_val, n_meta = round(f_val * n), round(f_meta * n)
    n_train = n - n_val - n_meta
    if n_train <= 0:
        raise ValueError(f"split {tuple(split)} of {n} samples leaves no training samples")
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(int(seed)))
    train = perm[:n_train]
    val = perm[n_train:n_train + n_val]
    meta = perm[n_train + n_val:]
    if fold_meta_val:
        train, meta = torch.cat([train, meta]), meta[:0]
    return SplitIndices(train.sort().values, val.sort().values, meta.sort().values)


def split_views(train_view: Dataset, eval_view: Dataset, n: int, split: Sequence[float] = DEFAULT_SPLIT,
                seed: int = 0, fold_meta_val: bool = False) -> tuple[DataSubset, DataSubset, DataSubset]:
    """Train split over ``train_view`` (augmented) and val / meta-val over ``eval_view`` (not augmented).

    Both views must index the same underlying official training set of ``n`` samples.
    """
    if len(train_view) != n or len(eval_view) != n:
        raise ValueError("train and eval views must have the same length as the training set")
    idx = split_indices(n, split, seed, fold_meta_val)
    return DataSubset(train_view, idx.train), DataSubset(eval_view, idx.val), DataSubset(eval_view, idx.meta_val)
