"""The two meta learners, registered with their section ``meta`` (:class:`~metacal.meta.settings.MetaSettings`):

* ``gamma_net`` (FLγ-SECE / FLγ-DECE, Wang & Golebiowski 2024): per-sample γ = GammaNet(features) with
  ``num_heads`` = number of classes (their §4.1); the inner loss is the configured focal-family loss;
* ``loss`` (CE-SECE / CE-DECE, Bohdal et al. 2023): the loss's own ``meta_parameters()`` (``ce_learnable_l2``).

Both take a hypergradient step of their meta-parameters after every backbone step (:class:`MetaLearner`). The meta
objective is ``metacal.objectives.build(meta.objective, **meta.objective_params)`` on a stream of meta-validation
batches (each process reads its own slice of the global batch); a meta-val split smaller than ``meta.batch_size``
gives batches of the whole split, with a one-line warning (:func:`meta_batch_size`).
"""

from __future__ import annotations

import sys
from typing import Any

from metacal import objectives
from metacal.data.loaders import InfiniteLoader
from metacal.registry import keyed

from .gamma_net import GammaNet
from .hypergrad_jvp import preload_forward_ad
from .learner import MetaLearner
from .learners import BuildContext, learner
from .settings import META_OPTIMIZERS, SECTION, MetaSettings


def meta_batch_size(settings: MetaSettings, meta_val_size: int, processes: int, warn: bool = True) -> int:
    """The per-process meta batch: ``meta.batch_size`` split over the processes, clamped to each process's share
    of the meta-val split (a warning on stderr when ``warn``); ValueError when a process would get none."""
    per_process = meta_val_size // processes
    if per_process == 0:
        raise ValueError(f"the meta step needs meta-validation samples, one per process at least ({processes}), but "
                         f"the meta-val split has {meta_val_size}; give it a share with data.options.split "
                         "(train, val, meta_val fractions; default [0.8, 0.1, 0.1]) and no data.options.fold_meta_val")
    batch = settings.batch_size // processes
    if batch > per_process:
        if warn:
            print(f"warning: meta.batch_size {settings.batch_size} is larger than the meta-val split "
                  f"({meta_val_size} samples); using meta batches of {per_process * processes}", file=sys.stderr,
                  flush=True)
        batch = per_process
    return batch


def meta_parameters(ctx: BuildContext, raw: Any) -> tuple[GammaNet | None, list[Any]]:
    """The γ-Net (learner gamma_net; None for learner loss) and the parameter groups of the meta optimiser: the
    γ-Net's bias at ``meta.lr`` and its shape at ``lr × shape_lr_scale``, or the loss's own meta-parameters."""
    m = ctx.settings
    if ctx.name == "gamma_net":
        net = keyed(f"{SECTION}.gamma_net", GammaNet, feature_dim=int(raw.feature_dim),
                    **{"num_heads": int(ctx.bundle.num_classes), **m.gamma_net}).to(ctx.accelerator.device)
        return net, [{"params": [net.bias]}, {"params": [net.attention, net.weight], "lr": m.lr * m.shape_lr_scale}]
    params = [p for p in ctx.loss.meta_parameters() if p.requires_grad]
    if not params:
        raise ValueError(f"learner loss needs a loss with meta-parameters (ce_learnable_l2); "
                         f"loss '{ctx.cfg.loss.name}' has none")
    return None, params


@learner("gamma_net", settings=MetaSettings, section=SECTION, capturable=True,
         fixed=("gamma_net", "optimizer", "batch_size"))
@learner("loss", settings=MetaSettings, section=SECTION, capturable=True, fixed=("optimizer", "batch_size"))
def build_meta(ctx: BuildContext) -> MetaLearner:
    """learner gamma_net (the γ-Net's parameters) or loss (the loss's own meta-parameters): a hypergradient
    step of them after every backbone step."""
    accelerator, m, cfg = ctx.accelerator, ctx.settings, ctx.cfg
    raw = accelerator.unwrap_model(ctx.model)
    if cfg.run.mixed_precision == "fp16":
        raise ValueError(f"learner {ctx.name} with run.mixed_precision=fp16 is not supported (the meta step's "
                         "SGD update bypasses the fp16 grad scaler); use bf16 or no")
    if m.backend == "head" and not getattr(raw, "features_are_head_input", True):
        raise ValueError("meta.backend=head differentiates the head applied to the features, but model.options."
                         "feature_layer makes the features another layer's output; use backend jvp or higher")
    preload_forward_ad()  # the jvp step's first forward-mode pass, without torch's jit warning
    objective = keyed(f"{SECTION}.objective_params ({m.objective})", objectives.build, m.objective,
                      **m.objective_params)
    net, params = meta_parameters(ctx, raw)
    meta_optimizer = META_OPTIMIZERS[m.optimizer](params, lr=m.lr, weight_decay=m.weight_decay)
    n = accelerator.num_processes
    batch = meta_batch_size(m, len(ctx.bundle.meta_val), n, warn=accelerator.is_main_process)
    meta_val = keyed(f"{SECTION}.batch_size", InfiniteLoader, ctx.bundle.meta_val, batch, seed=cfg.run.seed,
                     rank=accelerator.process_index, world_size=n, batched=cfg.data.batched)
    return keyed(
        SECTION, MetaLearner, raw, ctx.optimizer, objective, gamma_net=net, loss=ctx.loss, backend=m.backend,
        meta_optimizer=meta_optimizer, meta_val=meta_val, ce_weight=m.ce_weight, every=m.every,
        max_grad_norm=m.max_backbone_grad_norm, max_meta_grad_norm=m.max_meta_grad_norm,
        backward=accelerator.backward, forward_model=ctx.model, horizon=m.horizon,
        horizon_decay=m.horizon_decay, autocast=accelerator.autocast)
