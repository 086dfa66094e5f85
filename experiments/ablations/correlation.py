"""Pearson correlation coefficient (for the grad_weighting study), float64, any device."""

from __future__ import annotations

import torch


def pearson(x: torch.Tensor, y: torch.Tensor) -> float:
    """r = Σ(x−x̄)(y−ȳ) / √(Σ(x−x̄)² Σ(y−ȳ)²); NaN when either input is constant."""
    x, y = torch.as_tensor(x).double().reshape(-1), torch.as_tensor(y).double().reshape(-1)
    if x.shape != y.shape or x.numel() < 2:
        raise ValueError(f"pearson needs two 1-D inputs of equal length >= 2, got {x.numel()} and {y.numel()}")
    y = y.to(x.device)
    dx, dy = x - x.mean(), y - y.mean()
    den = torch.sqrt((dx * dx).sum() * (dy * dy).sum())
    return float((dx * dy).sum() / den) if float(den) > 0 else float("nan")


def ranks(x: torch.Tensor) -> torch.Tensor:
    """Average ranks 1…N (ties share the mean of their positions), float64."""
    x = torch.as_tensor(x).double().reshape(-1)
    order = torch.argsort(x, stable=True)
    sorted_x = x[order]
    _, inverse, counts = torch.unique_consecutive(sorted_x, return_inverse=True, return_counts=True)
    ends = torch.cumsum(counts, 0).double()
    mean_rank = ends - (counts.double() - 1) / 2  # mean of positions start+1 … end
    out = torch.empty_like(x)
    out[order] = mean_rank[inverse]
    return out


def spearman(x: torch.Tensor, y: torch.Tensor) -> float:
    """Spearman's ρ = Pearson r of the average ranks (1 for any strictly increasing relation)."""
    return pearson(ranks(x), ranks(y))
