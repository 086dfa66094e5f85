"""Weighted split conformal under covariate shift (Tibshirani, Barber, Candès & Ramdas, NeurIPS 2019).

When the test inputs come from P̃(x) and the calibration inputs from P(x) with P(y | x) unchanged, weight calibration
sample i by w(Xᵢ) = dP̃/dP(Xᵢ). The quantile of test input x is then its own:

    q̂(x) = Quantile_{1−α}( Σᵢ pᵢ(x) δ_{Vᵢ} + p_{n+1}(x) δ_{+∞} ),
    pᵢ(x) = w(Xᵢ) / (Σⱼ w(Xⱼ) + w(x)),   p_{n+1}(x) = w(x) / (Σⱼ w(Xⱼ) + w(x))

(their weighted split conformal): the smallest calibration score whose cumulative weight reaches (1 − α)(Σⱼ w(Xⱼ) +
w(x)), or +∞ when none does (the set is then every label). With the true ratio, P(Y ∈ C(X)) ≥ 1 − α on the shifted
data. Equal weights give back the split-conformal k-th smallest score, k = ⌈(n + 1)(1 − α)⌉, exactly: the threshold is
compared with the same 1e-9 tolerance as :func:`~metacal.conformal.predictor.quantile_rank`.
"""

from __future__ import annotations

import torch

EXACT = 1e-9


def check_weights(weights: torch.Tensor, what: str) -> torch.Tensor:
    weights = torch.as_tensor(weights, dtype=torch.float64).reshape(-1)
    if not bool(torch.isfinite(weights).all()) or bool((weights < 0).any()):
        raise ValueError(f"{what} weights must be finite and non-negative")
    return weights


def weighted_quantiles(scores: torch.Tensor, cal_weights: torch.Tensor, test_weights: torch.Tensor,
                       alpha: float) -> torch.Tensor:
    """q̂(x) for every test input (module docstring): float64 (m,), +∞ where the mass at +∞ is needed."""
    scores = torch.as_tensor(scores, dtype=torch.float64).reshape(-1).cpu()
    cal = check_weights(cal_weights, "calibration").cpu()
    test = check_weights(test_weights, "test").cpu()
    if cal.shape != scores.shape:
        raise ValueError(f"one weight per calibration score: {cal.numel()} weights for {scores.numel()} scores")
    order = torch.argsort(scores, stable=True)
    ordered, cumulative = scores[order], torch.cumsum(cal[order], 0)
    total = cumulative[-1] if cumulative.numel() else torch.zeros((), dtype=torch.float64)
    need = (1.0 - alpha) * (total + test)
    index = torch.searchsorted(cumulative, need - EXACT * (total + test), right=False)
    found = index < scores.numel()
    quantiles = torch.full_like(need, float("inf"))
    quantiles[found] = ordered[index[found]]
    return quantiles
