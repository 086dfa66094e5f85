"""Where a training epoch's time goes (scripts/bench_epoch.py): the loader, the iterations, the rest.

:func:`time_epoch` builds a run of a config exactly as the trainer does (:func:`metacal.train.setup.setup`, in a
scratch directory), then times one epoch of :func:`metacal.train.loop.train_epoch` — capped at ``steps``
iterations (``run.max_steps_per_epoch``) and scaled to the full epoch — and one
:func:`~metacal.train.loop.evaluate_epoch`:

* ``loader_s``: time spent waiting for the next batch (the loader producing it and accelerate moving it);
* ``step_s``: the rest of the loop (the stepper's step and its bookkeeping); on CUDA the device is synchronised
  once at the start and once at the end of the loop, never per step, so queued work is counted where it runs;
  auto γ's measurements (``updates_per_epoch`` per epoch, whatever ``steps``) are added unscaled;
* ``other_s``: the epoch-end evaluation, logging and checkpoint (not scaled: its cost does not depend on ``steps``);
* ``reads_per_step``: host reads per timed iteration (:mod:`experiments.benchmark.host_reads`); auto γ's update
  (two reads, once per epoch) falls within the timed steps, so over a full epoch it weighs ``full / steps`` less.

:func:`time_loader` iterates the prepared train loader alone for one full epoch, with ``data.batched`` true or
false, for the old-versus-new comparison.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .host_reads import CountedLoader, HostReadCounter


@dataclass
class EpochTiming:
    """Seconds of one full epoch (loop parts scaled from the timed steps) and host reads per step."""

    config: str
    device: str
    steps_timed: int
    steps_per_epoch: int
    loader_s: float
    step_s: float
    other_s: float
    reads_per_step: float

    @property
    def epoch_s(self) -> float:
        return self.loader_s + self.step_s + self.other_s


def build_run(config: str, overrides: list[str], root: Path) -> Any:
    """A :class:`metacal.train.setup.TrainingRun` of ``config`` in ``root`` (the trainer's own construction)."""
    from metacal.train import load_config, prepare_run_dir
    from metacal.train.setup import make_accelerator, setup

    cfg = load_config(config, ["logging.progress_bar=false", "run.save_checkpoints=false", *overrides])
    return setup(cfg, prepare_run_dir(root / "run"), False, make_accelerator(cfg), None)


class TimedLoader(CountedLoader):
    """The run's train loader; adds the seconds spent producing each batch to ``seconds``."""

    def __init__(self, loader: Any, counter: HostReadCounter) -> None:
        super().__init__(loader, counter)
        self.seconds = 0.0

    def __iter__(self):
        iterator = super().__iter__()
        while True:
            started = time.perf_counter()
            try:
                batch = next(iterator)
            except StopIteration:
                return
            self.seconds += time.perf_counter() - started
            yield batch


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_epoch(config: str, steps: int | None, overrides: list[str] = ()) -> EpochTiming:
    """One epoch of ``config`` (at most ``steps`` iterations, scaled to the epoch), timed as the module says."""
    from metacal.train.loop import evaluate_epoch, train_epoch

    with tempfile.TemporaryDirectory() as scratch:
        extra = [*overrides, *([f"run.max_steps_per_epoch={steps}"] if steps else [])]
        run = build_run(config, extra, Path(scratch))
        full = len(run.train_loader)
        device = run.accelerator.device
        with HostReadCounter() as counter:
            run.train_loader = loader = TimedLoader(run.train_loader, counter)
            synchronize(device)
            started = time.perf_counter()
            t0, train_m, gamma = train_epoch(run, 0)
            synchronize(device)
            loop_s = time.perf_counter() - started
        started = time.perf_counter()
        evaluate_epoch(run, 0, t0, train_m, gamma)
        synchronize(device)
        other_s = time.perf_counter() - started
        run.tb.close()
    done = run.steps_per_epoch
    scale = full / done
    measure_s = float(train_m.get("auto_measure_s", 0.0))  # auto γ: its per-epoch updates are not scaled
    step_s = (loop_s - loader.seconds - measure_s) * scale + measure_s
    return EpochTiming(config, str(device), done, full, loader.seconds * scale, step_s, other_s,
                       counter.total / done)


def time_loader(config: str, batched: bool, overrides: list[str] = ()) -> float:
    """Seconds to iterate one full epoch of the prepared train loader alone (``data.batched`` as given)."""
    with tempfile.TemporaryDirectory() as scratch:
        run = build_run(config, [*overrides, f"data.batched={str(batched).lower()}"], Path(scratch))
        run.train_loader.set_epoch(0)
        started = time.perf_counter()
        for _ in run.train_loader:
            pass
        seconds = time.perf_counter() - started
        run.tb.close()
    return seconds
