"""The one place that turns a validated config into a run's objects: data, model, loss, optimiser, schedule,
loaders and the iteration (:func:`build_parts`). After loading (metacal/train/config.py) it is the only place
that raises :class:`~metacal.train.config.ConfigError`.

Constructor errors caused by the config (unknown option → the registry's ValueError, bad value → ValueError)
become one ConfigError line naming the config section (:func:`construct`). Unknown registry names raise
:class:`metacal.registry.UnknownNameError` unchanged (its message names the closest valid names and where the
full list is); missing data raises :class:`metacal.data.DataNotFoundError`.

The iteration is a :class:`~metacal.meta.PlainStep`, or the learner that ``learner`` names in the registry
:data:`metacal.meta.LEARNERS` (built in or one's own): its spec's build function, given its section as its own
dataclass (metacal/meta/learners.py); a ValueError it raises is one ConfigError line. The trainer names no learner.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, TypeVar

import torch
from accelerate import Accelerator
from torch import nn

from metacal.meta import BuildContext, PlainStep, Stepper, learner_spec
from metacal.meta.learners import global_batch
from metacal.registry import keyed
from metacal.wording import current, speaking

from .config import Config, ConfigError

T = TypeVar("T")

# data.name / model.name of a run whose datasets and network were handed over from Python (metacal.fit):
# "python:<class name>". Such a config names nothing a builder could rebuild.
PYTHON = "python:"


def from_python(cfg: Config) -> bool:
    """Whether the run's data and model came from Python (:func:`metacal.fit`), not from the config."""
    return cfg.data.name.startswith(PYTHON) or cfg.model.name.startswith(PYTHON)


def check_buildable(cfg: Config, how: str = "metacal.fit(model, train, ...)") -> None:
    """One ConfigError line when the data and model cannot be built from ``cfg`` (a :func:`metacal.fit` run);
    ``how`` is the call that can (the CLI names the run directory)."""
    if from_python(cfg):
        raise ConfigError(f"this config's data ({cfg.data.name}) and model ({cfg.model.name}) were given to "
                          "metacal.fit from Python, so the command line cannot rebuild them; pass the same datasets "
                          f"and model again from Python: {how}")


