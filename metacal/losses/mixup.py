"""Mixup (Zhang et al., 2018; facebookresearch/mixup-cifar10) around any primary loss.

``prepare_batch(x, y)`` draws λ ~ Beta(α, α) once per batch and a permutation π, and returns
x̃ = λ·x + (1 − λ)·x[π] with ``extra = {"targets_b": y[π], "lam": λ}``;
``forward(z, y, targets_b, lam) = λ·PL(z, y) + (1 − λ)·PL(z, y_b)`` (per sample for ``reduction="none"``).
Without ``targets_b`` (evaluation) it is the primary loss. α = 1 default (Wang & Golebiowski 2024 baseline
"Mix-Up (α = 1.0)"); α = 0 disables mixing (λ = 1), as in the reference code.
Randomness comes from a ``torch.Generator`` the loss owns (``seed``): λ is drawn by inverting the Beta CDF
of a uniform from that generator, π by ``randperm`` with it; the generator state is saved in
``state_dict`` (extra state), so a resumed run draws the same sequence.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from scipy.special import betaincinv

from .base import WrapsPrimary
from .registry import LOSSES


@LOSSES.register("mixup")
class Mixup(WrapsPrimary):
    """λ·PL(y) + (1 − λ)·PL(y_π) on mixed inputs; α = 1 (Wang & Golebiowski 2024), primary "ce" by default."""

    draws_on_host = True  # λ and π per batch, from a CPU generator

    def __init__(
        self,
        alpha: float = 1.0,
        primary: str = "ce",
        primary_params: dict[str, Any] | None = None,
        seed: int = 0,
        reduction: str = "mean",
    ) -> None:
        super().__init__(reduction)
        if not (math.isfinite(alpha) and alpha >= 0):
            raise ValueError(f"mixup alpha must be >= 0 (0 disables mixing), got {alpha}")
        primary_params = dict(primary_params or {})
        if "reduction" in primary_params:
            raise ValueError("give reduction= to mixup, not in primary_params")
        self.alpha = float(alpha)
        self.primary = LOSSES.build(primary, reduction=reduction, **primary_params)
        self.generator = torch.Generator()
        self.generator.manual_seed(int(seed))

    def sample_lambda(self) -> float:
        """λ ~ Beta(α, α) from the owned generator (inverse CDF of a uniform); 1 when α = 0."""
        if self.alpha == 0:
            return 1.0
        u = torch.rand((), generator=self.generator, dtype=torch.float64).item()
        return float(betaincinv(self.alpha, self.alpha, u))

    def prepare_batch(
        self, inputs: torch.Tensor, targets: torch.Tensor
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        lam = self.sample_lambda()
        perm = torch.randperm(inputs.shape[0], generator=self.generator).to(inputs.device)
        mixed = lam * inputs + (1.0 - lam) * inputs[perm]
        return mixed, {"targets_b": targets[perm.to(targets.device)], "lam": lam}

    def forward(
        self,
        logits: torch.Tensor,
        targets: torch.Tensor,
        targets_b: torch.Tensor | None = None,
        lam: float | torch.Tensor | None = None,
        **extra,
    ) -> torch.Tensor:
        if targets_b is None:
            return self.primary(logits, targets, **extra)
        if lam is None:
            raise ValueError("mixup got targets_b without lam; pass the extra dict from prepare_batch")
        return lam * self.primary(logits, targets, **extra) + (1.0 - lam) * self.primary(
            logits, targets_b, **extra
        )



    def get_extra_state(self) -> dict[str, Any]:
        return {"generator_state": self.generator.get_state()}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        self.generator.set_state(state["generator_state"])
