"""Non-finite values of the training iterations, noted on the device and read only at the logging points.

Every iteration adds "is the loss / meta objective / γ finite?" to a small device tensor (no host read, so the
CPU never waits for the accelerator); :meth:`FiniteWatch.check` reads it — before every checkpoint, before an
update of the automatic scalar, at the end of the epoch — and raises
:class:`TrainingDivergedError` naming the FIRST iteration that went non-finite, so a run stops with the same
message, and nothing saved after the bad value, as when every iteration was checked.

The target range is checked once per run instead (:func:`labels_in_range`): the steps then skip their per-batch
check, a host read per batch."""

from __future__ import annotations

from typing import Any, Callable

import torch
from accelerate import Accelerator

from metacal.distributed import sum_over_processes


class TrainingDivergedError(RuntimeError):
    """A non-finite loss, meta objective or γ: the run stops, the last good checkpoint stays."""


#: What an iteration reports and the watch checks, in the message's order.
WATCHED = ("loss", "meta_objective", "gamma")


class FiniteWatch:
    """``note(values, global_step)`` per iteration; ``check(accelerator, where)`` at a logging point.

    ``first_bad[i]`` is the (1-based) global step at which ``WATCHED[i]`` was first non-finite, −1 while it
    never was; it lives on the device of the values."""

    def __init__(self) -> None:
        self.first_bad: torch.Tensor | None = None

    def note(self, values: dict[str, torch.Tensor | None], global_step: int) -> None:
        """Record which of ``values`` hold a non-finite entry at ``global_step`` (device ops only)."""
        present = [(i, v) for i, name in enumerate(WATCHED) if (v := values.get(name)) is not None]
        if not present:
            return
        device = present[0][1].device
        if self.first_bad is None:
            self.first_bad = torch.full((len(WATCHED),), -1, dtype=torch.int64, device=device)
        bad = torch.zeros(len(WATCHED), dtype=torch.bool, device=device)
        for i, v in present:
            bad[i] = ~torch.isfinite(v.detach().to(device)).all()
        self.first_bad = torch.where(bad & (self.first_bad < 0), global_step, self.first_bad)

    def check(self, accelerator: Accelerator, where: Callable[[int], str], here: str) -> None:
        """Raise if a noted value was non-finite (on any process): the message names the first such global step
        through ``where(step)``; ``here`` names the current point when only another process saw one."""
        steps = self.first_bad.tolist() if self.first_bad is not None else [-1] * len(WATCHED)
        bad = [s for s in steps if s > 0]
        first = min(bad) if bad else 0
        names = [name for name, s in zip(WATCHED, steps) if bad and s == first]
        if accelerator.num_processes > 1:
            flag = torch.tensor([float(len(names))], device=accelerator.device)
            sum_over_processes([flag])
            if float(flag) > 0 and not names:
                raise TrainingDivergedError(f"non-finite (on another process) at {here}; training stopped")
        if names:
            raise TrainingDivergedError(f"non-finite {', '.join(names)} at {where(first)}; training stopped")

    def reset(self) -> None:
        """Forget the noted values (a new epoch, after a check)."""
        self.first_bad = None


def labels_in_range(bundle: Any) -> bool:
    """Whether every label of the splits the iterations read (train, meta-val) is known without loading a sample
    (the split's ``targets``) and lies in [0, num_classes): the loop then lets the steps skip their per-batch
    range check, a host read per batch (:func:`metacal.objectives._inputs.targets_in_range`). False when
    unknown: the steps check every batch as before."""
    for split in (bundle.train, bundle.meta_val):
        try:
            targets = torch.as_tensor(getattr(split, "targets", None))
        except (TypeError, ValueError, RuntimeError):
            return False
        if targets.dim() != 1 or targets.is_floating_point() or targets.dtype == torch.bool:
            return False
        if targets.numel() and not 0 <= int(targets.min()) <= int(targets.max()) < bundle.num_classes:
            return False
    return True
