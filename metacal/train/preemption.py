"""Stopping cleanly: SIGTERM (preemption) and Ctrl-C (SIGINT) become a checkpoint at the next step boundary.

Neither signal stops the process at once: :func:`handle_stop_signals` (installed by the CLI) only records
it; the training loop polls :func:`stop_requested` after every optimisation step, saves a checkpoint at
that step boundary (or, during evaluation, finishes the epoch and saves its epoch checkpoint) and raises
:class:`Preempted`; the CLI prints one line saying how to resume and exits with

* :data:`EXIT_PREEMPTED` = 75 after SIGTERM (EX_TEMPFAIL from sysexits.h: "try again later"), or
* :data:`EXIT_INTERRUPTED` = 130 after Ctrl-C (128 + SIGINT, what a shell reports for an interrupted job).

The first Ctrl-C also prints a note and puts back the default SIGINT action, so a second Ctrl-C kills the
process at once (the checkpoint protocol keeps the previous good checkpoint whatever the moment). With
several processes the request is summed across ranks every step, so all ranks stop at the same step.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Iterator

import torch

from metacal.distributed import sum_over_processes, world_size

EXIT_PREEMPTED = 75
EXIT_INTERRUPTED = 130
_EXIT_CODES = {signal.SIGTERM: EXIT_PREEMPTED, signal.SIGINT: EXIT_INTERRUPTED}
_NAMES = {signal.SIGTERM: "SIGTERM", signal.SIGINT: "Ctrl-C (SIGINT)"}

_received: int = 0  # the first stop signal this process got (0: none)
_agreed: int = 0  # the signal all ranks agreed on at the last poll that asked to stop


class Preempted(Exception):
    """A stop signal arrived; a checkpoint of the current step was saved (the message says where).

    ``signum`` says which signal: it decides the exit code (:attr:`exit_code`) and the CLI's prefix."""

    def __init__(self, message: str, signum: int = signal.SIGTERM) -> None:
        super().__init__(message)
        self.signum = int(signum)

    @property
    def exit_code(self) -> int:
        return _EXIT_CODES.get(self.signum, EXIT_PREEMPTED)

    @property
    def label(self) -> str:
        """``preempted`` (SIGTERM) or ``interrupted`` (Ctrl-C): the first word of the CLI's last line."""
        return "interrupted" if self.signum == signal.SIGINT else "preempted"


def signal_name(signum: int) -> str:
    """How messages name a stop signal."""
    return _NAMES.get(signum, signal.Signals(signum).name)


def _on_signal(signum: int, frame) -> None:  # noqa: ARG001 - signal handler signature
    global _received
    if not _received:
        _received = signum
    if signum == signal.SIGINT:  # a second Ctrl-C must abort at once: hand SIGINT back to the OS default
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if os.environ.get("RANK", "0") == "0":  # torchrun: every rank gets the terminal's Ctrl-C; say it once
            # os.write, not print: a handler may interrupt a print of the main thread (reentrant write)
            os.write(2, b"Ctrl-C: finishing the current step and saving a checkpoint "
                        b"(press Ctrl-C again to abort at once)\n")


@contextlib.contextmanager
def handle_stop_signals() -> Iterator[None]:
    """Turn SIGTERM and SIGINT into a stop request for the duration of the block (main thread only; else a
    no-op); the previous handlers come back afterwards."""
    global _received, _agreed
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    _received = _agreed = 0
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        _received = _agreed = 0


handle_sigterm = handle_stop_signals  # the earlier name (it covers Ctrl-C too now)


def stop_requested(accelerator=None) -> bool:
    """This process got a stop signal, or (several processes, given the run's ``accelerator`` for its device)
    any rank did; :func:`requested_signal` then tells which (this rank's own signal first, else SIGTERM if
    any rank got one, else SIGINT)."""
    global _agreed
    local = _received
    if accelerator is not None and world_size() > 1:
        counts = torch.tensor([float(local == signal.SIGTERM), float(local == signal.SIGINT)],
                              device=accelerator.device)
        sum_over_processes([counts])
        term, interrupt = (float(v) for v in counts)
        if not local and (term or interrupt):
            local = signal.SIGTERM if term else signal.SIGINT
    if local:
        _agreed = local
    return bool(local)


def requested_signal() -> int:
    """The signal behind the last positive :func:`stop_requested` (SIGTERM if none was polled yet)."""
    return int(_agreed or _received or signal.SIGTERM)
