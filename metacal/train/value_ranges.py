"""The ranges of the config's numbers, checked after the schema has checked their types (metacal/train/config.py).

One table, :data:`RANGES`, for the trainer's own sections; a learner's section declares its rows with its dataclass
(``RANGES``: the meta step's in metacal/meta/settings.py). A value outside its range is one line naming the key,
before anything is built. Without it a negative seed or thread count surfaced as a library's traceback in the middle
of the setup, and a step cap of 0 as a run that trained nothing. Keys with a rule of their own are checked by their
owner: the warm-up by the schedule (metacal/train/schedules.py), ``optim.betas`` with the optimiser's keys
(config.py), ``meta.horizon_decay`` by the meta learner where the trajectory horizon reads it, the section ``auto`` by
:func:`metacal.meta.auto.build_finder`, free-form options by the component that takes them.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

from metacal.meta.learners import settings_fact

#: seeds are handed to numpy (the splits, MNIST-1D's generator), which takes 0 … 2³² − 1
SEED_MAX = 2**32 - 1
SEED_RANGE = "[0, 2**32 - 1]"


def is_seed(v: Any) -> bool:
    """Whether ``v`` is a seed numpy takes (also the sweep's ``--seeds``)."""
    return 0 <= v <= SEED_MAX


def _positive(v: Any) -> bool:
    return v > 0


def _not_negative(v: Any) -> bool:
    return v >= 0  # False for NaN too


def _finite_not_negative(v: Any) -> bool:
    return math.isfinite(v) and v >= 0  # an infinite rate or weight makes the first step non-finite


def _finite_positive(v: Any) -> bool:
    return math.isfinite(v) and v > 0


def _positive_or_none(v: Any) -> bool:
    return v is None or v > 0


SEED = f"be a seed in {SEED_RANGE}"

#: (key, the test its value passes, what the value must do)
RANGES: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    ("data.seed", is_seed, SEED),
    ("data.batch_size", _positive, "be > 0"),
    ("data.eval_batch_size", _positive, "be > 0"),
    ("data.num_workers", _not_negative, "be >= 0 (0: batches made in the training process)"),
    # torch.optim checks lr >= 0 and weight_decay >= 0, which NaN passes (a run of NaN losses), and momentum >= 0
    # only; at momentum 1 or above the velocity never decays and SGD diverges
    ("optim.lr", _finite_not_negative, "be a finite number >= 0"),
    ("optim.momentum", lambda v: 0 <= v < 1, "be in [0, 1)"),
    ("optim.weight_decay", _finite_not_negative, "be a finite number >= 0"),
    ("optim.eps", _finite_positive, "be a finite number > 0"),
    ("optim.backbone_lr_scale", _finite_not_negative, "be a finite number >= 0"),
    ("schedule.epochs", _positive, "be > 0"),
    ("schedule.lr_decay", _finite_positive, "be a finite number > 0 (the lr's factor at each milestone)"),
    ("eval.num_bins", _positive, "be > 0"),
    ("eval.bootstrap", _not_negative, "be >= 0 (0: no confidence intervals)"),
    ("eval.ci_level", lambda v: 0 < v < 1, "lie strictly between 0 and 1 (e.g. 0.9)"),
    ("logging.reliability_every", _not_negative, "be >= 0 (0: never)"),
    ("run.seed", is_seed, SEED),
    ("run.torch_threads", _positive_or_none, "be > 0, or null (torch's default)"),
    ("run.max_steps_per_epoch", _positive_or_none, "be > 0, or null (the whole epoch)"),
    ("run.checkpoint_every_steps", _not_negative, "be >= 0 (0: only at epoch ends)"),
)


def section_ranges(cfg: Any, section: str) -> list[tuple[str, Callable[[Any], bool], str]]:
    """The rows of ``section``: this table's, or those a learner's section declares (its dataclass's ``RANGES``)."""
    own = settings_fact(type(getattr(cfg, section)), "RANGES", ())
    return [row for row in RANGES if row[0].startswith(section + ".")] + [(f"{section}.{k}", t, m) for k, t, m in own]


def out_of_range(cfg: Any) -> str | None:
    """The first number of ``cfg`` (a :class:`metacal.train.schema.Config`) outside its range, section by section in
    the config's order, as one line (``KEY must …; got VALUE``), or None."""
    for section in (f.name for f in dataclasses.fields(cfg)):
        for key, holds, must in section_ranges(cfg, section):
            value = getattr(getattr(cfg, section), key.split(".")[1])
            if not holds(value):
                return f"{key} must {must}; got {value}"
    return None