def construct(section: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call a constructor; bad parameters → ConfigError('<section>: <reason>') (just the reason when ``section``
    is empty: a message that names its config keys itself), :func:`metacal.registry.keyed` as a ConfigError."""
    try:
        return keyed(section, fn, *args, **kwargs)
    except ValueError as err:
        if isinstance(err, FileNotFoundError):
            raise
        raise ConfigError(str(err)) from None


def build_data(cfg: Config):
    """The data bundle of ``data.*`` (the label-noise, trusted and long-tail draws seeded by ``run.seed``, the split
    by ``data.seed``: metacal/data/registry.py); a message naming a dataset keyword says it as the config option it is
    here (``--set data.options.download=true`` / ``overrides=["data.options.download=true"]``)."""
    from metacal import data

    data.DATASETS.get(cfg.data.name)  # unknown name → UnknownNameError before any loading
    with speaking(current().in_config()):
        return construct(f"data ({cfg.data.name})", data.build, cfg.data.name, root=cfg.data.root,
                         seed=cfg.data.seed, draw_seed=cfg.run.seed, **cfg.data.options)


def build_model(cfg: Config, bundle: Any, load_checkpoint: bool = True,
                model: nn.Module | None = None) -> nn.Module:
    """The model by name (or ``model`` as given, :func:`metacal.fit`), started from ``model.checkpoint``
    (unless ``load_checkpoint`` is False: a resume restores its own weights), with ``model.freeze`` applied
    (metacal/train/optim.py)."""
    from metacal import models

    from .init_weights import load_initial_weights
    from .optim import freeze

    if model is None:
        models.check_name(cfg.model.name)
        options = dict(cfg.model.options)
        options.setdefault("input_shape", tuple(bundle.input_shape))
        model = construct(f"model ({cfg.model.name})", models.build, cfg.model.name,
                          num_classes=bundle.num_classes, in_channels=bundle.in_channels, **options)
    if cfg.model.checkpoint and load_checkpoint:
        construct("model.checkpoint", load_initial_weights, model, cfg.model.checkpoint,
                  list(cfg.model.checkpoint_skip))
    construct("model.freeze", freeze, model, list(cfg.model.freeze))
    return model


def build_loss(cfg: Config, model: nn.Module, num_classes: int) -> nn.Module:
    """The inner loss. ``ce_learnable_l2`` gets the head's shape from the model unless given."""
    from metacal import losses

    losses.LOSSES.get(cfg.loss.name)
    params = dict(cfg.loss.params)
    if cfg.loss.name == "ce_learnable_l2":
        head = model.classifier
        params.setdefault("weight_shape", tuple(head.weight.shape))
        params.setdefault("bias", head.bias is not None)
    if cfg.learner is not None:
        params.setdefault("reduction", "none")  # the learner's step weights/averages per-sample losses itself
    return construct(f"loss.params ({cfg.loss.name})", losses.build, cfg.loss.name, **params)


def check_loss_data(cfg: Config, loss_fn: nn.Module, bundle: Any) -> None:
    """ConfigError when the validation split is empty (every epoch is evaluated on it, the best epoch is selected
    and temperature scaling fitted on it), the test set is given but empty, or the loss cannot use the validation
    split (AdaFocal: fewer samples than bins), so the run stops before anything is written instead of at the end
    of its first epoch."""
    if len(bundle.val) == 0:
        sizes = f"train {len(bundle.train)}, val 0, meta-val {len(bundle.meta_val)}"
        raise ConfigError(f"the validation split is empty ({sizes}): each epoch is evaluated on it; give it a share "
                          "with data.options.split (train, val, meta_val fractions; default [0.8, 0.1, 0.1]), "
                          "more data, or metacal.fit(val=...)")
    if bundle.test is not None and len(bundle.test) == 0:
        raise ConfigError("the test set is empty; give it samples or leave it out (metrics.json then has test: null)")
    construct(f"loss.params ({cfg.loss.name})", loss_fn.check_validation_size, len(bundle.val))


def build_optimizer(cfg: Config, model: nn.Module) -> torch.optim.Optimizer:
    """SGD lr 0.1, momentum 0.9, weight decay 5e-4 by default (Wang & Golebiowski 2024, §4); or AdamW, frozen
    parameters left out, the backbone at ``optim.backbone_lr_scale`` × lr (metacal/train/optim.py)."""
    from .optim import build_optimizer as build

    return construct("optim", build, cfg.optim, model)


def build_scheduler(cfg: Config, optimizer: torch.optim.Optimizer, steps_per_epoch: int):
    """``schedule.name`` with its cadence (metacal/train/schedules.py): ``step`` = lr × ``lr_decay`` at each
    milestone epoch (150 and 250 in Wang & Golebiowski 2024), stepped once per epoch; with a warm-up, and
    ``cosine`` / ``constant``, stepped after every iteration."""
    from .schedules import build_schedule

    return construct("schedule", build_schedule, cfg.schedule, optimizer, steps_per_epoch)


def make_loaders(cfg: Config, bundle: Any) -> tuple[Any, Any, Any]:
    """Train (shuffled, global batch) and val/test (in order) DataLoaders, before accelerator.prepare; the
    test loader is None when the data has no test set (``image_folder`` without test/, ``arrays`` without x_test).
    ``data.batched``: in-memory data read a whole batch at a time (metacal/data/batched.py; same batches)."""
    from metacal.data.loaders import make_loader

    d = cfg.data
    common = dict(seed=cfg.run.seed, num_workers=d.num_workers, batched=d.batched)
    train = make_loader(bundle.train, d.batch_size, shuffle=True, **common)
    val = make_loader_of(cfg, bundle.val)
    test = None if bundle.test is None else make_loader_of(cfg, bundle.test)
    return train, val, test


def make_loader_of(cfg: Config, split: Any) -> Any:
    """An evaluation loader (in order, ``data.eval_batch_size``) over one split, before accelerator.prepare."""
    from metacal.data.loaders import make_loader

    d = cfg.data
    return make_loader(split, d.eval_batch_size, shuffle=False, seed=cfg.run.seed, num_workers=d.num_workers,
                       batched=d.batched)


def build_step(cfg: Config, accelerator: Accelerator, model: nn.Module, loss_fn: nn.Module,
               optimizer: Any, bundle: Any, steps_per_epoch: int) -> Stepper:
    """The iteration of this run; ``model``/``optimizer`` are the accelerator-prepared ones."""
    raw = accelerator.unwrap_model(model)
    if cfg.learner is None:
        head = raw.classifier if loss_fn.needs_head_params else None  # fixed learnable-L2 coefficients
        return PlainStep(model, loss_fn, optimizer, backward=accelerator.backward, head=head)
    spec = learner_spec(cfg.learner)  # an unknown name: one line with the closest learners
    context = BuildContext(cfg.learner, getattr(cfg, spec.section), cfg, accelerator, model, loss_fn, optimizer,
                           bundle, steps_per_epoch)
    return construct("", spec.build, context)


def check_global_batches(cfg: Config, processes: int) -> None:
    """ConfigError unless every global batch (``data.batch_size``, ``data.eval_batch_size`` and the learner's own,
    e.g. ``meta.batch_size``) divides among the processes."""
    batches = {"data.batch_size": cfg.data.batch_size, "data.eval_batch_size": cfg.data.eval_batch_size}
    if (own := global_batch(cfg)) is not None:
        batches[own[0]] = own[1]
    if any(size % processes for size in batches.values()):
        named = [f"{key} ({size})" for key, size in batches.items()]
        raise ConfigError(f"{', '.join(named[:-1])} and {named[-1]} are global batches and must be divisible by the "
                          f"number of processes ({processes})")


@dataclass
class Parts:
    """A run's built objects; ``model``, ``optimizer`` and the loaders are the accelerator-prepared ones."""

    model: nn.Module
    loss_fn: nn.Module
    optimizer: Any
    scheduler: Any  # metacal.train.schedules.LRSchedule: iteration_done() / epoch_done()
    stepper: Stepper
    loaders: list[Any]  # train, val, test (None without a test set)
    steps_per_epoch: int
    bundle: Any = None  # the data bundle (its input spec goes into predictor.json)


def build_parts(cfg: Config, accelerator: Accelerator, bundle: Any = None, model: nn.Module | None = None,
                load_checkpoint: bool = True) -> Parts:
    """Every object of the run, in a fixed order (the seeded initialisations depend on it); ``bundle`` / ``model``
    given from Python (:func:`metacal.fit`) are used as they are (``model.checkpoint`` and ``model.freeze`` apply)."""
    check_global_batches(cfg, accelerator.num_processes)
    if bundle is None or model is None:
        check_buildable(cfg)
    if cfg.learner is not None:
        learner_spec(cfg.learner)  # an unknown learner stops the run before the data is read
    bundle = build_data(cfg) if bundle is None else bundle
    model = build_model(cfg, bundle, load_checkpoint=load_checkpoint, model=model)
    loss_fn = build_loss(cfg, model, bundle.num_classes).to(accelerator.device)
    check_loss_data(cfg, loss_fn, bundle)
    raw_optimizer = build_optimizer(cfg, model)
    model, optimizer, *loaders = accelerator.prepare(model, raw_optimizer, *make_loaders(cfg, bundle))
    steps_per_epoch = len(loaders[0])
    if cfg.run.max_steps_per_epoch is not None:
        steps_per_epoch = min(steps_per_epoch, cfg.run.max_steps_per_epoch)
    stepper = build_step(cfg, accelerator, model, loss_fn, optimizer, bundle, steps_per_epoch)
    scheduler = build_scheduler(cfg, raw_optimizer, steps_per_epoch)
    return Parts(model, loss_fn, optimizer, scheduler, stepper, loaders, steps_per_epoch, bundle)
