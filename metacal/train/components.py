"""The one place that turns a validated config into a run's objects: data, model, loss, optimiser, schedule,
loaders and the iteration (:func:`build_parts`). After loading (metacal/train/config.py) it is the only place
that raises :class:`~metacal.train.config.ConfigError`.

Constructor errors caused by the config (unknown option → the registry's ValueError, bad value → ValueError)
become one ConfigError line naming the config section (:func:`construct`). Unknown registry names raise
:class:`metacal.registry.UnknownNameError` unchanged (its message names the closest valid names and where the
full list is); missing data raises :class:`metacal.data.DataNotFoundError`.

The iteration is a :class:`~metacal.meta.PlainStep`, or the learner that ``learner`` names in the registry
:data:`metacal.meta.LEARNERS` (one's own too); built in:

* ``gamma_net`` (FLγ-SECE / FLγ-DECE, Wang & Golebiowski 2024): per-sample γ = GammaNet(features) with
  ``num_heads`` = number of classes (their §4.1); the inner loss is the configured focal-family loss.
* ``loss`` (CE-SECE / CE-DECE, Bohdal et al. 2023): the loss's own ``meta_parameters()`` (``ce_learnable_l2``).
* ``auto``: one scalar of the loss set by root-finding on the held-out calibration gap (:mod:`metacal.meta.auto`,
  which also owns its section ``auto``, :class:`~metacal.meta.auto.AutoSettings`).

The meta objective is ``metacal.objectives.build(meta.objective, **meta.objective_params)`` on a stream of
meta-validation batches (each process reads its own slice of the global batch); a meta-val split smaller than
``meta.batch_size`` gives batches of the whole split, with a one-line warning (:func:`meta_batch_size`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

import torch
from accelerate import Accelerator
from torch import nn
from torch.utils.data import ConcatDataset

from metacal import objectives
from metacal.data.loaders import InfiniteLoader
from metacal.data.shift_suites import shifted_held_out
from metacal.meta import LEARNERS, META_OPTIMIZERS, GammaNet, MetaLearner, PlainStep, Stepper
from metacal.meta.auto import AutoScalar, build_finder
from metacal.registry import UnknownNameError
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
    is empty: a message that names its config keys itself)."""
    try:
        return fn(*args, **kwargs)
    except UnknownNameError:
        raise
    except (TypeError, ValueError) as err:
        if isinstance(err, FileNotFoundError):
            raise
        reason = " ".join(str(err).split())
        raise ConfigError(f"{section}: {reason}" if section else reason) from None


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


def meta_batch_size(cfg: Config, meta_val_size: int, processes: int, warn: bool = True) -> int:
    """The per-process meta batch: ``meta.batch_size`` split over the processes, clamped to each process's share
    of the meta-val split (a warning on stderr when ``warn``); ConfigError when a process would get none."""
    per_process = meta_val_size // processes
    if per_process == 0:
        raise ConfigError(f"the meta step needs meta-validation samples, one per process at least ({processes}), but "
                          f"the meta-val split has {meta_val_size}; give it a share with data.options.split "
                          "(train, val, meta_val fractions; default [0.8, 0.1, 0.1]) and no data.options.fold_meta_val")
    batch = cfg.meta.batch_size // processes
    if batch > per_process:
        if warn:
            print(f"warning: meta.batch_size {cfg.meta.batch_size} is larger than the meta-val split "
                  f"({meta_val_size} samples); using meta batches of {per_process * processes}", file=sys.stderr,
                  flush=True)
        batch = per_process
    return batch


def build_step(cfg: Config, accelerator: Accelerator, model: nn.Module, loss_fn: nn.Module,
               optimizer: Any, bundle: Any, steps_per_epoch: int) -> Stepper:
    """The iteration of this run; ``model``/``optimizer`` are the accelerator-prepared ones."""
    raw = accelerator.unwrap_model(model)
    if cfg.learner is None:
        head = raw.classifier if loss_fn.needs_head_params else None  # fixed learnable-L2 coefficients
        return PlainStep(model, loss_fn, optimizer, backward=accelerator.backward, head=head)
    build = LEARNERS.get(cfg.learner)  # an unknown name: one line with the closest learners
    return build(cfg, accelerator, model, loss_fn, optimizer, bundle, steps_per_epoch)


