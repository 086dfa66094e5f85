"""Cross-entropy plus a learnable element-wise L2 penalty on the classifier head (Bohdal et al., 2023,
"Meta-Calibration"; the "learnable L2" baseline in Wang & Golebiowski 2024, §4).

ℓ_i = CE_i + Σ coeff_weight ⊙ W² + Σ coeff_bias ⊙ b², with one unclamped coefficient per head weight
(init 0) — the meta-parameters a meta-learner trains by hypergradient.
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .base import Loss, reduce
from .registry import LOSSES


@LOSSES.register("ce_learnable_l2")
class CELearnableL2(Loss):
    """CE + Σ c_W ⊙ W² + Σ c_b ⊙ b² (Bohdal et al., 2023; coefficients element-wise, init 0, unclamped).

    ``weight_shape=(K, d)`` is the shape of the classifier head's weight; ``bias=True`` adds a (K,)
    coefficient for its bias. ``forward(logits, targets, head_weight, head_bias)``: the caller passes the
    (possibly functional / fast) head parameters explicitly. With ``reduction="none"`` the penalty is
    added to every sample, so the mean of the per-sample values is mean CE + penalty.
    """

    needs_head_params = True

    def __init__(
        self,
        weight_shape: Sequence[int],
        bias: bool = True,
        init: float = 0.0,
        reduction: str = "mean",
    ) -> None:
        super().__init__(reduction)
        shape = tuple(int(s) for s in weight_shape)
        if len(shape) != 2 or min(shape) <= 0:
            raise ValueError(f"weight_shape must be (num_classes, feature_dim) > 0, got {weight_shape!r}")
        self.coeff_weight = nn.Parameter(torch.full(shape, float(init)))
        if bias:
            self.coeff_bias: nn.Parameter | None = nn.Parameter(torch.full((shape[0],), float(init)))
        else:
            self.register_parameter("coeff_bias", None)

    def penalty(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        """Σ coeff_weight ⊙ weight² (+ Σ coeff_bias ⊙ bias² when both exist)."""
        if weight.shape != self.coeff_weight.shape:
            raise ValueError(
                f"head weight has shape {tuple(weight.shape)}, expected {tuple(self.coeff_weight.shape)}"
            )
        total = (self.coeff_weight.to(weight) * weight.pow(2)).sum()
        if self.coeff_bias is not None and bias is not None:
            total = total + (self.coeff_bias.to(bias) * bias.pow(2)).sum()
        return total

    def forward(
        self,
        logits: torch.Tensor,
        targets: torch.Tensor,
        head_weight: torch.Tensor | None = None,
        head_bias: torch.Tensor | None = None,
        **extra,
    ) -> torch.Tensor:
        if head_weight is None:
            raise ValueError("ce_learnable_l2 needs head_weight= (the classifier head's weight tensor)")
        ce = F.cross_entropy(logits, targets.long(), reduction="none")
        return reduce(ce + self.penalty(head_weight, head_bias), self.reduction)

    def meta_parameters(self) -> list[nn.Parameter]:
        return [p for p in (self.coeff_weight, self.coeff_bias) if p is not None]
