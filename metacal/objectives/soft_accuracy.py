"""Differentiable per-sample accuracy from the all-pairs soft rank (Qin et al. 2010), as in DECE.

Bohdal et al. (2021, "Meta-calibration", §3) and Wang & Golebiowski (2024, §4.2)::

    rank_i = 1 + Σ_{k≠y_i} σ(t_a · (p_ik − p_iy_i))        (soft rank of the true class)
    a_i    = relu(2 − rank_i)                                (≈ 1 if the true class ranks first, else ≈ 0)

With t_a → ∞, a_i → 1[argmax_k p_ik = y_i] (ties aside). A tie of the true class with one other class
gives rank 1.5 and a_i = 0.5. Memory O(N·K).
"""

from __future__ import annotations

import torch

from ._inputs import check_logits_targets, check_positive, probabilities


def soft_rank_from_probs(probs: torch.Tensor, targets: torch.Tensor, t_a: float = 100.0) -> torch.Tensor:
    """Soft rank (N,) of each sample's true class: 1 + Σ_{k≠y} σ(t_a (p_k − p_y))."""
    p_true = probs.gather(1, targets.unsqueeze(1))  # (N, 1)
    pairwise = torch.sigmoid(t_a * (probs - p_true))  # (N, K); the k = y entry is σ(0) = 1/2
    not_true = torch.ones_like(probs).scatter(1, targets.unsqueeze(1), 0.0)
    return 1.0 + (pairwise * not_true).sum(dim=1)


def soft_accuracy_from_probs(probs: torch.Tensor, targets: torch.Tensor, t_a: float = 100.0) -> torch.Tensor:
    """a_i = relu(2 − rank_i) from probabilities (N×K) and integer targets (N,)."""
    return torch.relu(2.0 - soft_rank_from_probs(probs, targets, t_a))


def soft_rank_accuracy(logits: torch.Tensor, targets: torch.Tensor, t_a: float = 100.0) -> torch.Tensor:
    """Per-sample soft accuracy a_i ∈ [0, 1], shape (N,), differentiable w.r.t. the logits.

    Args:
        logits: N×K logits.
        targets: N integer class indices.
        t_a: sharpness of the pairwise sigmoid; default 100 (Bohdal et al. 2021, DECE code default).
    """
    check_logits_targets(logits, targets)
    t_a = check_positive("t_a", t_a)
    return soft_accuracy_from_probs(probabilities(logits), targets, t_a)
