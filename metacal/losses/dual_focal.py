"""Dual focal loss (Tao et al., ICML 2023): ℓ = −(1 − p_y + p_j)^γ log p_y, where p_j is the largest
probability strictly below p_y (0 if there is none) — as Linwei94/ICML2023-DualFocalLoss; Lin et al. 2025, eq. 5.

γ = 5 default (Tao et al.'s CIFAR setting, used by Lin et al. 2025, App.; 2.3 for Tiny-ImageNet).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .focal import GammaLoss, safe_pow
from .registry import LOSSES


def dual_focal_base(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns (1 − p_y + p_j, log p_y) per sample.

    p_j = max{p_c : p_c < p_y} (strictly; classes tied with p_y are not "below" it), 0 if the set is
    empty (p_y is the smallest probability). 1 − p_y is computed as −expm1(log p_y).
    """
    log_probs = F.log_softmax(logits, dim=-1)
    idx = targets.long().unsqueeze(-1)
    lp = log_probs.gather(-1, idx).squeeze(-1)
    probs = log_probs.exp()
    p_y = probs.gather(-1, idx)
    below = torch.where(probs < p_y, probs, torch.zeros_like(probs))
    p_j = below.max(dim=-1).values
    return -torch.expm1(lp) + p_j, lp


@LOSSES.register("dual_focal")
class DualFocalLoss(GammaLoss):
    """ℓ = −(1 − p_y + p_j)^γ log p_y (Tao et al., 2023); γ = 5 default (Lin et al. 2025, App. / Tao et al.).

    ``gamma``: float or per-class list; per-sample ``gamma=`` tensor at call time (differentiable).
    """

    confidence_knob = "gamma"  # as focal loss: a larger γ lowers confidence (Tao et al. 2023, §3)
    knob_unit = 1.0  # the step of the usual γ grid, as for focal loss
    default_gamma = 5.0

    def per_sample(self, logits: torch.Tensor, targets: torch.Tensor, gamma: torch.Tensor | float) -> torch.Tensor:
        base, lp = dual_focal_base(logits, targets)
        return -safe_pow(base, gamma) * lp
