"""Fault injection for the trainer tests, installed by patching metacal's functions (production code has no
test hooks). Each installer takes a ``pytest.MonkeyPatch`` (undone by the caller) and an action to run:

* :func:`after_step` — right after the N-th training step this process runs (in a fresh run: global step N),
  before that step's checkpoint and SIGTERM check.
* :func:`in_checkpoint` — inside the N-th checkpoint save of this process, at a stage of the write protocol of
  :mod:`metacal.train.checkpoint`: ``partial`` (state files written, no manifest), ``written`` (temporary
  directory complete and fsynced, not renamed), ``renamed`` (renamed, ``best``/``latest`` not yet switched),
  ``pointed`` (pointers switched, older checkpoints not yet pruned).
* :func:`disk_full_in_checkpoint` — the N-th checkpoint's write of one state file stops half-way with
  ENOSPC ("No space left on device"), as on a full disk.

:func:`signal_self` turns a signal into an action (SIGKILL: the process dies on the spot).
"""

from __future__ import annotations

import errno
import io
import os
import signal
from pathlib import Path
from types import ModuleType
from typing import Callable

import pytest
import torch

from metacal.meta import MetaLearner, PlainStep
from metacal.train import checkpoint

Action = Callable[[], None]

# stage → (function of metacal.train.checkpoint, whether the action runs on its entry or after it returns)
STAGES = {"partial": ("_write_manifest", "before"), "written": ("_publish", "before"),
          "renamed": ("_publish", "after"), "pointed": ("_prune", "before")}


def signal_self(signum: signal.Signals) -> Action:
    """An action that sends ``signum`` to this process."""
    return lambda: os.kill(os.getpid(), signum)


def _wrap(monkeypatch: pytest.MonkeyPatch, module: ModuleType, name: str, before: Action | None = None,
          after: Action | None = None) -> None:
    original = getattr(module, name)

    def wrapped(*args, **kwargs):
        if before is not None:
            before()
        result = original(*args, **kwargs)
        if after is not None:
            after()
        return result

    monkeypatch.setattr(module, name, wrapped)


def after_step(monkeypatch: pytest.MonkeyPatch, step: int, action: Action) -> None:
    """Run ``action`` once, right after this process's ``step``-th training step."""
    done = 0

    def count() -> None:
        nonlocal done
        done += 1
        if done == step:
            action()

    for stepper in (PlainStep, MetaLearner):  # whichever iteration the run uses
        _wrap(monkeypatch, stepper, "step", after=count)


def in_checkpoint(monkeypatch: pytest.MonkeyPatch, stage: str, save: int, action: Action) -> None:
    """Run ``action`` at ``stage`` (see :data:`STAGES`) of this process's ``save``-th checkpoint save."""
    saves = 0

    def count() -> None:
        nonlocal saves
        saves += 1

    def fire() -> None:
        if saves == save:
            action()

    name, when = STAGES[stage]
    _wrap(monkeypatch, checkpoint, name, **{when: fire})
    _wrap(monkeypatch, checkpoint, "_write_manifest", before=count)  # outermost: counted before ``partial`` fires


def disk_full_in_checkpoint(monkeypatch: pytest.MonkeyPatch, save: int, filename: str = "optimizer.bin") -> None:
    """The ``save``-th ``torch.save`` into a file called ``filename`` (accelerate writes ``optimizer.bin`` once
    per checkpoint) writes half of its bytes, then fails with ENOSPC like a full disk."""
    original, writes = torch.save, 0

    def save_until_full(obj, f, *args, **kwargs):
        nonlocal writes
        if isinstance(f, (str, os.PathLike)) and Path(f).name == filename:
            writes += 1
            if writes == save:
                buffer = io.BytesIO()
                original(obj, buffer, *args, **kwargs)
                Path(f).write_bytes(buffer.getvalue()[: len(buffer.getvalue()) // 2])
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(f))
        return original(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", save_until_full)
