"""``summary(probs, labels, num_bins=15, ci=None)``: the evaluate-CLI metric set as a dict of floats, with
bootstrap intervals on request (docs/conventions.md#interfaces, #metrics, #intervals)."""

from __future__ import annotations

from typing import Any

import torch

from .bootstrap import BootstrapSpec, bootstrap_intervals
from .calibration import calibration_error_from_confidence, debiased_l2_ce_from_confidence, ece_sweep_from_confidence
from .classwise import classwise_ece
from .inputs import array_inputs, check_num_bins, check_probs_labels, top_label
from .kde import kde_ece_from_confidence
from .selective import selective_from_confidence
from .scores import brier, nll
from .smooth import sece_metric_from_confidence, smece_from_confidence

SUMMARY_KEYS = (
    "n", "num_classes", "error", "nll", "brier", "ece", "mce", "ace", "rmsce", "ece_sweep", "debiased_l2_ce",
    "classwise_ece", "sece", "kde_ece", "smece", "aurc", "augrc", "risk_at_coverage", "coverage_at_risk",
)  # fmt: skip
BINNING_FREE_KEYS = ("sece", "kde_ece", "smece")  # SECE and KDE-ECE are O(N²): ~1 s each at N = 10,000


@array_inputs("probs", "labels")
def summary(probs: torch.Tensor, labels: torch.Tensor, num_bins: int = 15, binning_free: bool = True,
            ci: BootstrapSpec | bool | None = None) -> dict[str, Any]:
    """Exactly the keys ``SUMMARY_KEYS`` (fractions; nll in nats; n and num_classes as ints); without
    the ``BINNING_FREE_KEYS`` when ``binning_free`` is False (the trainer's cheap per-epoch view).

    Every calibration error is TOP-LABEL (confidence max_k p_k, correct = argmax is the label) except
    classwise_ece. ece/mce/rmsce: equal width; ace: equal mass; ece_sweep: equal mass at the largest monotone bin
    count (Roelofs et al. 2022); debiased_l2_ce: equal width, sqrt(max(Ê², 0)) with Kumar, Liang & Ma 2019's bias
    correction (metrics.calibration); classwise_ece: every class on its own probability (Wang & Golebiowski 2024,
    eq. 14) — all with ``num_bins`` bins except ece_sweep. sece: hard accuracy, h = 0.01. kde_ece, smece:
    binning-free. aurc, augrc, risk_at_coverage ({"0.8", "0.9"}), coverage_at_risk ({"0.01", "0.05"}): selective
    prediction on the top-label confidence (:mod:`metacal.metrics.selective`; nested dicts for the last two).

    ``ci`` (a :class:`BootstrapSpec`, or True for its defaults B = 1000, level 0.9, seed 0, basic intervals) adds
    ``"ci"``: bootstrap intervals (:func:`metacal.metrics.bootstrap.bootstrap_intervals`).
    """
    check_probs_labels(probs, labels)
    num_bins = check_num_bins(num_bins)
    spec = None if ci is None or ci is False else BootstrapSpec() if ci is True else ci
    if spec is not None and not isinstance(spec, BootstrapSpec):
        raise ValueError(f"ci must be a BootstrapSpec, True or None, got {type(ci).__name__}")
    probs = probs.detach()
    labels = labels.to(probs.device)
    conf, _, correct = top_label(probs, labels)
    out = {
        "n": int(probs.shape[0]),
        "num_classes": int(probs.shape[1]),
        "error": float(1.0 - correct.double().mean()),
        "nll": float(nll(probs, labels)),
        "brier": float(brier(probs, labels)),
        "ece": float(calibration_error_from_confidence(conf, correct, num_bins, "width", "l1")),
        "mce": float(calibration_error_from_confidence(conf, correct, num_bins, "width", "max")),
        "ace": float(calibration_error_from_confidence(conf, correct, num_bins, "mass", "l1")),
        "rmsce": float(calibration_error_from_confidence(conf, correct, num_bins, "width", "l2")),
        "ece_sweep": float(ece_sweep_from_confidence(conf, correct)[0]),
        "debiased_l2_ce": float(debiased_l2_ce_from_confidence(conf, correct, num_bins)),
        "classwise_ece": float(classwise_ece(probs, labels, num_bins)),
    }
    if binning_free:
        out.update(_binning_free(conf, correct))
    out.update(selective_from_confidence(conf, correct))
    if spec is not None:
        out["ci"] = bootstrap_intervals(probs, labels, num_bins, spec, binning_free)
    return out


@array_inputs("probs", "labels")
def binning_free_summary(probs: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
    """Exactly the ``BINNING_FREE_KEYS`` of :func:`summary` (the trainer adds them for the selected epoch)."""
    check_probs_labels(probs, labels)
    conf, _, correct = top_label(probs.detach(), labels.to(probs.device))
    return _binning_free(conf, correct)


def _binning_free(conf: torch.Tensor, correct: torch.Tensor) -> dict[str, float]:
    return {
        "sece": float(sece_metric_from_confidence(conf, correct)),
        "kde_ece": float(kde_ece_from_confidence(conf, correct)),
        "smece": float(smece_from_confidence(conf, correct)),
    }
