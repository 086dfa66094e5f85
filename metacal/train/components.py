"""Build the pieces a run needs from its config: data, model, loss, optimiser, schedule, loaders.

Constructor errors caused by the config (unknown parameter → TypeError, bad value → ValueError) become
:class:`~metacal.train.config.ConfigError` naming the config section, so the CLI prints one line.
Unknown registry names raise :class:`metacal.registry.UnknownNameError` unchanged (its message names the
closest valid names and where the full list is); missing data raises :class:`metacal.data.DataNotFoundError`.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

import torch
from torch import nn

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
    """Call a constructor; bad parameters → ConfigError('<section>: <reason>')."""
    try:
        return fn(*args, **kwargs)
    except UnknownNameError:
        raise
    except (TypeError, ValueError) as err:
        if isinstance(err, FileNotFoundError):
            raise
        raise ConfigError(f"{section}: {' '.join(str(err).split())}") from None


def build_data(cfg: Config):
    """The data bundle of ``data.*``; a message naming a dataset keyword says it as the config option it is
    here (``--set data.options.download=true`` / ``overrides=["data.options.download=true"]``)."""
    from metacal import data

    check_buildable(cfg)
    data.DATASETS.get(cfg.data.name)  # unknown name → UnknownNameError before any loading
    with speaking(current().in_config()):
        return construct(f"data ({cfg.data.name})", data.build, cfg.data.name, root=cfg.data.root,
                         seed=cfg.data.seed, **cfg.data.options)


def build_model(cfg: Config, bundle: Any, load_checkpoint: bool = True,
                model: nn.Module | None = None) -> nn.Module:
    """The model by name (or ``model`` as given, :func:`metacal.fit`), started from ``model.checkpoint``
    (unless ``load_checkpoint`` is False: a resume restores its own weights), with ``model.freeze`` applied
    (metacal/train/optim.py)."""
    from metacal import models

    from .init_weights import load_initial_weights
    from .optim import freeze

    if model is None:
        check_buildable(cfg)
        models.check_name(cfg.model.name)
        options = dict(cfg.model.options)
        options.setdefault("input_shape", tuple(bundle.input_shape))
        model = construct(f"model ({cfg.model.name})", models.build, cfg.model.name,
                          num_classes=bundle.num_classes, in_channels=bundle.in_channels, **options)
    if cfg.model.checkpoint and load_checkpoint:
        construct("model.checkpoint", load_initial_weights, model, cfg.model.checkpoint, list(cfg.model.checkpoint_skip))
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
    if cfg.meta.enabled:
        params.setdefault("reduction", "none")  # the meta step weights/averages per-sample losses itself
    return construct(f"loss.params ({cfg.loss.name})", losses.build, cfg.loss.name, **params)


def check_loss_data(cfg: Config, loss_fn: nn.Module, bundle: Any) -> None:
    """ConfigError when the loss cannot use the data's validation split (AdaFocal: fewer samples than bins),
    so the run stops before anything is written instead of at the end of its first epoch."""
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
    test loader is None when the data has no test set (``image_folder`` without test/, ``arrays`` without x_test)."""
    from metacal.data.loaders import make_loader

    d = cfg.data
    train = make_loader(bundle.train, d.batch_size, shuffle=True, seed=cfg.run.seed, num_workers=d.num_workers)
    val = make_loader(bundle.val, d.eval_batch_size, shuffle=False, seed=cfg.run.seed, num_workers=d.num_workers)
    test = None if bundle.test is None else make_loader(bundle.test, d.eval_batch_size, shuffle=False,
                                                        seed=cfg.run.seed, num_workers=d.num_workers)
    return train, val, test
