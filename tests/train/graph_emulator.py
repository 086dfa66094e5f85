"""A CPU stand-in for ``torch.cuda.CUDAGraph`` with its semantics, so that the trainer's graph replay
(metacal/train/cuda_graphs.py) is tested on a machine without CUDA.

What a CUDA graph does, and this emulates: capture records the device operations of a Python call without
running Python again later; :meth:`EmulatedGraph.replay` re-runs exactly those operations on the same tensors
(memory addresses), so

* the values of the tensors the capture read (static inputs, weights, optimiser state) are read afresh,
* every Python number the capture computed or branched on (a learning rate, an iteration count) is baked in,
* Python side effects (a counter += 1, ``p.grad = …``) happen once, at capture, never on a replay,
* a value read back to the host during capture is refused (CUDA raises: a sync is illegal while capturing).

How: capture runs the call under a ``TorchDispatchMode`` that records each aten operation with its arguments
(tensors by identity) and its outputs. Replay calls each operation again under ``no_grad`` and writes a fresh
result into the tensor the capture returned (a view or an in-place result already lives in the right memory).
Random operations draw new numbers on every replay, as a CUDA graph's replays do. :func:`capture` runs the call
once while recording it, which is what ``metacal.train.cuda_graphs.cuda_capture`` does by replaying right after
capturing: either way the captured iteration is done exactly once.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

#: operations that hand a tensor's value to Python: illegal while a CUDA graph captures
HOST_READS = {torch.ops.aten._local_scalar_dense.default, torch.ops.aten.equal.default,
              torch.ops.aten.is_nonzero.default}


class HostReadDuringCapture(RuntimeError):
    pass


class _Recorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[Any, tuple, dict, Any]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in HOST_READS:
            raise HostReadDuringCapture(f"{func} reads a tensor to the host during graph capture")
        out = func(*args, **kwargs)
        self.ops.append((func, args, kwargs, out))
        return out


def _write(captured: Any, fresh: Any) -> None:
    """Put a replayed operation's result into the tensor(s) the capture handed out."""
    if isinstance(captured, torch.Tensor) and isinstance(fresh, torch.Tensor):
        if captured is fresh or captured.untyped_storage().data_ptr() == fresh.untyped_storage().data_ptr():
            return  # in place, a view, or an alias: the capture's tensor already holds the new values
        captured.copy_(fresh)
    elif isinstance(captured, (tuple, list)) and isinstance(fresh, (tuple, list)):
        for c, f in zip(captured, fresh):
            _write(c, f)


class EmulatedGraph:
    """Recorded operations of one captured call; :meth:`replay` re-runs them."""

    def __init__(self) -> None:
        self.ops: list[tuple[Any, tuple, dict, Any]] = []
        self.replays = 0

    def replay(self) -> None:
        with torch.no_grad():
            for func, args, kwargs, out in self.ops:
                _write(out, func(*args, **kwargs))
        self.replays += 1


def capture(fn: Callable[[], Any]) -> tuple[EmulatedGraph, Any]:
    """Record ``fn()``; returns the graph and ``fn``'s result (tensors the replays write into)."""
    graph = EmulatedGraph()
    recorder = _Recorder()
    with recorder:
        result = fn()
    graph.ops = recorder.ops
    return graph, result
