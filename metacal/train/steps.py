"""What one training iteration does, from the config: a :class:`~metacal.meta.PlainStep`, or a
:class:`~metacal.meta.MetaLearner` learning what ``meta.learner`` names:

* ``gamma_net`` (FLγ-SECE / FLγ-DECE, Wang & Golebiowski 2024): per-sample γ = GammaNet(features) with
  ``num_heads`` = number of classes (their §4.1); the inner loss is the configured focal-family loss.
* ``loss`` (CE-SECE / CE-DECE, Bohdal et al. 2023): the loss's own ``meta_parameters()`` (the
  ``ce_learnable_l2`` coefficients).

The meta objective is ``metacal.objectives.build(meta.objective, **meta.objective_params)``, evaluated
on a stream of meta-validation batches (each process reads its own slice of the global batch).
"""

from __future__ import annotations

from typing import Any

import torch
from accelerate import Accelerator
from torch import nn

from metacal import objectives
from metacal.data.loaders import InfiniteLoader
from metacal.meta import GammaNet, MetaLearner, PlainStep

from . import components
from .config import Config, ConfigError


def build_step(cfg: Config, accelerator: Accelerator, model: nn.Module, loss_fn: nn.Module,
               optimizer: Any, bundle: Any) -> PlainStep | MetaLearner:
    """The iteration of this run; ``model``/``optimizer`` are the accelerator-prepared ones."""
    raw = accelerator.unwrap_model(model)
    if not cfg.meta.enabled:
        head = raw.classifier if loss_fn.needs_head_params else None  # fixed learnable-L2 coefficients
        return PlainStep(model, loss_fn, optimizer, backward=accelerator.backward, head=head)

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
    meta_val = components.construct("meta.batch_size", InfiniteLoader, bundle.meta_val, m.batch_size // n,
                                    seed=cfg.run.seed, rank=accelerator.process_index, world_size=n)
    return components.construct(
        "meta", MetaLearner, raw, optimizer, objective, gamma_net=gamma_net, loss=loss_fn, backend=m.backend,
        meta_optimizer=meta_optimizer, meta_val=meta_val, ce_weight=m.ce_weight, every=m.every,
        max_grad_norm=m.max_backbone_grad_norm, max_meta_grad_norm=m.max_meta_grad_norm,
        backward=accelerator.backward, forward_model=model, horizon=m.horizon,
        horizon_decay=m.horizon_decay)

