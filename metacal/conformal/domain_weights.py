"""Likelihood-ratio weights w(x) = dP_test/dP_cal(x) from a domain classifier (the estimate Tibshirani et al. 2019
use when the ratio is unknown).

A logistic regression tells calibration inputs (label 0) from test inputs (label 1) on standardised features, each
domain weighted to half the loss (so the sample sizes do not enter); with its probability c(x) of "test", the ratio
is the odds

    w(x) = c(x) / (1 − c(x)).

c(x) is clipped to [``clip``, 1 − ``clip``] (default 0.01), so weights lie in [1/99, 99]: an almost separable shift
would otherwise put all the mass on one calibration sample. metacal's evaluation passes the raw log-probabilities
(:func:`log_prob_features`, what every prediction file holds); the weighted guarantee then needs P(y | model output)
to be the same on both sides, which a shift that makes the model confidently wrong breaks. The test inputs' labels
are never read, but the classifier is fitted on the inputs it weights, so the sets are transductive
(docs/conventions.md#conformal-prediction-sets).
"""

from __future__ import annotations

import torch


def log_prob_features(probs: torch.Tensor) -> torch.Tensor:
    """log p, clamped at 1e-12, as float64 (N×K)."""
    return torch.as_tensor(probs, dtype=torch.float64).clamp_min(1e-12).log()


def domain_weights(cal_features: torch.Tensor, test_features: torch.Tensor, l2: float = 1e-4, clip: float = 0.01,
                   steps: int = 200) -> tuple[torch.Tensor, torch.Tensor]:
    """(calibration weights (n,), test weights (m,)) from an L2-regularised logistic regression fitted with L-BFGS."""
    cal = torch.as_tensor(cal_features, dtype=torch.float64).cpu()
    test = torch.as_tensor(test_features, dtype=torch.float64).cpu()
    if cal.ndim != 2 or test.ndim != 2 or cal.shape[1] != test.shape[1] or not len(cal) or not len(test):
        raise ValueError(f"domain features must be two non-empty N×D arrays with the same D, got "
                         f"{tuple(cal.shape)} and {tuple(test.shape)}")
    x = torch.cat([cal, test])
    mean, std = x.mean(0), x.std(0).clamp_min(1e-8)
    x = (x - mean) / std
    y = torch.cat([torch.zeros(len(cal)), torch.ones(len(test))]).double()
    # each domain counts equally in the loss, so the fitted odds are the density ratio up to a constant
    balance = torch.cat([torch.full((len(cal),), 0.5 / len(cal)), torch.full((len(test),), 0.5 / len(test))]).double()
    w = torch.zeros(x.shape[1], dtype=torch.float64, requires_grad=True)
    b = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=steps, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = (balance * torch.nn.functional.binary_cross_entropy_with_logits(x @ w + b, y, reduction="none")).sum()
        loss = loss + l2 * (w ** 2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        c = torch.sigmoid(x @ w + b).clamp(clip, 1 - clip)
        odds = c / (1 - c)  # balanced classes: the odds are the density ratio itself
    return odds[: len(cal)], odds[len(cal):]
