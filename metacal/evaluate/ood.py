"""OOD detection for ``python -m metacal.evaluate --ood OOD.npz``: PRED's samples are the in-distribution
positives, OOD's the negatives (:mod:`metacal.metrics.ood`; docs/conventions.md#selective)."""

from __future__ import annotations

from metacal.metrics.ood import DETECTION_KEYS, ood_detection
from metacal.predictions import LOG_EPS, Predictions

OOD_LABELS = {"auroc": "AUROC (%)", "aupr_in": "AUPR-In (%)", "aupr_out": "AUPR-Out (%)", "fpr95": "FPR95 (%)"}


def ood_result(pred: Predictions, ood: Predictions) -> dict:
    """``{"ood": {score: {auroc, aupr_in, aupr_out, fpr95}}}`` with PRED as the in-distribution positives, plus
    ``"ood_logits_from": "log_probs"`` when either file lacks logits (module docstring)."""
    if ood.num_classes != pred.num_classes:
        raise ValueError(f"--ood file has K = {ood.num_classes} classes but predictions have K = {pred.num_classes}")
    if pred.logits is not None and ood.logits is not None:
        return {"ood": ood_detection(pred.logits, ood.logits)}
    inside, outside = (p.probs.clamp_min(LOG_EPS).log() for p in (pred, ood))
    return {"ood": ood_detection(inside, outside), "ood_logits_from": "log_probs"}


def format_ood_table(ood: dict) -> str:
    """OOD detection table: one row per score, one column per metric, in percent."""
    lines = [f"{'OOD detection':<14}" + "".join(f"{OOD_LABELS[key]:>14}" for key in DETECTION_KEYS)]
    lines += [f"{score:<14}" + "".join(f"{100 * values[key]:>14.2f}" for key in DETECTION_KEYS)
              for score, values in ood.items()]
    return "\n".join(lines)
