"""Perturbation temperature scaling (Tomani, Gruber, Erdem, Cremers & Buettner, CVPR 2021, "Post-hoc uncertainty
calibration for domain drift scenarios"): temperature scaling, probs = softmax(z/T), with T fitted by NLL on
validation predictions that include perturbed inputs, so that T also suits predictions under domain drift.

Tomani et al. perturb the validation images at several strengths, from mild to strong, and fit the
calibrator on the perturbed validation set. metacal fits T by the NLL of :func:`fit_temperature_nll` on the
concatenation of the clean validation logits and the same split's logits under perturbations of mixed
severities (made elsewhere, e.g. by the data package's ``perturbed_split``; this module only sees the logits):

    T = argmin_T  (1/(N + M)) [Σ_{n ≤ N} CE(z_n / T, y_n) + Σ_{m ≤ M} CE(z̃_m / T, ỹ_m)]

The clean samples stand in for the mildest perturbation level (severity 0). Applying the map is plain
temperature scaling.
"""

from __future__ import annotations

import torch

from metacal.metrics.inputs import array_inputs

from ._checks import refuse_probabilities
from .affine import check_finite_logits
from .temperature import TemperatureScaling


class PerturbationTemperatureScaling(TemperatureScaling):
    """Temperature scaling (NLL) fitted on clean plus perturbed logits: ``fit(logits, labels, perturbed_logits,
    perturbed_labels)`` → self; ``transform(logits)`` → softmax(z/T). ``state_dict`` is that of
    :class:`TemperatureScaling`."""

    name = "perturbation temperature scaling"

    def __init__(self, max_iter: int = 100) -> None:
        super().__init__("nll", max_iter=max_iter)

    @array_inputs("logits", "labels", "perturbed_logits", "perturbed_labels")
    def fit(self, logits: torch.Tensor, labels: torch.Tensor, perturbed_logits: torch.Tensor,
            perturbed_labels: torch.Tensor) -> "PerturbationTemperatureScaling":
        check_finite_logits(logits, labels)
        check_finite_logits(perturbed_logits, perturbed_labels)
        if perturbed_logits.shape[1] != logits.shape[1]:
            raise ValueError(f"perturbed logits have K = {perturbed_logits.shape[1]} classes, the clean ones "
                             f"K = {logits.shape[1]}")
        refuse_probabilities(logits, self.name)
        refuse_probabilities(perturbed_logits, self.name)
        z = torch.cat([logits.detach().double(), perturbed_logits.detach().double().to(logits.device)])
        y = torch.cat([labels.long(), perturbed_labels.long().to(labels.device)])
        super().fit(z, y)
        return self

    def __repr__(self) -> str:
        return f"PerturbationTemperatureScaling(temperature={self.temperature:.4g})"
