"""MDCA — multi-class difference in confidence and accuracy (Hebbalaguppe et al. 2022, CVPR; docs/conventions.md#mdca)::

    MDCA = (1/K) Σ_c | (1/N) Σ_i p_ic − (1/N) Σ_i 1[y_i = c] |

Mean over the batch (as the reference code); added to the primary loss with β = 1 in that paper.
"""

from __future__ import annotations

import torch

from ._inputs import check_logits_targets, probabilities


def mdca(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """MDCA of N×K logits against integer targets; a scalar in [0, 2/K]."""
    check_logits_targets(logits, targets)
    probs = probabilities(logits)
    mean_probs = probs.mean(dim=0)
    label_freq = torch.zeros_like(mean_probs).index_add_(
        0, targets, torch.ones_like(targets, dtype=probs.dtype)
    ) / targets.shape[0]
    return (mean_probs - label_freq).abs().mean()
