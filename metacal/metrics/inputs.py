"""Input checks shared by the metrics (one-line ValueErrors that say what is wrong and how to fix it)."""

from __future__ import annotations

import torch

PROB_SUM_ATOL = 1e-3


def check_probs_labels(probs: torch.Tensor, labels: torch.Tensor, atol: float = PROB_SUM_ATOL) -> None:
    """Raise ValueError unless ``probs`` is finite N×K, rows summing to 1 (±atol), ``labels`` N ints in [0, K)."""
    if not isinstance(probs, torch.Tensor) or probs.dim() != 2:
        shape = tuple(probs.shape) if isinstance(probs, torch.Tensor) else type(probs).__name__
        raise ValueError(f"probs must be a 2-D tensor (N, K), got {shape}")
    if not probs.is_floating_point():
        raise ValueError(f"probs must be floating point, got {probs.dtype}")
    check_labels(labels, probs.shape[0], probs.shape[1])
    if probs.shape[1] < 1:
        raise ValueError("probs must have at least one class column")
    if not bool(torch.isfinite(probs).all()):
        raise ValueError("probs contain NaN or inf; remove or fix those rows")
    if bool((probs < -atol).any()) or bool((probs > 1 + atol).any()):
        raise ValueError("probs must lie in [0, 1]; did you pass logits? use softmax(logits) or pass logits")
    dev = (probs.sum(dim=1) - 1).abs().max().item()
    if dev > atol:
        raise ValueError(
            f"probs rows must sum to 1 (tolerance {atol:g}), max deviation is {dev:.3g}; normalise them or pass logits"
        )


def check_labels(labels: torch.Tensor, n: int, k: int) -> None:
    """Raise ValueError unless ``labels`` is a 1-D integer tensor of length n with values in [0, k)."""
    if not isinstance(labels, torch.Tensor) or labels.dim() != 1:
        shape = tuple(labels.shape) if isinstance(labels, torch.Tensor) else type(labels).__name__
        raise ValueError(f"labels must be a 1-D tensor of class indices (N,), got {shape}")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise ValueError(f"labels must hold integer class indices, got {labels.dtype}; pass labels.long()")
    if labels.shape[0] != n:
        raise ValueError(f"probs has {n} rows but labels has {labels.shape[0]} entries; they must match")
    if n == 0:
        raise ValueError("need at least one sample, got N = 0")
    lo, hi = int(labels.min()), int(labels.max())
    if lo < 0 or hi >= k:
        raise ValueError(f"labels must lie in [0, {k - 1}] for {k} classes (K = probs width), got [{lo}, {hi}]")


def check_conf_correct(conf: torch.Tensor, correct: torch.Tensor) -> None:
    """Raise ValueError unless ``conf`` and ``correct`` are 1-D, equal length, non-empty, conf floating point."""
    if not isinstance(conf, torch.Tensor) or not isinstance(correct, torch.Tensor):
        raise ValueError("conf and correct must be torch tensors")
    if conf.dim() != 1 or correct.shape != conf.shape:
        raise ValueError(
            f"conf and correct must be 1-D of equal length, got {tuple(conf.shape)} and {tuple(correct.shape)}"
        )
    if conf.shape[0] == 0:
        raise ValueError("need at least one sample, got empty tensors")
    if not conf.is_floating_point():
        raise ValueError(f"conf must be floating point, got {conf.dtype}")


def check_num_bins(num_bins: int) -> int:
    """Return num_bins as int, or raise ValueError unless it is a positive integer."""
    if isinstance(num_bins, bool) or int(num_bins) != num_bins or int(num_bins) < 1:
        raise ValueError(f"num_bins must be a positive integer, got {num_bins!r}")
    return int(num_bins)


def top_label(probs: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(c, ŷ, correct): c_i = max_k p_ik, ŷ_i = argmax (first on ties), 1[ŷ_i = y_i] in probs' dtype."""
    conf, pred = probs.max(dim=1)
    correct = (pred == labels.to(pred.device)).to(probs.dtype)
    return conf, pred, correct
