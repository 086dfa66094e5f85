"""Uncertainty-weighted cross-entropy (Lin et al., CVPR 2025, eq. 6): ℓ = u(p)·CE.

* BSCE: u = ‖onehot(y) − p‖_β^γ = (Σ_c |y_c − p_c|^β)^{γ/β} (the generalized Brier score, eq. 11),
  differentiated through u like any loss. β = γ = 2 makes u the Brier score Σ_c (p_c − y_c)² (eq. 3), the default.
* "-GRA" (gradient-reweighted, eq. 9–10; BSCE-GRA eq. 14): the same value, but u is held constant (detached
  from the logits), so ∇ℓ = u·∇CE exactly, as eq. 9 prescribes. ``bsce_gra`` (u = gBS), ``focal_gra``
  (u = (1 − p_y)^γ, eq. 7), ``dual_focal_gra`` (u = (1 − p_y + p_j)^γ, eq. 8).
For ``focal_gra`` / ``dual_focal_gra`` a per-sample γ tensor still receives gradient (only the
dependence of u on the logits is cut).

Difference from the reference code (Jinxu-Lin/BSCE-GRA): its BSCE-GRA and focal GRA losses detach the whole
weight, as here, but its current dual-focal GRA loss computes only p_j without gradient, so p_y inside
(1 − p_y + p_j)^γ stays differentiable: same values, but a gradient that is not u·∇CE. metacal follows eq. 9
(docs/conventions.md#losses).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .base import Loss, reduce
from .dual_focal import dual_focal_base
from .focal import GammaLoss, log_pt, safe_pow
from .registry import LOSSES


def generalized_brier(logits: torch.Tensor, targets: torch.Tensor, beta: float, gamma: float) -> torch.Tensor:
    """u_gBS = (Σ_c |y_c − p_c|^β)^{γ/β} per sample (Lin et al. 2025, eq. 11)."""
    probs = F.softmax(logits, dim=-1)
    onehot = F.one_hot(targets.long(), probs.shape[-1]).to(probs.dtype)
    diff = (onehot - probs).abs()
    return safe_pow(safe_pow(diff, beta).sum(dim=-1), gamma / beta)


class _BrierWeightedCE(Loss):
    detach_weight = False

    def __init__(self, beta: float = 2.0, gamma: float = 2.0, reduction: str = "mean") -> None:
        super().__init__(reduction)
        if not (math.isfinite(beta) and math.isfinite(gamma) and beta > 0 and gamma >= 0):
            raise ValueError(f"bsce needs beta > 0 and gamma >= 0, got beta={beta}, gamma={gamma}")
        self.beta = float(beta)
        self.gamma = float(gamma)

    def forward(self, logits: torch.Tensor, targets: torch.Tensor, **extra) -> torch.Tensor:
        u = generalized_brier(logits.detach() if self.detach_weight else logits, targets, self.beta, self.gamma)
        return reduce(-u * log_pt(logits, targets), self.reduction)


@LOSSES.register("bsce")
class BSCE(_BrierWeightedCE):
    """ℓ = −‖y − p‖_β^γ log p_y, gradient through the weight (Lin et al. 2025, eq. 6 with eq. 11); β = γ = 2 (Brier)."""


@LOSSES.register("bsce_gra")
class BSCEGRA(_BrierWeightedCE):
    """Value of BSCE, gradient u·∇CE with u = ‖y − p‖_β^γ detached (Lin et al. 2025, eq. 9 and 14); β = γ = 2."""

    detach_weight = True


@LOSSES.register("focal_gra")
class FocalGRA(GammaLoss):
    """ℓ = −u·log p_y, u = (1 − p_y)^γ detached from the logits (Lin et al. 2025, eq. 7 + GRA); γ = 1 default
    (as ``focal``). Per-sample ``gamma=`` at call time, differentiable w.r.t. γ."""

    def per_sample(self, logits: torch.Tensor, targets: torch.Tensor, gamma: torch.Tensor | float) -> torch.Tensor:
        lp = log_pt(logits, targets)
        u = safe_pow(-torch.expm1(lp.detach()), gamma)
        return -u * lp


@LOSSES.register("dual_focal_gra")
class DualFocalGRA(GammaLoss):
    """ℓ = −u·log p_y, u = (1 − p_y + p_j)^γ detached from the logits (Lin et al. 2025, eq. 8 + GRA); γ = 5
    default (as ``dual_focal``). Per-sample ``gamma=`` at call time, differentiable w.r.t. γ.

    The whole weight is detached, so ∇ℓ = u·∇CE (eq. 9); the reference code detaches only p_j, which gives
    the same value but a different gradient (module docstring)."""

    default_gamma = 5.0

    def per_sample(self, logits: torch.Tensor, targets: torch.Tensor, gamma: torch.Tensor | float) -> torch.Tensor:
        base, _ = dual_focal_base(logits.detach(), targets)
        return -safe_pow(base, gamma) * log_pt(logits, targets)
