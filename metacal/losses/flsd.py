"""Focal loss with scheduled γ (Mukhoti et al., 2020, "Calibrating deep neural networks using focal
loss"): sample-dependent FLSD-53 / FLSD-52 and epoch-scheduled FLSc-531 (docs/conventions.md#losses; Lin et al. 2025, App.).

γ is chosen from p_t or the epoch and carries no gradient (as in torrvision/focal_calibration).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .base import Loss, reduce
from .focal import focal_per_sample
from .registry import LOSSES


def flsd_gamma(probs_t: torch.Tensor, gamma_high: float) -> torch.Tensor:
    """γ = 5 if p_t < 0.2, 3 if 0.2 ≤ p_t < 0.5, ``gamma_high`` if p_t ≥ 0.5 (no gradient)."""
    p = probs_t.detach()
    five = torch.full_like(p, 5.0)
    three = torch.full_like(p, 3.0)
    high = torch.full_like(p, float(gamma_high))
    return torch.where(p < 0.2, five, torch.where(p < 0.5, three, high))


class SampleDependentFocal(Loss):
    """FLSD: focal loss with γ(p_t) from :func:`flsd_gamma`."""

    gamma_high: float = 3.0

    def forward(self, logits: torch.Tensor, targets: torch.Tensor, **extra) -> torch.Tensor:
        # p_t from softmax (not exp(log_softmax)) so that e.g. K equal logits give exactly 1/K.
        p_t = F.softmax(logits.detach(), dim=-1).gather(-1, targets.long().unsqueeze(-1)).squeeze(-1)
        gamma = flsd_gamma(p_t, self.gamma_high)
        return reduce(focal_per_sample(logits, targets, gamma), self.reduction)


@LOSSES.register("flsd53")
class FLSD53(SampleDependentFocal):
    """FLSD-53: γ = 5 for p_t ∈ [0, 0.2), 3 for p_t ∈ [0.2, 1] (Mukhoti et al., 2020)."""

    gamma_high = 3.0


@LOSSES.register("flsd52")
class FLSD52(SampleDependentFocal):
    """FLSD-52: γ = 5 for p_t < 0.2, 3 for 0.2 ≤ p_t < 0.5, 2 for p_t ≥ 0.5 (Mukhoti et al., 2020)."""

    gamma_high = 2.0


@LOSSES.register("flsc531")
class FLSc531(Loss):
    """FLSc-531: γ = 5 for epochs [0, 100), 3 for [100, 250), 1 from 250 on (Mukhoti et al., 2020).

    The epoch comes from ``set_epoch`` (0-based, called by the trainer before each epoch).
    ``milestones`` and ``gammas`` can be changed for shorter schedules.
    """

    def __init__(
        self,
        milestones: tuple[int, int] = (100, 250),
        gammas: tuple[float, float, float] = (5.0, 3.0, 1.0),
        reduction: str = "mean",
    ) -> None:
        super().__init__(reduction)
        if len(gammas) != len(milestones) + 1 or list(milestones) != sorted(milestones):
            raise ValueError("flsc531 needs increasing milestones and len(gammas) == len(milestones) + 1")
        self.milestones = tuple(int(m) for m in milestones)
        self.gammas = tuple(float(g) for g in gammas)

    def current_gamma(self) -> float:
        return self.gammas[sum(self.epoch >= m for m in self.milestones)]

    def forward(self, logits: torch.Tensor, targets: torch.Tensor, **extra) -> torch.Tensor:
        return reduce(focal_per_sample(logits, targets, self.current_gamma()), self.reduction)
