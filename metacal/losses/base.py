"""The contract every training loss follows (the trainer and the meta core rely on it).

A loss is an ``nn.Module`` called as ``loss(logits, targets, **extra) -> Tensor``:

* ``reduction``: ``"mean"`` (default) or ``"none"`` (one value per sample, what the meta step needs).
* Hooks with no-op defaults, so the trainer can call them on any loss:
  ``set_epoch(epoch)`` before each epoch (epoch-scheduled losses, warm-up of secondary terms),
  ``prepare_batch(inputs, targets) -> (inputs, extra)`` before the forward pass (mixup mixes the
  inputs and hands the second targets and λ back through ``extra``),
  ``update_from_validation(logits, targets)`` once per epoch (stateful losses such as AdaFocal),
  ``check_validation_size(n)``: ValueError when ``update_from_validation`` cannot work on n validation
  samples (the trainer calls it before a run writes anything).
* ``meta_parameters()``: parameters a meta-learner trains (learnable L2 coefficients); empty by default.
* ``per_sample_gamma``: True when the call takes a per-sample ``gamma=`` tensor that changes the value
  differentiably (the focal family) — what a γ-Net needs; ``needs_head_params``: True when the call
  needs the classifier head's ``head_weight=``/``head_bias=`` (learnable L2).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn


def check_weight(what: str, value: float) -> None:
    """ValueError unless ``value`` (a weight or rate named ``what``) is a finite number >= 0: a NaN or infinite
    one makes every loss non-finite, a negative one rewards what the term penalises."""
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{what} must be a finite number >= 0, got {value}")


def reduce(values: torch.Tensor, reduction: str) -> torch.Tensor:
    """Mean over the batch, or the per-sample values."""
    if reduction == "mean":
        return values.mean()
    if reduction == "none":
        return values
    raise ValueError(f"reduction must be 'mean' or 'none', got {reduction!r}")


class Loss(nn.Module):
    """Base class: stores ``reduction`` and provides the trainer hooks."""

    per_sample_gamma: bool = False
    needs_head_params: bool = False
    #: the float attribute whose increase lowers the trained network's confidence, and its range: what the
    #: automatic scalar (metacal/meta/auto.py, ``learner: auto``) sets; None: the loss has none
    confidence_knob: str | None = None
    knob_range: tuple[float, float] = (0.0, float("inf"))
    #: the smallest change of the knob expected to show in the gap; the automatic scalar's ``probe`` counts a push
    #: as tried only after ``probe`` of these as well as ``probe`` first steps (metacal/meta/root_finder.py)
    knob_unit: float = 0.0
    #: draws random numbers on the host for each batch (mixup's λ and permutation): a CUDA graph would bake one
    #: draw in, so ``run.cuda_graphs`` refuses the loss (metacal/train/cuda_graphs.py)
    draws_on_host: bool = False

    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        if reduction not in ("mean", "none"):
            raise ValueError(f"reduction must be 'mean' or 'none', got {reduction!r}")
        self.reduction = reduction
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def prepare_batch(
        self, inputs: torch.Tensor, targets: torch.Tensor
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        return inputs, {}

    @torch.no_grad()
    def update_from_validation(self, logits: torch.Tensor, targets: torch.Tensor) -> None:
        return None

    def check_validation_size(self, n: int) -> None:
        return None

    def meta_parameters(self) -> list[nn.Parameter]:
        return []

    def epoch_metrics(self) -> dict[str, float]:
        """Numbers for the epoch's history line after :meth:`update_from_validation` (e.g. AdaFocal's γ)."""
        return {}


class WrapsPrimary(Loss):
    """A loss built around ``self.primary`` (mixup, primary + secondary): the trainer hooks, the
    meta-parameters and ``per_sample_gamma`` are the primary's."""

    primary: Loss

    def set_epoch(self, epoch: int) -> None:
        super().set_epoch(epoch)
        self.primary.set_epoch(epoch)

    @torch.no_grad()
    def update_from_validation(self, logits: torch.Tensor, targets: torch.Tensor) -> None:
        self.primary.update_from_validation(logits, targets)

    def check_validation_size(self, n: int) -> None:
        self.primary.check_validation_size(n)

    def meta_parameters(self) -> list[nn.Parameter]:
        return self.primary.meta_parameters()

    def epoch_metrics(self) -> dict[str, float]:
        return self.primary.epoch_metrics()

    @property
    def per_sample_gamma(self) -> bool:  # type: ignore[override]
        return self.primary.per_sample_gamma
