"""CE plus an L1 penalty on the logits (Wang, Feng & Zhang 2021, §3: L_Lp = CE + α‖g‖_p with p = 1, from [7]).

ℓ_i = CE_i + α·Σ_c |z_ic|; the batch mean is mean CE + α·mean_i ‖z_i‖₁.
α = 0.01 default (Wang, Feng & Zhang 2021, Table 1: best α 0.01 on three of its four datasets, 0.05 on the other).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .base import Loss, check_weight, reduce
from .registry import LOSSES


@LOSSES.register("l1_logit_norm")
class L1LogitNormCE(Loss):
    """ℓ_i = −log p_y + α‖z_i‖₁ (Wang, Feng & Zhang 2021, §3); α = 0.01 (Wang, Feng & Zhang 2021, Table 1)."""

    def __init__(self, alpha: float = 0.01, reduction: str = "mean") -> None:
        super().__init__(reduction)
        check_weight("l1_logit_norm alpha", alpha)
        self.alpha = float(alpha)

    def forward(self, logits: torch.Tensor, targets: torch.Tensor, **extra) -> torch.Tensor:
        ce = F.cross_entropy(logits, targets.long(), reduction="none")
        if self.alpha == 0.0:
            return reduce(ce, self.reduction)
        return reduce(ce + self.alpha * logits.abs().sum(dim=-1), self.reduction)
