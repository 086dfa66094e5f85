"""What one training iteration does, from the config: a :class:`~metacal.meta.PlainStep`, or a
:class:`~metacal.meta.MetaLearner` learning what ``meta.learner`` names:

* ``gamma_net`` (FLγ-SECE / FLγ-DECE, Wang & Golebiowski 2024): per-sample γ = GammaNet(features) with
  ``num_heads`` = number of classes (their §4.1); the inner loss is the configured focal-family loss.
* ``loss`` (CE-SECE / CE-DECE, Bohdal et al. 2023): the loss's own ``meta_parameters()`` (the
  ``ce_learnable_l2`` coefficients).

The meta objective is ``metacal.objectives.build(meta.objective, **meta.objective_params)``, evaluated
on a stream of meta-validation batches (each process reads its own slice of the global batch). A meta-val
split smaller than ``meta.batch_size`` (a small folder of one's own images) gives batches of the whole split,
with a one-line warning naming both numbers (:func:`meta_batch_size`).
"""

from __future__ import annotations

import sys
from typing import Any

import torch
from accelerate import Accelerator
from torch import nn

from metacal import objectives
from metacal.data.loaders import InfiniteLoader
from metacal.meta import GammaNet, MetaLearner, PlainStep
from metacal.meta.auto import AutoScalar
from metacal.meta.root_finder import SignRootFinder

from . import components
from .config import Config, ConfigError


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
               optimizer: Any, bundle: Any, steps_per_epoch: int) -> PlainStep | MetaLearner | AutoScalar:
    """The iteration of this run; ``model``/``optimizer`` are the accelerator-prepared ones."""
    raw = accelerator.unwrap_model(model)
    if not cfg.meta.enabled:
        head = raw.classifier if loss_fn.needs_head_params else None  # fixed learnable-L2 coefficients
        return PlainStep(model, loss_fn, optimizer, backward=accelerator.backward, head=head)
    if cfg.meta.learner == "auto":
        return build_auto(cfg, accelerator, model, loss_fn, optimizer, bundle, steps_per_epoch)

    m = cfg.meta
    if cfg.run.mixed_precision == "fp16":
        raise ConfigError("meta.enabled with run.mixed_precision=fp16 is not supported (the meta step's "
                          "SGD update bypasses the fp16 grad scaler); use bf16 or no")
    if m.backend == "head" and not getattr(raw, "features_are_head_input", True):
        raise ConfigError("meta.backend=head differentiates the head applied to the features, but model.options."
                          "feature_layer makes the features another layer's output; use backend jvp or higher")
    objective = components.construct(f"meta.objective_params ({m.objective})", objectives.build, m.objective,
                                      **m.objective_params)
    gamma_net = None
    if m.learner == "gamma_net":
        if not loss_fn.per_sample_gamma:
            raise ConfigError(f"meta.learner=gamma_net needs a loss that takes a per-sample gamma= (focal, "
                              f"dual_focal, inverse_focal, focal_gra, dual_focal_gra); loss '{cfg.loss.name}' "
                              "ignores it, so the γ-Net would get no hypergradient")
        gamma_net = components.construct(
            "meta.gamma_net", GammaNet, feature_dim=int(raw.feature_dim),
            **{"num_heads": int(bundle.num_classes), **m.gamma_net}).to(accelerator.device)
        shape = [gamma_net.attention, gamma_net.weight]
        meta_params = [{"params": [gamma_net.bias]}, {"params": shape, "lr": m.lr * m.shape_lr_scale}]
    else:
        meta_params = [p for p in loss_fn.meta_parameters() if p.requires_grad]
        if not meta_params:
            raise ConfigError(f"meta.learner=loss needs a loss with meta-parameters (ce_learnable_l2); "
                              f"loss '{cfg.loss.name}' has none")
    if m.optimizer == "adam":
        meta_optimizer = torch.optim.Adam(meta_params, lr=m.lr, weight_decay=m.weight_decay)
    else:
        meta_optimizer = torch.optim.SGD(meta_params, lr=m.lr, weight_decay=m.weight_decay)
    n = accelerator.num_processes
    batch = meta_batch_size(cfg, len(bundle.meta_val), n, warn=accelerator.is_main_process)
    meta_val = components.construct("meta.batch_size", InfiniteLoader, bundle.meta_val, batch,
                                    seed=cfg.run.seed, rank=accelerator.process_index, world_size=n)
    return components.construct(
        "meta", MetaLearner, raw, optimizer, objective, gamma_net=gamma_net, loss=loss_fn, backend=m.backend,
        meta_optimizer=meta_optimizer, meta_val=meta_val, ce_weight=m.ce_weight, every=m.every,
        max_grad_norm=m.max_backbone_grad_norm, max_meta_grad_norm=m.max_meta_grad_norm,
        backward=accelerator.backward, forward_model=model, horizon=m.horizon,
        horizon_decay=m.horizon_decay)


