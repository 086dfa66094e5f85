"""What a run records about its data regime (label noise, a trusted held-out set, a long tail, known posteriors),
in metrics.json and predictions/test.npz:

- ``data``: samples and class counts per split, and the records of the regime options (realised noise rate and
  transition counts per split, trusted sizes, the long tail's ρ): :func:`data_record`;
- ``test_noisy_labels``: the test metrics against labels noised as the training labels were, raw and after the
  run's temperature scaling (the view of a user whose deployment labels are as noisy): :func:`truth_metrics`;
- ``test.true_posterior`` / ``test_after_ts.true_posterior``: the calibration against the true posterior
  (metacal/metrics/true_posterior.py) where the data has one;
- ``noise_detection``: at the selected epoch, how well per-sample signals of the training set separate flipped
  from clean labels (AUROC, flipped = positive; 0.5 = no information): the CE loss on the carried label and, with
  a γ-Net, its γ and the focal weight (1 − p̂_y)^γ it implies (:class:`NoiseProbe`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from metacal import metrics
from metacal.data.long_tail import class_counts
from metacal.metrics.ood import auroc
from metacal.predictions import Predictions

REGIME_KEYS = ("label_noise", "trusted", "imbalance")


def data_record(bundle: Any) -> dict[str, Any]:
    """Sizes and class counts (by the labels each split carries) of every split, plus the regime options' records."""
    splits = {name: getattr(bundle, name) for name in ("train", "val", "meta_val", "test")
              if getattr(bundle, name, None) is not None}
    record: dict[str, Any] = {"sizes": {name: len(data) for name, data in splits.items()}}
    try:
        record["class_counts"] = {name: class_counts(data, bundle.num_classes) for name, data in splits.items()}
    except (AttributeError, TypeError):  # a dataset of one's own without targets: sizes only
        pass
    record.update({key: bundle.info[key] for key in REGIME_KEYS if key in bundle.info})
    return record


def with_truth(pred: Predictions, split: Any, noisy_labels: torch.Tensor | None) -> Predictions:
    """``pred`` (of ``split``, in order) with the split's noisy labels and true posteriors where they exist."""
    posteriors = getattr(split, "posteriors", None)  # a subset of data without posteriors raises AttributeError
    return replace(pred, noisy_labels=noisy_labels,
                   posteriors=None if posteriors is None else posteriors.to(torch.float64))


def truth_metrics(test: Predictions, ts: Any, num_bins: int) -> dict[str, Any]:
    """metrics.json's ``test_noisy_labels`` and the ``true_posterior`` records of ``test`` raw and after ``ts``."""
    scaled = ts.transform(test.logits.double())
    out: dict[str, Any] = {}
    if test.noisy_labels is not None:
        out["test_noisy_labels"] = {
            "raw": _numbers(metrics.summary(test.probs, test.noisy_labels, num_bins, binning_free=False)),
            "after_ts": _numbers(metrics.summary(scaled, test.noisy_labels, num_bins, binning_free=False))}
    if test.posteriors is not None:
        out["true_posterior"] = {"raw": metrics.true_posterior_summary(test.probs, test.posteriors),
                                 "after_ts": metrics.true_posterior_summary(scaled, test.posteriors)}
    return out


def _numbers(summary: dict[str, Any]) -> dict[str, float | int]:
    """The summary's scalar entries (counts as ints)."""
    return {k: int(v) if k in ("n", "num_classes") else float(v) for k, v in summary.items()
            if isinstance(v, (int, float))}


class NoiseProbe:
    """The training split's flipped-vs-clean separation (module docstring), measured on a loader over the train
    split in its order (the train split's own view: with augmentation, augmented inputs)."""

    def __init__(self, loader: Any, flipped: torch.Tensor) -> None:
        self.loader, self.flipped = loader, flipped.bool()

    @staticmethod
    def wanted(bundle: Any) -> bool:
        """Whether the train split carries noisy labels with flipped and clean samples both."""
        train = bundle.train
        if not hasattr(train, "clean_targets"):
            return False
        flipped = int((train.labels != train.clean_targets).sum())
        return 0 < flipped < len(train.labels)

    @classmethod
    def of(cls, bundle: Any, loader: Any) -> "NoiseProbe":
        """The probe of ``bundle``'s train split (:meth:`wanted`), read through ``loader`` (in order)."""
        return cls(loader, bundle.train.labels != bundle.train.clean_targets)

    def measure(self, predict: Any) -> dict[str, float]:
        """``predict(loader)`` → the train split's Predictions (carried labels, γ with a γ-Net); the AUROCs."""
        pred = predict(self.loader)
        loss = -pred.probs.gather(1, pred.labels.unsqueeze(1)).squeeze(1).clamp_min(1e-12).log()
        scores = {"ce_loss": loss}
        if pred.gamma is not None:
            p_y = pred.probs.gather(1, pred.labels.unsqueeze(1)).squeeze(1)
            gamma = pred.gamma.to(torch.float64)
            scores.update(gamma=gamma, focal_weight=(1.0 - p_y).clamp_min(0.0) ** gamma)
        out = {f"auroc_{name}": auroc(s[self.flipped], s[~self.flipped]) for name, s in scores.items()}
        out["flipped_fraction"] = float(self.flipped.double().mean())
        if pred.gamma is not None:
            out["gamma_flipped_mean"] = float(pred.gamma[self.flipped].mean())
            out["gamma_clean_mean"] = float(pred.gamma[~self.flipped].mean())
        return out
