"""Prediction sets on top of every post-hoc calibrator column, as ``python -m metacal.evaluate --conformal`` reports
them for prediction files and for a run under shift.

Each column (``uncalibrated``, ``ts_nll``, ``ets``, …) is one probability map. Its calibrator is fitted on the
calibration split, the conformal quantile is fitted on the same split *through* that calibrator, and the sets of the
evaluated predictions are built through it too. Fitting a calibrator with a handful of parameters on the split the
quantile is taken from breaks exact exchangeability only weakly (one temperature from thousands of samples); the
finite-sample guarantee is exact for the ``uncalibrated`` column (docs/conventions.md#conformal-prediction-sets).

``weighted``: each evaluated set of inputs gets likelihood-ratio weights against the calibration split from a domain
classifier on the raw log-probabilities (metacal/conformal/domain_weights.py), and every column's sets use the
weighted quantiles of Tibshirani et al. (2019) — the remedy for coverage lost under covariate shift.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Mapping

import torch

from .domain_weights import domain_weights, log_prob_features
from .predictor import ConformalPredictor, min_calibration
from .set_metrics import set_metrics

#: the numbers a cell under shift keeps (averaged over families; the per-class and per-size detail stays in the
#: clean-split result)
CELL_KEYS = ("coverage", "size_mean", "size_median", "empty", "singleton", "class_coverage_worst",
             "size_stratified_worst")


@dataclass(frozen=True)
class SetRequest:
    """What prediction sets to build: ``score`` (``thr``, ``aps``, ``raps``), miscoverage ``alpha``, class-
    conditional quantiles with ``mondrian``, randomised scores, RAPS's ``k_reg`` and ``lam``, the seed of U, and
    ``weighted`` quantiles under covariate shift (marginal only)."""

    score: str = "aps"
    alpha: float = 0.1
    mondrian: bool = False
    randomized: bool = True
    k_reg: int = 1
    lam: float = 0.01
    seed: int = 0
    weighted: bool = False

    def check(self) -> "SetRequest":
        """One-line ValueError (or UnknownNameError with the closest names) before anything is read."""
        self.predictor()  # checks α, the score's name and RAPS's settings
        if self.weighted and self.mondrian:
            raise ValueError("weighted sets have one (weighted) quantile per input, not one per class: use "
                             "weighted or mondrian, not both")
        return self

    def check_size(self, n: int, what: str = "the calibration split") -> None:
        """A split too small for a finite quantile (⌈1/α⌉ − 1 samples) is one line."""
        need = min_calibration(self.alpha)
        if n < need:
            raise ValueError(f"{what} has {n} samples; a {100 * (1 - self.alpha):g}% conformal quantile needs at "
                             f"least {need} (⌈1/α⌉ − 1 for α = {self.alpha:g})")

    def predictor(self) -> ConformalPredictor:
        return ConformalPredictor(self.score, self.alpha, self.randomized, self.k_reg, self.lam, self.mondrian,
                                  self.seed)

    def describe(self) -> str:
        extra = f", k_reg {self.k_reg}, λ {self.lam:g}" if self.score == "raps" else ""
        kind = "class-conditional " if self.mondrian else "shift-weighted " if self.weighted else ""
        return f"{kind}{self.score.upper()} sets at α = {self.alpha:g} (target coverage {1 - self.alpha:.0%}{extra})"


def fit_columns(request: SetRequest, probs: Mapping[str, torch.Tensor], labels: torch.Tensor
                ) -> dict[str, ConformalPredictor]:
    """One conformal predictor per column, fitted on that column's calibration probabilities."""
    request.check_size(int(labels.shape[0]))
    return {name: request.predictor().fit(p, labels) for name, p in probs.items()}


def quantile_of(predictor: ConformalPredictor) -> Any:
    """The fitted quantile (a list per class for Mondrian; None for a class too rare to bound, whose label is always
    in the set)."""
    if predictor.mondrian:
        return [float(q) if math.isfinite(q) else None for q in predictor.class_quantiles.tolist()]
    return float(predictor.quantile)


def shift_weights(weighted: bool, calib_probs: torch.Tensor, probs: torch.Tensor
                  ) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(calibration, evaluated) likelihood-ratio weights from a domain classifier on the raw log-probabilities when
    ``weighted``; None otherwise."""
    return domain_weights(log_prob_features(calib_probs), log_prob_features(probs)) if weighted else None


def set_columns(fitted: Mapping[str, ConformalPredictor], probs: Mapping[str, torch.Tensor], labels: torch.Tensor,
                cell: bool = False, weights: tuple[torch.Tensor, torch.Tensor] | None = None
                ) -> dict[str, dict[str, Any]]:
    """The set metrics (:func:`~metacal.conformal.set_metrics.set_metrics`) of every column; ``cell`` keeps only
    :data:`CELL_KEYS` (numbers that average over families); ``weights`` (:func:`shift_weights`) for weighted sets."""
    out = {}
    for name, predictor in fitted.items():
        metrics = set_metrics(predictor.predict_set(probs[name], weights=weights), labels)
        out[name] = {k: metrics[k] for k in CELL_KEYS} if cell else {**metrics, "quantile": quantile_of(predictor)}
    return out


def result_head(request: SetRequest, n_calib: int) -> dict[str, Any]:
    return {**asdict(request), "n_calib": n_calib, "target": 1 - request.alpha}


def format_sets(head: Mapping[str, Any], columns: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """A table: one row per column, coverage and sizes in percent and labels."""
    request = SetRequest(**{k: head[k] for k in SetRequest.__dataclass_fields__ if k in head})
    lines = [f"prediction sets: {request.describe()}, calibrated on {head['n_calib']} samples"]
    names = ["column", "coverage %", "mean size", "median", "empty %", "singleton %", "worst class cov. %",
             "worst size-group cov. %"]
    rows = [[name, f"{100 * m['coverage']:.2f}", f"{m['size_mean']:.3f}", f"{m['size_median']:g}",
             f"{100 * m['empty']:.2f}", f"{100 * m['singleton']:.2f}", f"{100 * m['class_coverage_worst']:.2f}",
             f"{100 * m['size_stratified_worst']:.2f}"] for name, m in columns.items()]
    widths = [max(len(r[i]) for r in [names, *rows]) for i in range(len(names))]
    lines.append("  ".join(n.rjust(w) if i else n.ljust(w) for i, (n, w) in enumerate(zip(names, widths))))
    lines += ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    return lines
