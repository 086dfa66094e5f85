"""``learner: auto``, registered with its section ``auto`` (:class:`~metacal.meta.auto.AutoSettings`): plain steps
of the loss with its confidence scalar found by root-finding on the held-out calibration gap (:mod:`metacal.meta.auto`).

The measured splits are ``auto.measure_on``'s: the held-out splits of the run's data, and each perturbed at mixed
severities of its dataset's shift suite's fit families (``*_shifted``,
:func:`metacal.data.shift_suites.shifted_held_out`).
"""

from __future__ import annotations

from torch.utils.data import ConcatDataset

from metacal.data.shift_suites import shifted_held_out
from metacal.registry import keyed

from .auto import AutoScalar, AutoSettings, build_finder
from .learners import BuildContext, learner


@learner("auto", settings=AutoSettings, section="auto", capturable=True)
def build_auto(ctx: BuildContext) -> AutoScalar:
    """learner auto: plain steps of the loss with its confidence scalar found by root-finding (section auto)."""
    settings, cfg, accelerator = ctx.settings, ctx.cfg, ctx.accelerator
    finder, measure_on = keyed("", build_finder, settings, ctx.loss, cfg.loss.name)
    n = accelerator.num_processes
    parts = [keyed("auto.measure_on", shifted_held_out, ctx.bundle, split.removesuffix("_shifted"), cfg.run.seed)
             if split.endswith("_shifted") else getattr(ctx.bundle, split) for split in measure_on]
    measured = parts[0] if len(parts) == 1 else ConcatDataset(parts)
    return keyed(
        "auto", AutoScalar, ctx.model, ctx.loss, ctx.optimizer, measured, finder, ctx.loss.confidence_knob,
        steps_per_epoch=ctx.steps_per_epoch, updates_per_epoch=int(settings.updates_per_epoch),
        sample=settings.sample, batch_size=max(1, cfg.data.eval_batch_size // n), seed=cfg.run.seed,
        rank=accelerator.process_index, world_size=n, backward=accelerator.backward,
        measure_model=accelerator.unwrap_model(ctx.model), measured_on=measure_on)
