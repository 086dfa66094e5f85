"""Resumable checkpoints via accelerate ``save_state``/``load_state``.

Everything with state is either prepared by the Accelerator (model, optimizer) or registered with
``accelerator.register_for_checkpointing`` (scheduler, γ-Net, meta optimiser, stateful loss, the
meta-validation InfiniteLoader, and :class:`TrainState` — epoch counter, best score, history).
accelerate also saves the RNG states of every process, so a run resumed at an epoch boundary
continues exactly as an uninterrupted one (the training sampler is accelerate's seedable sampler,
re-seeded with ``set_epoch``).

A checkpoint is written to ``<dir>.tmp`` and renamed when complete, so a crash while saving leaves
the previous good checkpoint in place. ``train_state.json`` (human-readable copy of TrainState) marks
a complete checkpoint.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from accelerate import Accelerator


@dataclass
class TrainState:
    """Loop counters and model-selection bookkeeping (checkpointed)."""

    epoch: int = 0  # number of finished epochs = index of the next epoch to run
    global_step: int = 0
    best_score: float = float("inf")
    best_epoch: int = -1
    best_metrics: dict[str, Any] = field(default_factory=dict)  # {"val": {...}, "test": {...}}
    history: list[dict[str, Any]] = field(default_factory=list)

    def state_dict(self) -> dict[str, Any]:
        return asdict(self)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            setattr(self, key, value)


def save_checkpoint(accelerator: Accelerator, directory: Path, state: TrainState) -> None:
    """``accelerator.save_state`` into ``directory`` atomically (tmp dir + rename on the main process)."""
    directory = Path(directory)
    tmp = directory.with_name(directory.name + ".tmp")
    if accelerator.is_main_process and tmp.exists():
        shutil.rmtree(tmp)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp))
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        (tmp / "train_state.json").write_text(json.dumps(
            {k: v for k, v in state.state_dict().items() if k != "history"}, indent=2, default=str))
        if directory.exists():
            shutil.rmtree(directory)
        tmp.rename(directory)
    accelerator.wait_for_everyone()


def load_checkpoint(accelerator: Accelerator, directory: Path) -> None:
    """Restore everything prepared or registered with ``accelerator`` from ``directory``."""
    accelerator.load_state(str(directory))
