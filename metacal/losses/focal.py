"""Cross-entropy and focal loss (Lin et al., 2017), with scalar, per-class or per-sample γ."""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F

from .base import Loss, reduce
from .registry import LOSSES


def focal_per_sample(
    logits: torch.Tensor, targets: torch.Tensor, gamma: torch.Tensor | float
) -> torch.Tensor:
    """ℓ_i = −(1 − p_{i,y})^{γ_i} log p_{i,y}, with p from ``log_softmax`` (stable for |z| ≫ 1).

    ``gamma`` is a float or a tensor broadcastable to the batch (one γ per sample).
    (1 − p)^γ is computed as exp(γ·log1p(−p)) where p < 1, and as 0^γ (1 for γ = 0) where p = 1.
    """
    log_pt = F.log_softmax(logits, dim=-1).gather(-1, targets.long().unsqueeze(-1)).squeeze(-1)
    if not torch.is_tensor(gamma) and gamma == 0:
        return -log_pt
    gamma = torch.as_tensor(gamma, dtype=log_pt.dtype, device=log_pt.device)
    one_minus_p = -torch.expm1(log_pt)  # 1 − p_t, exact for p_t near 1
    weight = torch.where(
        one_minus_p > 0,
        torch.exp(gamma * torch.log(one_minus_p.clamp_min(torch.finfo(log_pt.dtype).tiny))),
        (gamma == 0).to(log_pt.dtype),
    )
    return -weight * log_pt


@LOSSES.register("ce")
class CrossEntropy(Loss):
    """ℓ = −log p_y (mean over the batch by default)."""

    def forward(self, logits: torch.Tensor, targets: torch.Tensor, **extra) -> torch.Tensor:
        return reduce(F.cross_entropy(logits, targets.long(), reduction="none"), self.reduction)


@LOSSES.register("focal")
class FocalLoss(Loss):
    """Focal loss ℓ = −(1 − p_y)^γ log p_y (Lin et al., 2017; γ = 1 default as in seed 003 Table 1).

    ``gamma`` is a float, or a per-class sequence of length K (γ_{y_i} is used for sample i).
    A per-sample γ tensor passed at call time (``loss(z, y, gamma=g)``) overrides it; that is how the
    γ-Net's output enters (seed 003 eq. 5).
    """

    def __init__(self, gamma: float | Sequence[float] = 1.0, reduction: str = "mean") -> None:
        super().__init__(reduction)
        if isinstance(gamma, (int, float)):
            self.gamma: float | None = float(gamma)
            self.register_buffer("class_gamma", None)
        else:
            self.gamma = None
            self.register_buffer("class_gamma", torch.as_tensor(list(gamma), dtype=torch.float32))

    def forward(
        self,
        logits: torch.Tensor,
        targets: torch.Tensor,
        gamma: torch.Tensor | float | None = None,
        **extra,
    ) -> torch.Tensor:
        if gamma is None:
            gamma = self.gamma if self.class_gamma is None else self.class_gamma[targets.long()]
        elif torch.is_tensor(gamma) and gamma.dim() > 1:
            gamma = gamma.reshape(-1)
        return reduce(focal_per_sample(logits, targets, gamma), self.reduction)
