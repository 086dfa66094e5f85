"""Wire metacal.meta into the trainer: γ-Net or learnable-L2 coefficients, meta optimiser, meta-val stream.

* FLγ-SECE / FLγ-DECE (``meta.learner: gamma_net``): per-sample γ = GammaNet(features) (seed 003 eq. 4–5,
  ``num_heads`` = number of classes), inner loss = the configured focal-family loss with call-time γ.
* CE-SECE / CE-DECE (``meta.learner: loss``): meta-parameters = the loss's own ``meta_parameters()``
  (``ce_learnable_l2`` coefficients, Bohdal et al.).

Across processes (DDP): the real forward goes through the prepared wrapper (``forward_model``), the
lookahead/JVP through the unwrapped module; the meta-val gradients v and the meta-parameter gradients
are averaged over ranks with ``accelerator.reduce`` (so every rank applies the same meta update and
the hypergradient is the one of the global batch). Each rank reads its own disjoint slice of the
global meta-val batch (``InfiniteLoader(rank=, world_size=)``).
"""

from __future__ import annotations

from typing import Any

import torch
from accelerate import Accelerator
from torch import nn

from . import components
from .config import Config, ConfigError


class MetaSetup:
    """Owns the meta step, the γ-Net (if any) and the meta-validation stream; ``step(x, y)`` = one iteration."""

    def __init__(self, cfg: Config, accelerator: Accelerator, model: nn.Module, loss_fn: nn.Module,
                 optimizer: Any, bundle: Any) -> None:
        from metacal.data.loaders import InfiniteLoader
        from metacal.meta import BACKENDS, GammaNet, build_meta_step

        m = cfg.meta
        BACKENDS.get(m.backend)
        if cfg.run.mixed_precision == "fp16":
            raise ConfigError("meta.enabled with run.mixed_precision=fp16 is not supported (the meta step's "
                              "SGD update bypasses the fp16 grad scaler); use bf16 or no")
        n = accelerator.num_processes  # batch sizes were checked to be divisible by n in train()
        if m.backend == "higher" and n > 1:
            raise ConfigError("meta.backend=higher runs in a single process only (it updates the weights itself, "
                              "bypassing DDP's gradient averaging); use jvp or head with several processes")
        self.accelerator = accelerator
        raw = accelerator.unwrap_model(model)
        objective = components.build_objective(cfg)
        if isinstance(objective, nn.Module):
            objective = objective.to(accelerator.device)

        self.gamma_net: nn.Module | None = None
        if m.learner == "gamma_net":
            if loss_fn.meta_parameters():
                raise ConfigError(f"meta.learner=gamma_net needs a focal-family loss; loss '{cfg.loss.name}' "
                                  "has its own meta-parameters (use meta.learner=loss)")
            if not _uses_per_sample_gamma(loss_fn, bundle.num_classes, accelerator.device):
                raise ConfigError(f"meta.learner=gamma_net needs a loss whose per-sample gamma= has an effect "
                                  f"(focal, dual_focal, inverse_focal, focal_gra, dual_focal_gra); loss "
                                  f"'{cfg.loss.name}' ignores it, so the γ-Net would get no hypergradient")
            self.gamma_net = components.construct(
                "meta.gamma_net", GammaNet, feature_dim=int(raw.feature_dim),
                **{"num_heads": int(bundle.num_classes), **m.gamma_net}).to(accelerator.device)  # k = K (seed 003)
            self._broadcast(self.gamma_net)
            meta_params = list(self.gamma_net.parameters())
        else:
            meta_params = [p for p in loss_fn.meta_parameters() if p.requires_grad]
            if not meta_params:
                raise ConfigError(f"meta.learner=loss needs a loss with meta-parameters (ce_learnable_l2); "
                                  f"loss '{cfg.loss.name}' has none")
        meta_optimizer = components.build_meta_optimizer(cfg, meta_params)
        sync = self._average_grads if n > 1 else None
        sync_v = self._average_in_place if n > 1 else None
        self.meta_step = components.construct(
            "meta.step_options", build_meta_step, raw, getattr(optimizer, "optimizer", optimizer), objective,
            gamma_net=self.gamma_net, loss=loss_fn, backend=m.backend, meta_optimizer=meta_optimizer,
            backward=accelerator.backward, sync_meta_grads=sync, sync_meta_val_grads=sync_v,
            forward_model=model, **m.step_options)
        self.stream = components.construct(
            "meta.batch_size", InfiniteLoader, bundle.meta_val, m.batch_size // n, seed=cfg.run.seed,
            rank=accelerator.process_index, world_size=n)

    def _broadcast(self, module: nn.Module) -> None:
        """Identical meta-parameters on every rank from the start (rank 0's initialisation)."""
        if self.accelerator.num_processes > 1:
            for p in module.parameters():
                torch.distributed.broadcast(p.data, src=0)

    def _average_in_place(self, tensors: list[torch.Tensor]) -> None:
        for t in tensors:
            t.copy_(self.accelerator.reduce(t.detach(), reduction="mean"))

    def _average_grads(self, params: list[nn.Parameter]) -> None:
        self._average_in_place([p.grad for p in params if p.grad is not None])

    def checkpointables(self) -> list[Any]:
        """Stateful objects for ``register_for_checkpointing`` (MetaStep holds the meta optimiser)."""
        out: list[Any] = [self.meta_step, self.stream]
        if self.gamma_net is not None:
            out.insert(0, self.gamma_net)
        return out

    def step(self, inputs: torch.Tensor, targets: torch.Tensor) -> dict[str, Any]:
        """One iteration on the train batch plus this rank's slice of the next meta-val batch."""
        meta_x, meta_y = next(self.stream)
        device = self.accelerator.device
        out = self.meta_step(inputs, targets, meta_x.to(device), meta_y.to(device))
        meta_value = out.get("meta_objective")
        return {
            "loss": torch.tensor(float(out["inner_loss"])),
            "meta_objective": None if meta_value is None else torch.tensor(float(meta_value)),
            "gamma": out.get("gamma"),
        }


def _uses_per_sample_gamma(loss_fn: nn.Module, num_classes: int, device: torch.device) -> bool:
    """Probe: does ∂loss/∂γ exist and differ from 0 for a per-sample ``gamma=`` on a small random batch?"""
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(4, num_classes, generator=generator).to(device)
    targets = torch.arange(4).remainder(num_classes).to(device)
    gamma = torch.ones(4, device=device, requires_grad=True)
    try:
        value = loss_fn(logits, targets, gamma=gamma).sum()
    except TypeError:
        return False
    if not value.requires_grad:
        return False
    (grad,) = torch.autograd.grad(value, gamma, allow_unused=True)
    return grad is not None and bool(grad.abs().sum() > 0)
