"""Learning-rate schedules (``schedule.name``) and when they are stepped.

With t the 0-based index of the iteration about to run, E iterations per epoch, T = epochs·E iterations in
all and W = round(warmup_epochs·E) warm-up iterations (Python's round, half to even; at least 1 when
warmup_epochs > 0), every parameter group trains at its base lr times::

    warm(t)   = (t + 1)/W for t < W, else 1                 (linear warm-up; the first step is not wasted at lr 0)
    step      : lr_decay^#{milestones m ≤ ⌊t/E⌋}            (the epoch-level MultiStepLR of Wang & Golebiowski 2024)
    cosine    : ½(1 + cos(π·(t − W)/(T − W))) for t ≥ W     (Loshchilov & Hutter 2017, SGDR, without restarts;
                                                             the last step runs at a small positive lr)
    constant  : 1
    factor(t) = warm(t) · schedule(t)

Cadence: ``step`` without warm-up is torch's MultiStepLR stepped once per epoch — exactly today's runs.
Everything else is one LambdaLR stepped after every iteration (per-iteration, so that a warm-up shorter than
an epoch exists and cosine is smooth on the few epochs of a fine-tuning run). The scheduler's position is
checkpointed with the run, mid-epoch checkpoints included; T uses the current config, so raising
``schedule.epochs`` on ``--resume`` stretches the remaining cosine.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any, Callable

import torch

from metacal.registry import unknown_name

SCHEDULES = ("step", "cosine", "constant")


def lr_factor(name: str, epochs: int, steps_per_epoch: int, warmup_epochs: float = 0.0,
              milestones: Sequence[int] = (), lr_decay: float = 0.1) -> Callable[[int], float]:
    """factor(t) of the module docstring, for iteration t = 0, 1, …"""
    if name not in SCHEDULES:
        raise ValueError(unknown_name("schedule", name, SCHEDULES))
    total = epochs * steps_per_epoch
    warmup = max(1, round(warmup_epochs * steps_per_epoch)) if warmup_epochs > 0 else 0
    if not (warmup_epochs >= 0 and warmup < total):
        raise ValueError(f"warmup_epochs must be >= 0 and the warm-up shorter than the run ({epochs} epochs, {total} "
                         f"iterations); got {warmup_epochs} ({warmup} iterations)")
    milestones = sorted(milestones)

    def factor(t: int) -> float:
        warm = (t + 1) / warmup if t < warmup else 1.0
        if name == "constant" or (name == "cosine" and t < warmup):
            return warm
        if name == "step":
            return warm * lr_decay ** sum(1 for m in milestones if m <= t // steps_per_epoch)
        return warm * 0.5 * (1.0 + math.cos(math.pi * (t - warmup) / (total - warmup)))

    return factor


class LRSchedule:
    """A torch lr scheduler plus its cadence; the loop calls :meth:`iteration_done` after every iteration
    and :meth:`epoch_done` after every epoch, and only the matching one steps. Checkpointed through
    ``state_dict`` / ``load_state_dict`` (the scheduler's own)."""

    def __init__(self, scheduler: torch.optim.lr_scheduler.LRScheduler, per_iteration: bool) -> None:
        self.scheduler, self.per_iteration = scheduler, per_iteration

    def _step(self) -> None:
        with warnings.catch_warnings():  # the higher backend updates θ without calling optimizer.step()
            warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step", category=UserWarning)
            self.scheduler.step()

    def iteration_done(self) -> None:
        if self.per_iteration:
            self._step()

    def epoch_done(self) -> None:
        if not self.per_iteration:
            self._step()

    def state_dict(self) -> dict[str, Any]:
        return self.scheduler.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.scheduler.load_state_dict(state)


def build_schedule(schedule: Any, optimizer: torch.optim.Optimizer, steps_per_epoch: int) -> LRSchedule:
    """The run's schedule from the ``schedule`` config section (module docstring)."""
    s = schedule
    if s.name == "step" and s.warmup_epochs == 0:
        return LRSchedule(torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=list(s.milestones),
                                                               gamma=s.lr_decay), per_iteration=False)
    factor = lr_factor(s.name, s.epochs, steps_per_epoch, s.warmup_epochs, s.milestones, s.lr_decay)
    return LRSchedule(torch.optim.lr_scheduler.LambdaLR(optimizer, factor), per_iteration=True)
