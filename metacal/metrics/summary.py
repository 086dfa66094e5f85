"""``summary(probs, labels, num_bins=15)``: the evaluate-CLI metric set as a dict of floats
(docs/conventions.md#interfaces)."""

from __future__ import annotations

import torch

from .calibration import calibration_error_from_confidence
from .classwise import classwise_ece
from .inputs import array_inputs, check_num_bins, check_probs_labels, top_label
from .kde import kde_ece_from_confidence
from .scores import brier, nll
from .smooth import sece_metric_from_confidence, smece_from_confidence

SUMMARY_KEYS = (
    "n", "num_classes", "error", "nll", "brier", "ece", "mce", "ace", "rmsce",
    "classwise_ece", "sece", "kde_ece", "smece",
)  # fmt: skip
BINNING_FREE_KEYS = ("sece", "kde_ece", "smece")  # SECE and KDE-ECE are O(N²): ~1 s each at N = 10,000


@array_inputs("probs", "labels")
def summary(probs: torch.Tensor, labels: torch.Tensor, num_bins: int = 15,
            binning_free: bool = True) -> dict[str, float]:
    """Exactly the keys ``SUMMARY_KEYS`` (fractions; nll in nats; n and num_classes as ints); without
    the ``BINNING_FREE_KEYS`` when ``binning_free`` is False (the trainer's cheap per-epoch view).

    ece/mce/rmsce: equal width; ace: equal mass (top label); classwise_ece: Wang & Golebiowski 2024, eq. 14 — all with
    ``num_bins`` bins. sece: hard accuracy, h = 0.01. kde_ece, smece: binning-free.
    """
    check_probs_labels(probs, labels)
    num_bins = check_num_bins(num_bins)
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
        "classwise_ece": float(classwise_ece(probs, labels, num_bins)),
    }
    if binning_free:
        out.update(_binning_free(conf, correct))
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
