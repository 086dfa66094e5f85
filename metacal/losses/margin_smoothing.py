"""Margin-based label smoothing, MbLS (Liu, Ben Ayed, Galdran & Dolz, CVPR 2022, "The devil is in the margins",
eq. 7): cross-entropy plus a hinge on the logit distances to the largest logit,

    ℓ = CE(z, y) + λ · (1/K) Σ_j max(0, max_k z_k − z_j − m),

so the gaps between the top logit and the others are free up to the margin m and penalised linearly beyond it
(label smoothing corresponds to pushing every gap to 0). Defaults are the authors': m = 10, λ = 0.1. The penalty is
the mean over the K classes, as in the authors' release (a mean over every logit of the batch).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .base import Loss, reduce
from .registry import LOSSES


@LOSSES.register("mbls")
class MarginLabelSmoothing(Loss):
    """CE + λ·mean_j relu(max_k z_k − z_j − m); m = 10, λ = 0.1 (Liu et al. 2022)."""

    confidence_knob = "alpha"  # a larger λ penalises wide logit gaps harder: lower confidence
    knob_range = (0.0, float("inf"))
    knob_unit = 0.1  # the paper's λ (Liu et al. 2022)

    def __init__(self, margin: float = 10.0, alpha: float = 0.1, reduction: str = "mean") -> None:
        super().__init__(reduction)
        if not margin >= 0.0:
            raise ValueError(f"mbls margin must be >= 0, got {margin}")
        if not alpha >= 0.0:
            raise ValueError(f"mbls alpha must be >= 0, got {alpha}")
        self.margin, self.alpha = float(margin), float(alpha)

    def forward(self, logits: torch.Tensor, targets: torch.Tensor, **extra) -> torch.Tensor:
        ce = F.cross_entropy(logits, targets.long(), reduction="none")
        gaps = logits.max(dim=-1, keepdim=True).values - logits
        penalty = F.relu(gaps - self.margin).mean(dim=-1)
        return reduce(ce + self.alpha * penalty, self.reduction)
