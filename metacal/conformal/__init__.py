"""Prediction sets with a coverage guarantee: split conformal prediction on any classifier's probabilities.

``ConformalPredictor(score="aps", alpha=0.1).fit(cal_probs, cal_labels).predict_set(test_probs)`` → a boolean N×K
mask whose rows contain the true label with probability ≥ 1 − α on exchangeable data. Scores (``available()``):
``thr`` (LAC), ``aps`` (randomised or not), ``raps``; ``mondrian=True`` gives class-conditional coverage.
``set_metrics(sets, labels)``: coverage, sizes, empty and singleton shares, the worst class, size-stratified
coverage. Formulas and conventions: docs/conventions.md#conformal-prediction-sets.
"""

from .predictor import ConformalPredictor, check_alpha, conformal_quantile, min_calibration, quantile_rank
from .scores import SCORES, available, ranks_and_mass_above
from .set_metrics import set_metrics

__all__ = ["ConformalPredictor", "SCORES", "available", "check_alpha", "conformal_quantile", "min_calibration",
           "quantile_rank", "ranks_and_mass_above", "set_metrics"]
