"""Input checks and shared tensor pieces for the calibration objectives (one-line errors)."""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

import torch

#: Whether the caller vouches that every target lies in [0, K) (:func:`targets_in_range`).
_IN_RANGE: ContextVar[bool] = ContextVar("targets_in_range", default=False)


@contextmanager
def targets_in_range(checked: bool = True) -> Iterator[None]:
    """Within this block (when ``checked``), :func:`check_targets` skips its range check, the one check that
    reads the targets back to the host (a device sync per call). For callers that checked every label of
    their data once beforehand (the trainer, when each split's ``targets`` lie in [0, K)); dtype and shape are
    still checked."""
    token = _IN_RANGE.set(bool(checked) or _IN_RANGE.get())
    try:
        yield
    finally:
        _IN_RANGE.reset(token)


def check_logits_targets(logits: torch.Tensor, targets: torch.Tensor) -> None:
    """Raise ValueError unless ``logits`` is N×K floating point and ``targets`` N integers in [0, K)."""
    if not isinstance(logits, torch.Tensor) or logits.dim() != 2:
        shape = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ValueError(f"logits must be a 2-D tensor (N, K), got {shape}")
    if not logits.is_floating_point():
        raise ValueError(f"logits must be floating point, got {logits.dtype}; pass logits.float()")
    check_targets(targets, logits.shape[0], logits.shape[1])


def check_targets(targets: torch.Tensor, n: int, k: int | None, name: str = "targets", rows: str = "logits") -> None:
    """Raise ValueError unless ``targets`` is a 1-D integer tensor of ``n`` class indices in [0, k) (the range
    is not checked when ``k`` is None). Float targets are refused, not truncated: 1.7 is no class index.
    ``name`` and ``rows`` (what has the n rows) word the one-line message."""
    if not isinstance(targets, torch.Tensor) or targets.dim() != 1:
        shape = tuple(targets.shape) if isinstance(targets, torch.Tensor) else type(targets).__name__
        raise ValueError(f"{name} must be a 1-D tensor of class indices (N,), got {shape}")
    if targets.is_floating_point() or targets.is_complex() or targets.dtype == torch.bool:
        raise ValueError(f"{name} must hold integer class indices, got {targets.dtype}; pass targets.long()")
    if targets.shape[0] != n:
        raise ValueError(f"{rows} has {n} rows but {name} has {targets.shape[0]} entries; they must match")
    if n == 0 or k == 0:
        raise ValueError(f"need at least one sample and one class, got {n} samples and {k} classes")
    if k is not None and not torch.compiler.is_compiling() and not _IN_RANGE.get():
        lo, hi = torch.stack(torch.aminmax(targets)).tolist()  # one device sync per batch, not two
        if lo < 0 or hi >= k:
            raise ValueError(f"{name} must lie in [0, {k - 1}] for {k} classes, got values in [{lo}, {hi}]")


def check_positive(name: str, value: float) -> float:
    """Return ``float(value)`` or raise ValueError if it is not a finite positive number."""
    value = float(value)
    if not (value > 0.0) or value == float("inf"):
        raise ValueError(f"{name} must be a finite positive number, got {value}")
    return value


def probabilities(logits: torch.Tensor) -> torch.Tensor:
    """Softmax computed as exp(log_softmax): stable for logits like ±1e4 (probabilities exactly 0/1)."""
    return torch.exp(torch.log_softmax(logits, dim=1))


def top_confidence(probs: torch.Tensor) -> torch.Tensor:
    """c_i = max_k p_ik (differentiable almost everywhere; gradient flows to the arg-max entry)."""
    return probs.max(dim=1).values


def hard_correct(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """1[argmax_k z_ik = y_i] as a float tensor of the logits' dtype (no gradient)."""
    return (logits.argmax(dim=1) == targets).to(logits.dtype)
