"""Inverse focal loss (Wang, Feng & Zhang, NeurIPS 2021, eq. 4): ℓ = −(1 + p_y)^γ̄ log p_y.

γ̄ = 1 default (the smallest value of Wang, Feng & Zhang 2021's sweep γ̄ ∈ {1, 2, 3}, Fig. 6).
"""

from __future__ import annotations

import torch

from .focal import GammaLoss, log_pt
from .registry import LOSSES


def inverse_focal_per_sample(
    logits: torch.Tensor, targets: torch.Tensor, gamma: torch.Tensor | float
) -> torch.Tensor:
    """−(1 + p_y)^γ log p_y = −exp(γ·log1p(p_y))·log p_y (base in [1, 2], always finite)."""
    lp = log_pt(logits, targets)
    gamma = torch.as_tensor(gamma, dtype=lp.dtype, device=lp.device)
    return -torch.exp(gamma * torch.log1p(lp.exp())) * lp


@LOSSES.register("inverse_focal")
class InverseFocalLoss(GammaLoss):
    """ℓ = −(1 + p_y)^γ̄ log p_y (Wang, Feng & Zhang 2021, eq. 4); γ̄ = 1 default (their Fig. 6 sweep 1–3).

    ``gamma``: float or per-class list; per-sample ``gamma=`` tensor at call time (differentiable).
    """

    per_sample = staticmethod(inverse_focal_per_sample)
