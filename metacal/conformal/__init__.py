"""Prediction sets with a coverage guarantee: split conformal prediction on any classifier's probabilities.

``ConformalPredictor(score="aps", alpha=0.1).fit(cal_probs, cal_labels).predict_set(test_probs)`` → a boolean N×K
mask whose rows contain the true label with probability ≥ 1 − α on exchangeable data. Scores (``available()``):
``thr`` (LAC), ``aps`` (randomised or not), ``raps``; ``mondrian=True`` gives class-conditional coverage.
``set_metrics(sets, labels)``: coverage, sizes, empty and singleton shares, the worst class, size-stratified
coverage. Under covariate shift, ``predict_set(probs, weights=domain_weights(cal_features, test_features))``
weights the calibration scores by the likelihood ratio (Tibshirani et al. 2019). Formulas and conventions:
docs/conventions.md#conformal-prediction-sets.
"""

from .predictor import ConformalPredictor, check_alpha, conformal_quantile, min_calibration, quantile_rank
from .domain_weights import domain_weights, log_prob_features
from .scores import SCORES, available, ranks_and_mass_above
from .set_metrics import set_metrics
from .weighted import weighted_quantiles

__all__ = ["ConformalPredictor", "SCORES", "available", "check_alpha", "conformal_quantile", "domain_weights",
           "log_prob_features", "min_calibration", "quantile_rank", "ranks_and_mass_above", "set_metrics",
           "weighted_quantiles"]
