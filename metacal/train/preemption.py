"""Preemption: SIGTERM becomes a checkpoint at the next step boundary and exit status 75.

SIGTERM does not stop the process at once: :func:`handle_sigterm` (installed by the CLI) only sets a
flag; the training loop polls :func:`stop_requested` after every optimisation step, saves a checkpoint at
that step boundary (or, during evaluation, finishes the epoch and saves its epoch checkpoint) and raises
:class:`Preempted`; the CLI then exits with :data:`EXIT_PREEMPTED` = 75 (EX_TEMPFAIL from sysexits.h:
"try again later" — rerun the same command with ``--resume``). With several processes the flag is
OR-reduced across ranks every step, so all ranks stop at the same step.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator

import torch

EXIT_PREEMPTED = 75

_requested = False


class Preempted(Exception):
    """SIGTERM arrived; a checkpoint of the current step was saved (message says where)."""


def _on_sigterm(signum, frame) -> None:  # noqa: ARG001 - signal handler signature
    global _requested
    _requested = True


@contextlib.contextmanager
def handle_sigterm() -> Iterator[None]:
    """Turn SIGTERM into a stop request for the duration of the block (main thread only; else a no-op)."""
    global _requested
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    _requested = False
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        _requested = False


def stop_requested(accelerator=None) -> bool:
    """This process got SIGTERM, or (several processes) any rank did."""
    flag = _requested
    if accelerator is not None and accelerator.num_processes > 1:
        value = torch.tensor([1.0 if flag else 0.0], device=accelerator.device)
        flag = float(accelerator.reduce(value, reduction="sum")) > 0
    return flag

