"""Preemption (SIGTERM) handling and the fault-injection hooks the robustness tests use.

SIGTERM does not stop the process at once: :func:`handle_sigterm` (installed by the CLI) only sets a
flag; the training loop polls :func:`stop_requested` after every optimisation step, saves a checkpoint at
that step boundary (or, during evaluation, finishes the epoch and saves its epoch checkpoint) and raises
:class:`Preempted`; the CLI then exits with :data:`EXIT_PREEMPTED` = 75 (EX_TEMPFAIL from sysexits.h:
"try again later" — rerun the same command with ``--resume``). With several processes the flag is
OR-reduced across ranks every step, so all ranks stop at the same step.

Test hooks (environment variables, read at the point they fire; never set them in real runs):

* ``METACAL_TEST_KILL_AT_STEP=G`` — SIGKILL this process right after global step G's update (before any
  checkpoint of that step).
* ``METACAL_TEST_SIGTERM_AT_STEP=G`` — send SIGTERM to this process right after global step G.
* ``METACAL_TEST_KILL_IN_CHECKPOINT=STAGE[:N]`` — SIGKILL during the N-th checkpoint save of this process
  (default 1) at STAGE: ``partial`` (state files written, no manifest), ``written`` (temporary directory
  complete and fsynced, not renamed), ``renamed`` (renamed, ``best``/``latest`` not yet switched), ``pointed``
  (``best``/``latest`` switched, older checkpoints not yet pruned).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Iterator

import torch

EXIT_PREEMPTED = 75

_requested = False
_saves = 0


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


def after_step(global_step: int) -> None:
    """Fault-injection point after a finished step (and its checkpoint, if any)."""
    if os.environ.get("METACAL_TEST_SIGTERM_AT_STEP") == str(global_step):
        os.kill(os.getpid(), signal.SIGTERM)
    if os.environ.get("METACAL_TEST_KILL_AT_STEP") == str(global_step):
        os.kill(os.getpid(), signal.SIGKILL)


def checkpoint_started() -> None:
    global _saves
    _saves += 1


def in_checkpoint(stage: str) -> None:
    """Fault-injection point inside a checkpoint save (see the module docstring)."""
    spec = os.environ.get("METACAL_TEST_KILL_IN_CHECKPOINT")
    if not spec:
        return
    name, _, count = spec.partition(":")
    if name == stage and _saves == int(count or 1):
        os.kill(os.getpid(), signal.SIGKILL)
