"""Choosing the ODIR strengths λ (off-diagonal weights) and μ (intercepts) of matrix scaling and Dirichlet
calibration by cross-validation on the fitting set (Kull et al. 2019, §4 and §5: "λ and μ tuned by
cross-validation", their code: 5 stratified folds, held-out log-loss).

metacal searches λ = μ tied on ``ODIR_GRID`` = 10^-4 … 10^2 (7 values; the reference searches λ and μ
separately on 10^-4 … 10^3, a grid 8× as large): the folds are one seeded permutation dealt round-robin
within each class (so every fold holds every class about equally), each grid value is fitted on K−1
folds and scored by the NLL on the held-out fold, and the value with the lowest mean held-out NLL wins
(the first in grid order on ties). Within a fold the grid is fitted from the strongest value down, each fit
started at the previous one's solution (the minimum of a convex L does not depend on the start; this only
saves iterations). The final map is refitted on all samples with the chosen value, from W = I, b = 0.
"""

from __future__ import annotations

from typing import Sequence

import torch

from .affine import MAX_ITER, affine_logits, fit_affine

ODIR_GRID = (1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0)
CV_FOLDS = 5
CV_TOLERANCE_GRAD = 1e-6  # the fold fits only rank the grid values; the final fit uses affine.TOLERANCE_GRAD


def stratified_folds(labels: torch.Tensor, folds: int, seed: int = 0) -> torch.Tensor:
    """Fold index (0 … folds−1) per sample: a seeded permutation, then within each class the samples take
    folds 0, 1, …, folds−1, 0, … in permutation order (class c's count per fold differs by at most one)."""
    n = labels.shape[0]
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    fold = torch.empty(n, dtype=torch.long)
    y = labels[perm]
    for c in torch.unique(y):
        members = perm[y == c]
        fold[members] = torch.arange(members.shape[0]) % folds
    return fold


def cross_validated_nll(x: torch.Tensor, y: torch.Tensor, diagonal: bool, grid: Sequence[float],
                        folds: int = CV_FOLDS, seed: int = 0, max_iter: int = MAX_ITER) -> torch.Tensor:
    """Mean held-out NLL of the map fitted with λ = μ = each grid value (float64, one entry per value)."""
    fold = stratified_folds(y, folds, seed)
    scores = torch.zeros(len(grid), dtype=torch.float64)
    order = sorted(range(len(grid)), key=lambda g: -float(grid[g]))  # strongest first: each fit starts at the last
    for f in range(folds):
        train, held = fold != f, fold == f
        start = None
        for g in order:
            strength = float(grid[g])
            start = fit_affine(x[train], y[train], diagonal, strength, strength, max_iter, init=start,
                               tolerance_grad=CV_TOLERANCE_GRAD)
            logits = affine_logits(x[held], *start)
            scores[g] += torch.nn.functional.cross_entropy(logits, y[held], reduction="sum")
    return scores / y.shape[0]


def select_odir(x: torch.Tensor, y: torch.Tensor, diagonal: bool = False, grid: Sequence[float] = ODIR_GRID,
                folds: int = CV_FOLDS, seed: int = 0, max_iter: int = MAX_ITER) -> tuple[float, torch.Tensor]:
    """(λ = μ with the lowest mean held-out NLL, the held-out NLL of every grid value)."""
    if len(grid) == 0 or any(not (float(v) >= 0) for v in grid):
        raise ValueError(f"the ODIR grid must hold at least one value, all ≥ 0, got {list(grid)}")
    if folds < 2 or y.shape[0] < folds:
        raise ValueError(f"ODIR cross-validation needs 2 ≤ folds ≤ N, got folds = {folds}, N = {y.shape[0]}")
    scores = cross_validated_nll(x, y, diagonal, grid, folds, seed, max_iter)
    return float(grid[int(torch.argmin(scores))]), scores
