"""Split conformal prediction sets (Vovk et al. 2005; Lei et al. 2018; the tutorial of Angelopoulos & Bates 2023):
fit a quantile of conformity scores on n labelled calibration samples, then include every label whose score is at
most it.

Quantile (finite-sample): q̂ = the k-th smallest calibration score, k = ⌈(n + 1)(1 − α)⌉. Then for an exchangeable
test point P(Y ∈ C(X)) ≥ 1 − α, and ≤ 1 − α + 1/(n + 1) when the scores have no ties (randomised scores). k ≤ n is
needed, i.e. n ≥ ⌈1/α⌉ − 1; fewer samples are refused (one line). (n + 1)(1 − α) is computed in floating point and a
value within 1e-9 of an integer counts as that integer, so α = 0.1 with n = 9 gives k = 9, not 10.

Class-conditional (Mondrian; Vovk 2012, Sadinle et al. 2019): one quantile per class from the calibration samples
of that class, and label y is included when its score is at most q̂_y; coverage then holds within each class. A
class with fewer than ⌈1/α⌉ − 1 calibration samples gets q̂ = +∞ (its label is always included: the guarantee kept
at the price of size), listed in ``unbounded_classes``.

Weighted (covariate shift; metacal/conformal/weighted.py): ``predict_set(probs, weights=(w_cal, w_test))`` gives
each test input its own quantile from the calibration scores weighted by the likelihood ratio; marginal only.

Randomised scores draw U from a generator seeded by ``seed`` (a set is a function of the inputs and that seed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from .scores import SCORES
from .weighted import weighted_quantiles

EXACT = 1e-9


def quantile_rank(n: int, alpha: float) -> int:
    """k = ⌈(n + 1)(1 − α)⌉ (module docstring)."""
    value = (n + 1) * (1.0 - alpha)
    nearest = round(value)
    return int(nearest) if abs(value - nearest) < EXACT else math.ceil(value)


def min_calibration(alpha: float) -> int:
    """The fewest calibration samples with a finite quantile: ⌈1/α⌉ − 1 (computed as the smallest n with k ≤ n)."""
    n = 1
    while quantile_rank(n, alpha) > n:
        n += 1
    return n


def check_alpha(alpha: float) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise ValueError(f"alpha must be a number in (0, 1) (the miscoverage: 0.1 for 90% sets), got {alpha!r}")
    return float(alpha)


def conformal_quantile(scores: torch.Tensor, alpha: float) -> float:
    """The k-th smallest of ``scores`` (module docstring); ValueError when there are fewer than ⌈1/α⌉ − 1."""
    n = int(scores.numel())
    k = quantile_rank(n, alpha)
    if k > n:
        raise ValueError(f"a {100 * (1 - alpha):g}% conformal quantile needs at least {min_calibration(alpha)} "
                         f"calibration samples (⌈1/α⌉ − 1 for α = {alpha:g}); got {n}")
    return float(torch.kthvalue(scores.double().reshape(-1).cpu(), k).values)


@dataclass
class ConformalPredictor:
    """``score`` (a :data:`~metacal.conformal.scores.SCORES` name) at miscoverage ``alpha``; ``mondrian``: one
    quantile per class. After :meth:`fit`: ``quantile`` (marginal) or ``class_quantiles`` (Mondrian)."""

    score: str = "aps"
    alpha: float = 0.1
    randomized: bool = True
    k_reg: int = 1
    lam: float = 0.01
    mondrian: bool = False
    seed: int = 0
    quantile: float = math.nan
    class_quantiles: torch.Tensor | None = None
    calibration_scores: torch.Tensor | None = None  # the true labels' scores, for weighted sets
    unbounded_classes: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.alpha = check_alpha(self.alpha)
        SCORES.get(self.score)  # an unknown name: one line with the closest names
        if self.score == "raps" and (self.k_reg < 0 or self.lam < 0 or not math.isfinite(self.lam)):
            raise ValueError(f"raps needs k_reg >= 0 and a finite lam >= 0, got k_reg={self.k_reg}, lam={self.lam}")
        kwargs = {"k_reg": self.k_reg, "lam": self.lam} if self.score == "raps" else {}
        self._fn = SCORES.get(self.score)(self.randomized, **kwargs)

    def scores(self, probs: torch.Tensor, part: int) -> torch.Tensor:
        """Scores of every label (N×K); ``part`` keeps the calibration and test draws of U apart."""
        gen = torch.Generator().manual_seed(int(self.seed) * 2 + part)
        u = torch.rand(probs.shape[0], generator=gen, dtype=torch.float64).to(probs.device)
        return self._fn(probs.double(), u)

    def fit(self, probs: torch.Tensor, labels: torch.Tensor) -> "ConformalPredictor":
        """The quantile(s) from calibration probabilities (N×K) and labels (N)."""
        probs, labels = torch.as_tensor(probs), torch.as_tensor(labels).long().to(probs.device)
        if probs.ndim != 2 or labels.shape != (probs.shape[0],):
            raise ValueError(f"calibration probs must be N×K with N labels, got {tuple(probs.shape)} and "
                             f"{tuple(labels.shape)}")
        own = self.scores(probs, 0).gather(1, labels.unsqueeze(1)).squeeze(1)
        self.calibration_scores = own.cpu()
        if not self.mondrian:
            self.quantile = conformal_quantile(own, self.alpha)
            return self
        k = probs.shape[1]
        quantiles = torch.full((k,), math.inf, dtype=torch.float64)
        self.unbounded_classes = []
        for c in range(k):
            mine = own[labels == c]
            if quantile_rank(mine.numel(), self.alpha) > mine.numel():
                self.unbounded_classes.append(c)
            else:
                quantiles[c] = conformal_quantile(mine, self.alpha)
        self.class_quantiles = quantiles
        return self

    def predict_set(self, probs: torch.Tensor, weights: tuple[torch.Tensor, torch.Tensor] | None = None
                    ) -> torch.Tensor:
        """Boolean N×K: label y is in the set of input i when its score is at most the quantile (of class y).
        ``weights`` = (calibration weights (n,), test weights (N,)): weighted quantiles, one per input."""
        probs = torch.as_tensor(probs)
        if self.class_quantiles is None and math.isnan(self.quantile):
            raise ValueError("the conformal predictor is not fitted: call fit(probs, labels) on calibration data")
        if weights is not None:
            if self.mondrian:
                raise ValueError("weighted sets are marginal: use them without mondrian")
            if torch.as_tensor(weights[1]).numel() != probs.shape[0]:
                raise ValueError(f"one test weight per input: {torch.as_tensor(weights[1]).numel()} weights for "
                                 f"{probs.shape[0]} inputs")
            bound = weighted_quantiles(self.calibration_scores, weights[0], weights[1], self.alpha)
            return self.scores(probs, 1) <= bound.to(probs.device).unsqueeze(1)
        bound = self.class_quantiles.to(probs.device).unsqueeze(0) if self.mondrian else self.quantile
        return self.scores(probs, 1) <= bound