#: meta.controller's keys and defaults for meta.learner=auto (metacal/meta/auto.py); ``max`` None: the loss's
#: own upper end of the scalar (1 for label-smoothing ε), capped at 10 where the loss has none (focal γ).
AUTO_DEFAULTS: dict[str, Any] = {"band": 1.0, "grow": 1.2, "shrink": 0.5, "max": None, "updates_per_epoch": 1,
                                 "sample": None}


def build_auto(cfg: Config, accelerator: Accelerator, model: nn.Module, loss_fn: nn.Module, optimizer: Any,
               bundle: Any, steps_per_epoch: int) -> AutoScalar:
    """meta.learner=auto: plain steps of the loss with its confidence scalar found by root-finding."""
    m = cfg.meta
    knob = loss_fn.confidence_knob
    if knob is None or not isinstance(getattr(loss_fn, knob, None), float):
        raise ConfigError(f"meta.learner=auto sets one scalar of the loss that lowers confidence (focal or dual_focal "
                          f"γ, label_smoothing ε); loss '{cfg.loss.name}' has none (or a per-class γ)")
    unknown = sorted(set(m.controller) - set(AUTO_DEFAULTS))
    if unknown:
        raise ConfigError(f"meta.controller has no key(s) {', '.join(unknown)}; valid: {', '.join(AUTO_DEFAULTS)}")
    opts = {**AUTO_DEFAULTS, **m.controller}
    lo, hi = loss_fn.knob_range
    top = float(opts["max"]) if opts["max"] is not None else min(hi, 10.0)
    start = float(m.gamma_net.get("init_gamma", getattr(loss_fn, knob)))
    checks = [
        (m.lr > 0, f"meta.lr (the first step of the automatic {knob}) must be > 0; got {m.lr}"),
        (lo < top <= hi, f"meta.controller.max must be in ({lo}, {hi}] for {knob}; got {top}"),
        (lo <= start <= top, f"meta.gamma_net.init_gamma (the start of {knob}, {start}) must be in "
                             f"[{lo}, meta.controller.max = {top}]"),
        (opts["sample"] is None or (isinstance(opts["sample"], int) and not isinstance(opts["sample"], bool)),
         f"meta.controller.sample must be a whole number of meta-val samples or null (all); got {opts['sample']!r}"),
    ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(message)
    n = accelerator.num_processes
    try:
        finder = SignRootFinder(start, float(m.lr), lo, top, band=float(opts["band"]), grow=float(opts["grow"]),
                                shrink=float(opts["shrink"]))
        return AutoScalar(
            model, loss_fn, optimizer, bundle.meta_val, finder, knob, steps_per_epoch=steps_per_epoch,
            updates_per_epoch=int(opts["updates_per_epoch"]), sample=opts["sample"],
            batch_size=max(1, cfg.data.eval_batch_size // n), seed=cfg.run.seed, rank=accelerator.process_index,
            world_size=n, backward=accelerator.backward, measure_model=accelerator.unwrap_model(model))
    except ValueError as err:
        raise ConfigError(f"meta.controller: {err}") from None
