"""The processes of a run and the collectives over them, for the meta learners and the trainer alike.

Built on torch.distributed's default process group, which accelerate itself initialises for a multi-process
run: so the same calls work under accelerate, torchrun or a hand-made group, and ``metacal.meta`` needs no
accelerate (``accelerator.reduce`` does the same all-reduce sum, then the division by the process count).
Outside a process group (one process) every collective is a no-op.
"""

from __future__ import annotations

from typing import Iterable

import torch
import torch.distributed as dist


def _initialized() -> bool:
    return dist.is_available() and dist.is_initialized()


def world_size() -> int:
    """The number of processes of the run (1 without an initialised process group)."""
    return dist.get_world_size() if _initialized() else 1


def process_group_backend() -> str | None:
    """The process group's backend (``gloo``, ``nccl``), or None without one."""
    return dist.get_backend() if _initialized() else None


def average_over_processes(tensors: Iterable[torch.Tensor]) -> None:
    """In place: every tensor becomes its mean over all processes — summed, then divided by the process
    count, tensor by tensor in the given order (a no-op in one process)."""
    n = world_size()
    if n == 1:
        return
    for t in tensors:
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        t.div_(n)


def sum_over_processes(tensors: Iterable[torch.Tensor]) -> None:
    """In place: every tensor becomes its sum over all processes (a no-op in one process)."""
    if world_size() == 1:
        return
    for t in tensors:
        dist.all_reduce(t, op=dist.ReduceOp.SUM)


def broadcast_from_main(tensors: Iterable[torch.Tensor]) -> None:
    """In place: every tensor takes the value it has on process 0 (a no-op in one process)."""
    if world_size() == 1:
        return
    for t in tensors:
        dist.broadcast(t, src=0)


def mean_over_processes(value: float, device: torch.device | str) -> float:
    """The mean of a per-process number over all processes, reduced as a one-element tensor on ``device``
    (in one process ``value`` itself, not rounded to float32)."""
    if world_size() == 1:
        return value
    t = torch.tensor([value], device=device)
    average_over_processes([t])
    return float(t)