@LEARNERS.register("gamma_net")
@LEARNERS.register("loss")
def build_meta(cfg: Config, accelerator: Accelerator, model: nn.Module, loss_fn: nn.Module, optimizer: Any,
               bundle: Any, steps_per_epoch: int) -> MetaLearner:
    """learner gamma_net (the γ-Net's parameters) or loss (the loss's own meta-parameters): a hypergradient
    step of them after every backbone step."""
    raw = accelerator.unwrap_model(model)
    m = cfg.meta
    if cfg.run.mixed_precision == "fp16":
        raise ConfigError(f"learner {cfg.learner} with run.mixed_precision=fp16 is not supported (the meta step's "
                          "SGD update bypasses the fp16 grad scaler); use bf16 or no")
    if m.backend == "head" and not getattr(raw, "features_are_head_input", True):
        raise ConfigError("meta.backend=head differentiates the head applied to the features, but model.options."
                          "feature_layer makes the features another layer's output; use backend jvp or higher")
    objective = construct(f"meta.objective_params ({m.objective})", objectives.build, m.objective,
                          **m.objective_params)
    net: GammaNet | None = None  # the γ-Net (learner gamma_net); the loss's coefficients otherwise
    if cfg.learner == "gamma_net":
        net = construct(
            "meta.gamma_net", GammaNet, feature_dim=int(raw.feature_dim),
            **{"num_heads": int(bundle.num_classes), **m.gamma_net}).to(accelerator.device)
        shape = [net.attention, net.weight]
        meta_params = [{"params": [net.bias]}, {"params": shape, "lr": m.lr * m.shape_lr_scale}]
    else:
        meta_params = [p for p in loss_fn.meta_parameters() if p.requires_grad]
        if not meta_params:
            raise ConfigError(f"learner loss needs a loss with meta-parameters (ce_learnable_l2); "
                              f"loss '{cfg.loss.name}' has none")
    meta_optimizer = META_OPTIMIZERS[m.optimizer](meta_params, lr=m.lr, weight_decay=m.weight_decay)
    n = accelerator.num_processes
    batch = meta_batch_size(cfg, len(bundle.meta_val), n, warn=accelerator.is_main_process)
    meta_val = construct("meta.batch_size", InfiniteLoader, bundle.meta_val, batch,
                         seed=cfg.run.seed, rank=accelerator.process_index, world_size=n, batched=cfg.data.batched)
    return construct(
        "meta", MetaLearner, raw, optimizer, objective, gamma_net=net, loss=loss_fn, backend=m.backend,
        meta_optimizer=meta_optimizer, meta_val=meta_val, ce_weight=m.ce_weight, every=m.every,
        max_grad_norm=m.max_backbone_grad_norm, max_meta_grad_norm=m.max_meta_grad_norm,
        backward=accelerator.backward, forward_model=model, horizon=m.horizon,
        horizon_decay=m.horizon_decay, autocast=accelerator.autocast)


@LEARNERS.register("auto")
def build_auto(cfg: Config, accelerator: Accelerator, model: nn.Module, loss_fn: nn.Module, optimizer: Any,
               bundle: Any, steps_per_epoch: int) -> AutoScalar:
    """learner auto: plain steps of the loss with its confidence scalar found by root-finding (section auto)."""
    settings = cfg.auto
    finder, measure_on = construct("", build_finder, settings, loss_fn, cfg.loss.name)
    n = accelerator.num_processes
    parts = [construct("auto.measure_on", shifted_held_out, bundle, split.removesuffix("_shifted"),
                       cfg.run.seed) if split.endswith("_shifted") else getattr(bundle, split)
             for split in measure_on]
    measured = parts[0] if len(parts) == 1 else ConcatDataset(parts)
    return construct(
        "auto", AutoScalar, model, loss_fn, optimizer, measured, finder, loss_fn.confidence_knob,
        steps_per_epoch=steps_per_epoch, updates_per_epoch=int(settings.updates_per_epoch), sample=settings.sample,
        batch_size=max(1, cfg.data.eval_batch_size // n), seed=cfg.run.seed, rank=accelerator.process_index,
        world_size=n, backward=accelerator.backward, measure_model=accelerator.unwrap_model(model),
        measured_on=measure_on)


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
    n = accelerator.num_processes
    if cfg.data.batch_size % n or cfg.data.eval_batch_size % n or (cfg.learner is not None and cfg.meta.batch_size % n):
        raise ConfigError(f"data.batch_size ({cfg.data.batch_size}), data.eval_batch_size "
                          f"({cfg.data.eval_batch_size}) and meta.batch_size ({cfg.meta.batch_size}) are global "
                          f"batches and must be divisible by the number of processes ({n})")
    if bundle is None or model is None:
        check_buildable(cfg)
    if cfg.learner is not None:
        LEARNERS.get(cfg.learner)  # an unknown learner stops the run before the data is read
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
