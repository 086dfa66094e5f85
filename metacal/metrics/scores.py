"""Proper scores and error rate of N×K probabilities: error, NLL, Brier (fractions / nats, means over samples)."""

from __future__ import annotations

import torch

from .inputs import array_inputs, check_probs_labels, top_label

NLL_EPS = 1e-12


@array_inputs("probs", "labels")
def error_rate(probs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Top-1 error: mean 1[argmax_k p_ik ≠ y_i] (first index wins ties)."""
    check_probs_labels(probs, labels)
    return 1.0 - top_label(probs, labels)[2].mean()


@array_inputs("probs", "labels")
def nll(probs: torch.Tensor, labels: torch.Tensor, eps: float = NLL_EPS) -> torch.Tensor:
    """Negative log-likelihood −(1/N) Σ_i log max(p_{i,y_i}, eps) in nats.

    The clamp at ``eps`` = 1e-12 keeps the value finite when a calibrator (e.g. histogram binning) puts
    probability 0 on the true class; it caps each such sample's loss at −log(1e-12) ≈ 27.6.
    """
    check_probs_labels(probs, labels)
    p_true = probs.gather(1, labels.to(probs.device).long().unsqueeze(1)).squeeze(1)
    return -p_true.clamp_min(eps).log().mean()


@array_inputs("probs", "labels")
def brier(probs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Multiclass Brier score (1/N) Σ_i Σ_c (p_ic − y_ic)² with one-hot y (range [0, 2])."""
    check_probs_labels(probs, labels)
    onehot = torch.nn.functional.one_hot(labels.to(probs.device).long(), probs.shape[1]).to(probs.dtype)
    return (probs - onehot).pow(2).sum(dim=1).mean()
