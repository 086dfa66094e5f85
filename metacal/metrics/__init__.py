"""Calibration metrics on torch tensors (any device): probs N×K (rows sum to 1), labels N ints; fractions.
Every public function also takes numpy arrays or lists (converted by ``inputs.as_tensor``); results are the
same as for tensors (0-dim tensors or floats as each function documents).

Modules: ``scores`` (error, NLL, Brier), ``binning`` (bins + per-bin table), ``calibration`` (top-label ECE, MCE,
RMSCE, ACE, ECE-sweep, debiased L2, KS, ECE vs #bins), ``classwise`` (classwise ECE/ACE), ``kde`` (KDE-ECE),
``smooth`` (SECE metric, smECE), ``selective`` (risk–coverage curve, AURC, AUGRC), ``ood`` (OOD detection
from logits: AUROC, AUPR, FPR95 of four scores), ``summary``, ``weighted`` (the summary metrics of many
count-weighted resamples at once), ``bootstrap`` (percentile intervals), ``accumulator`` (streaming),
``true_posterior`` (calibration against known posteriors).
"""

from .accumulator import CalibrationAccumulator
from .binning import BinStatistics, bin_index, bin_statistics
from .bootstrap import BootstrapSpec, bin_accuracy_bands, bootstrap_intervals, bootstrap_replicates
from .calibration import (
    ace,
    calibration_error,
    calibration_error_from_confidence,
    debiased_l2_ce,
    debiased_l2_ce_from_confidence,
    ece,
    ece_sweep,
    ece_sweep_from_confidence,
    ece_vs_bins,
    ks_error,
    ks_error_from_confidence,
    mce,
    overconfidence,
    rmsce,
)
from .classwise import classwise_ace, classwise_ece
from .inputs import as_tensor, check_probs_labels, top_label
from .kde import kde_ece, kde_ece_from_confidence
from .scores import brier, error_rate, nll
from .ood import ood_detection, ood_scores
from .selective import aurc, augrc, coverage_at_risk, risk_at_coverage, risk_coverage_curve, selective_summary
from .smooth import sece_metric, sece_metric_from_confidence, smece, smece_from_confidence
from .summary import BINNING_FREE_KEYS, SUMMARY_KEYS, binning_free_summary, summary
from .true_posterior import bayes_error, posterior_gap, posterior_tv, true_posterior_summary

__all__ = [
    "CalibrationAccumulator", "BinStatistics", "bin_index", "bin_statistics", "BootstrapSpec", "bin_accuracy_bands",
    "bootstrap_intervals", "bootstrap_replicates", "ace", "calibration_error", "calibration_error_from_confidence",
    "debiased_l2_ce", "debiased_l2_ce_from_confidence", "ece", "ece_sweep", "ece_sweep_from_confidence", "ece_vs_bins",
    "ks_error", "ks_error_from_confidence", "mce", "overconfidence", "rmsce", "classwise_ace", "classwise_ece",
    "as_tensor", "check_probs_labels", "top_label", "kde_ece", "kde_ece_from_confidence", "brier", "error_rate", "nll",
    "ood_detection", "ood_scores", "aurc", "augrc", "coverage_at_risk", "risk_at_coverage", "risk_coverage_curve",
    "selective_summary", "sece_metric", "sece_metric_from_confidence", "smece", "smece_from_confidence",
    "SUMMARY_KEYS", "BINNING_FREE_KEYS", "binning_free_summary", "summary", "bayes_error", "posterior_gap",
    "posterior_tv", "true_posterior_summary",
]  # fmt: skip
