"""Squared-error losses on the softmax: Brier score (Brier, 1950) and the MSE primary loss of Karandikar et al. 2021.

brier: ℓ_i = Σ_c (p_ic − y_ic)²  (Lin et al. 2025, eq. 3 and "BL" baseline).
mse:   ℓ_i = (1/K) Σ_c (p_ic − y_ic)², the mean squared error between one-hot target and probabilities
       (the "MSE" primary loss of Karandikar et al. 2021, §5 / Table 2, i.e. a Keras-style mean over classes = brier / K).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .base import Loss, reduce
from .registry import LOSSES


def brier_per_sample(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Σ_c (softmax(z)_c − onehot(y)_c)²."""
    probs = F.softmax(logits, dim=-1)
    onehot = F.one_hot(targets.long(), probs.shape[-1]).to(probs.dtype)
    return (probs - onehot).pow(2).sum(dim=-1)


@LOSSES.register("brier")
class BrierLoss(Loss):
    """ℓ = Σ_c (p_c − y_c)² (Brier score; no parameters)."""

    def forward(self, logits: torch.Tensor, targets: torch.Tensor, **extra) -> torch.Tensor:
        return reduce(brier_per_sample(logits, targets), self.reduction)


@LOSSES.register("mse")
class MSELoss(Loss):
    """ℓ = (1/K) Σ_c (p_c − y_c)² (Karandikar et al. 2021's MSE primary loss; = brier / K)."""

    def forward(self, logits: torch.Tensor, targets: torch.Tensor, **extra) -> torch.Tensor:
        return reduce(brier_per_sample(logits, targets) / logits.shape[-1], self.reduction)
