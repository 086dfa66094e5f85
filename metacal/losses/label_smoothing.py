"""Cross-entropy with label smoothing (Müller et al., 2019; Wang, Feng & Zhang 2021, §3 eq. 1):
targets ỹ = (1 − ε)·onehot(y) + ε/K, ℓ = −Σ_c ỹ_c log p_c = (1 − ε)·CE + ε·CE(uniform).

ε = 0.05 default (Wang & Golebiowski 2024 baseline "LS-0.05"; Wang, Feng & Zhang 2021, Table 1 uses 0.01–0.09).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .base import Loss, reduce
from .registry import LOSSES


@LOSSES.register("label_smoothing")
class LabelSmoothingCE(Loss):
    """ℓ = −Σ_c [(1 − ε)·1[c = y] + ε/K] log p_c; ε = 0.05 (Wang & Golebiowski 2024 LS-0.05)."""

    confidence_knob = "epsilon"  # the optimum's confidence is at most 1 − ε + ε/K: a larger ε lowers it
    knob_range = (0.0, 1.0)
    knob_unit = 0.05  # the step of the usual ε grid {0.05, 0.1}

    def __init__(self, epsilon: float = 0.05, reduction: str = "mean") -> None:
        super().__init__(reduction)
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"label smoothing epsilon must be in [0, 1], got {epsilon}")
        self.epsilon = float(epsilon)

    def forward(self, logits: torch.Tensor, targets: torch.Tensor, **extra) -> torch.Tensor:
        log_probs = F.log_softmax(logits, dim=-1)
        nll = -log_probs.gather(-1, targets.long().unsqueeze(-1)).squeeze(-1)
        uniform = -log_probs.mean(dim=-1)
        return reduce((1.0 - self.epsilon) * nll + self.epsilon * uniform, self.reduction)
