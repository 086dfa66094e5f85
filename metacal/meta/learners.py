"""The learners by name: what steers the loss during training, each entry holding the facts the trainer asks of it.

A learner is a :class:`LearnerSpec` in :data:`LEARNERS`, registered with :func:`learner`: its build function (a
:class:`BuildContext` in, a :class:`~metacal.meta.step_context.Stepper` out), the dataclass of its config section, that
section's name (the top-level config key, LightningCLI-style: ``learner: anneal_tau`` reads ``anneal: {rate: 0.25}``),
whether its steps may be replayed from CUDA graphs and the keys of its section a resume may not change. The trainer
names no learner: it looks the spec up, validates the section against the dataclass when the config is loaded and
hands the built settings to the build function.

What a section's dataclass may declare besides its fields, each read by the config loader or the trainer when present
(:func:`settings_fact`): ``CHOICES`` (key → the allowed values), ``RANGES`` ((key, test, what the value must do), …),
``GLOBAL_BATCH`` (the key of a global batch split across processes), ``config_problem(cfg)`` (what it refuses in the
rest of the config, one line or None) and ``graph_problem(model)`` (why its steps cannot be replayed from CUDA graphs
with these settings, or None).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from torch import nn

from metacal.registry import Registry

from .step_context import Stepper


@dataclass(frozen=True)
class BuildContext:
    """What a learner's build function is given: its name and section (an instance of its dataclass), the whole
    config (``run.seed``, ``data.batched``, ``loss.name`` …), the accelerator, and the run's prepared model, loss,
    optimiser and data bundle."""

    name: str
    settings: Any
    cfg: Any  # metacal.train.config.Config
    accelerator: Any  # accelerate.Accelerator
    model: nn.Module
    loss: nn.Module
    optimizer: Any
    bundle: Any  # metacal.data.DataBundle
    steps_per_epoch: int


@dataclass(frozen=True)
class LearnerSpec:
    """One learner (module docstring). ``capturable``: whether its steps may be replayed from CUDA graphs at all (the
    section's ``graph_problem`` then says when not); ``fixed``: keys of its section that fix the saved state."""

    name: str
    build: Callable[[BuildContext], Stepper]
    settings: type
    section: str
    capturable: bool = False
    fixed: tuple[str, ...] = ()


class LearnerRegistry(Registry[LearnerSpec]):
    """A registry that takes :class:`LearnerSpec` entries only: a bare build function (the registration of releases
    before learners had sections of their own) is refused in one line that says how to register it now."""

    def register(self, name: str) -> Callable[[LearnerSpec], LearnerSpec]:
        add = super().register(name)

        def checked(entry: LearnerSpec) -> LearnerSpec:
            if not isinstance(entry, LearnerSpec):
                raise TypeError(f"learner {name!r}: register it with @metacal.meta.learner({name!r}, settings=<its "
                                "section's dataclass>, section=<its config section>), not LEARNERS.register")
            return add(entry)

        return checked


#: the config key ``learner`` → its :class:`LearnerSpec`; built in (registered by metacal/meta/__init__.py's imports):
#: ``gamma_net`` and ``loss`` (section ``meta``, metacal/meta/meta_learners.py), ``auto`` (section ``auto``,
#: metacal/meta/auto_learner.py)
LEARNERS = LearnerRegistry("learner")
#: top-level config keys a learner's section may not take
RESERVED = ("data", "model", "loss", "learner", "optim", "schedule", "eval", "logging", "run")


def learner(name: str, *, settings: type, section: str, capturable: bool = False,
            fixed: tuple[str, ...] = ()) -> Callable[[Callable[[BuildContext], Stepper]], Callable[..., Stepper]]:
    """Register the decorated build function as learner ``name`` reading config section ``section`` into
    ``settings`` (a dataclass). A section already read by another learner must come with the same dataclass."""

    def add(build: Callable[[BuildContext], Stepper]) -> Callable[[BuildContext], Stepper]:
        if section in RESERVED:
            raise ValueError(f"learner {name!r}: {section!r} is a section of the trainer's own; name another")
        shared = learner_sections().get(section)
        if shared is not None and shared is not settings:
            raise ValueError(f"learner {name!r}: section {section!r} is read into {shared.__name__} by another "
                             f"learner, not {settings.__name__}")
        LEARNERS.register(name)(LearnerSpec(name, build, settings, section, capturable, tuple(fixed)))
        return build

    return add


def learner_spec(name: str) -> LearnerSpec:
    """The spec of learner ``name``; an unknown name is :class:`metacal.registry.UnknownNameError` with the closest."""
    return LEARNERS.get(name)


def learner_section(name: str | None) -> str | None:
    """The config section learner ``name`` reads; None for plain training and for a learner not registered here."""
    return LEARNERS.get(name).section if name is not None and name in LEARNERS else None


def learner_sections() -> dict[str, type]:
    """Every registered learner's section and its dataclass, in the order they were registered (the config's)."""
    sections: dict[str, type] = {}
    for _, spec in LEARNERS.entries():
        sections.setdefault(spec.section, spec.settings)
    return sections


def settings_fact(settings: Any, name: str, default: Any = None) -> Any:
    """A fact a section's dataclass (or instance) may declare (module docstring), else ``default``."""
    return getattr(settings, name, default)


def global_batch(cfg: Any) -> tuple[str, int] | None:
    """(``<section>.<key>``, value) of the global batch the run's learner reads, split across processes; None
    without a learner or when its section has none."""
    section = learner_section(getattr(cfg, "learner", None))
    key = settings_fact(getattr(cfg, section), "GLOBAL_BATCH") if section else None
    return (f"{section}.{key}", int(getattr(getattr(cfg, section), key))) if key else None
