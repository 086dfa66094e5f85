"""Input checks shared by the metrics (one-line ValueErrors that say what is wrong and how to fix it), and the
conversion that lets every public metrics/posthoc function take numpy arrays and lists as well as tensors."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, TypeVar

import numpy as np
import torch

PROB_SUM_ATOL = 1e-3
F = TypeVar("F", bound=Callable[..., Any])


def as_tensor(x: Any, name: str) -> torch.Tensor:
    """``x`` as a tensor: a tensor is returned unchanged; a numpy array (memory shared when possible) or a
    (nested) list/tuple of numbers is converted — Python floats to float64, ints to int64, bools to bool.
    Anything else raises a one-line ValueError naming ``name``."""
    if isinstance(x, torch.Tensor):
        return x
    if x is None or isinstance(x, (str, bytes, dict, set)):
        raise ValueError(f"{name} must be a tensor, numpy array or list of numbers, got {type(x).__name__}")
    try:
        arr = np.asarray(x)
    except (ValueError, TypeError):
        raise ValueError(f"{name} must be a rectangular array of numbers (rows of equal length), "
                         f"got a ragged {type(x).__name__}") from None
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{name} must hold numbers, got {type(x).__name__} of dtype {arr.dtype}")
    if arr.dtype.kind == "u" and arr.dtype != np.uint8:
        arr = arr.astype(np.int64)
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if arr.ndim > 0 and not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    if not arr.flags.writeable:  # e.g. np.load(..., mmap_mode="r"): torch wants writable memory
        arr = arr.copy()
    return torch.from_numpy(arr)


def array_inputs(*names: str) -> Callable[[F], F]:
    """Decorator for public entry points: the arguments ``names`` may be numpy arrays or lists (converted
    with :func:`as_tensor` at the call); the function body sees tensors. Outputs are unchanged."""

    def wrap(fn: F) -> F:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def converted(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            for name in names:
                if name in bound.arguments and not isinstance(bound.arguments[name], torch.Tensor):
                    bound.arguments[name] = as_tensor(bound.arguments[name], name)
            return fn(*bound.args, **bound.kwargs)

        return converted  # type: ignore[return-value]

    return wrap


def check_probs_labels(probs: torch.Tensor, labels: torch.Tensor, atol: float = PROB_SUM_ATOL) -> None:
    """Raise ValueError unless ``probs`` is finite N×K, rows summing to 1 (±atol), ``labels`` N ints in [0, K)."""
    if not isinstance(probs, torch.Tensor) or probs.dim() != 2:
        shape = tuple(probs.shape) if isinstance(probs, torch.Tensor) else type(probs).__name__
        raise ValueError(f"probs must be 2-D (N, K), got {shape}")
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
        raise ValueError(f"labels must be 1-D class indices (N,), got {shape}")
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


@array_inputs("probs", "labels")
def top_label(probs: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(c, ŷ, correct): c_i = max_k p_ik, ŷ_i = argmax (first on ties), 1[ŷ_i = y_i] in probs' dtype."""
    conf, pred = probs.max(dim=1)
    correct = (pred == labels.to(pred.device)).to(probs.dtype)
    return conf, pred, correct
