"""One training iteration of the bilevel method (seed 003 Alg. 1; REFERENCE §1).

``MetaStep.__call__(x, y, x_meta, y_meta)``:

1. the real backbone update with the inner loss at the current per-sample γ = γ-Net(features)
   (or CE + learnable L2), through ``forward_model``/``backward``/``optimizer.step()``;
2. the meta objective (``objective(logits, targets)`` + ``ce_weight``·CE) on the meta-val batch at the
   UPDATED weights (train-mode BN batch statistics, running statistics not touched);
3. the hypergradient of (2) w.r.t. the meta-parameters φ by the chosen backend ("jvp", "higher", "head"),
   ``sync_meta_grads(meta_params)``, optional meta clipping, one ``meta_optimizer.step()``.

Only φ receives gradients from the meta objective (the reference code leaks them into the backbone; here
every backend uses ``torch.autograd.grad`` w.r.t. explicit leaves). Every ``meta_every``-th call is a
meta step; the others are plain steps with γ from the γ-Net under no_grad.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from . import hypergrad_head, hypergrad_higher, hypergrad_jvp  # noqa: F401  (register the backends)
from .backend import BACKENDS, StepContext, head_names, real_step
from .gamma_net import GammaNet
from .inner import make_inner
from .sgd_lookahead import unwrap_sgd


def available_backends() -> list[str]:
    return BACKENDS.available()


class MetaObjective:
    """J(logits, y) = objective(logits, y) + ce_weight·CE(logits, y) (Bohdal et al.'s later CE + 0.5·DECE)."""

    def __init__(self, objective: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], ce_weight: float = 0.0):
        self.objective = objective
        self.ce_weight = float(ce_weight)

    def __call__(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        value = self.objective(logits, targets)
        if self.ce_weight:
            value = value + self.ce_weight * F.cross_entropy(logits, targets.long())
        return value


class MetaStep:
    """One iteration = real SGD step of the backbone + one hypergradient update of the meta-parameters.

    Args:
        model: the classifier (models contract: ``model(x, return_features=True)``, ``model.classifier``).
        optimizer: ``torch.optim.SGD`` over the backbone (any momentum/dampening/nesterov/weight decay), or
            a wrapper holding it in ``.optimizer`` (accelerate's AcceleratedOptimizer; its ``step`` is
            called, its SGD's hyper-parameters and state are read). No gradient accumulation: every call
            must take exactly one SGD step.
        objective: meta objective on logits, e.g. ``metacal.objectives.build("sece")``.
        gamma_net: the γ-Net (FLγ-SECE / FLγ-DECE); its parameters are φ. Or, instead,
        loss: ``metacal.losses.build("ce_learnable_l2", weight_shape=(K, d))`` (CE-SECE / CE-DECE; φ = its
            coefficients). With ``gamma_net``, ``loss`` is the focal loss (default focal, reduction="none").
        backend: "jvp" (default; exact, fast), "higher" (exact reference, single process), "head".
        meta_optimizer: optimizer over φ (default Adam, lr ``meta_lr`` = 1e-3).
        ce_weight: adds ce_weight·CE to the meta objective (0 = objective only).
        meta_every: meta step every n-th call (1 = every call).
        max_grad_norm / max_meta_grad_norm: optional total-norm clipping of backbone / meta gradients.
        backward: callable for the real loss (default ``Tensor.backward``; trainer: ``accelerator.backward``).
        sync_meta_grads: called with the list of meta-parameters after their grads are set (all-reduce).
        sync_meta_val_grads: optional, called with the list of meta-val gradients v (jvp/head) to
            all-reduce (average) them in place before the tangent is formed. With both syncs averaging,
            the multi-rank hypergradient is exact: θ' uses the rank-averaged g, so
            dJ̄/dφ = mean_r ∂/∂φ[−η·c·v̄ᵀ g_r], v̄ = mean_r v_r.
        forward_model: module for the real train forward (DDP wrapper); default ``model``.
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        objective: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
        *,
        gamma_net: GammaNet | None = None,
        loss: nn.Module | None = None,
        backend: str = "jvp",
        meta_optimizer: torch.optim.Optimizer | None = None,
        meta_lr: float = 1e-3,
        ce_weight: float = 0.0,
        meta_every: int = 1,
        max_grad_norm: float | None = None,
        max_meta_grad_norm: float | None = None,
        backward: Callable[[torch.Tensor], Any] | None = None,
        sync_meta_grads: Callable[[list[nn.Parameter]], Any] | None = None,
        sync_meta_val_grads: Callable[[list[torch.Tensor]], Any] | None = None,
        forward_model: nn.Module | None = None,
    ) -> None:
        unwrap_sgd(optimizer)  # refuses anything but torch.optim.SGD (possibly wrapped) with a clear error
        if isinstance(meta_every, bool) or not isinstance(meta_every, int) or meta_every < 1:
            raise ValueError(f"meta_every must be a positive int, got {meta_every!r}")
        for label, value in (("max_grad_norm", max_grad_norm), ("max_meta_grad_norm", max_meta_grad_norm)):
            if value is not None and not value > 0:
                raise ValueError(f"{label} must be > 0 or None, got {value!r}")
        self.backend_name = backend
        self.backend = BACKENDS.get(backend)
        self.inner = make_inner(gamma_net, loss)
        self.meta_parameters = [p for p in self.inner.meta_parameters() if p.requires_grad]
        self.meta_optimizer = meta_optimizer or torch.optim.Adam(self.meta_parameters, lr=meta_lr)
        self.meta_every = meta_every
        self.max_meta_grad_norm = max_meta_grad_norm
        self.sync_meta_grads = sync_meta_grads
        self.iteration = 0
        self.ctx = StepContext(
            model=model,
            forward_model=forward_model if forward_model is not None else model,
            optimizer=optimizer,
            inner=self.inner,
            objective=MetaObjective(objective, ce_weight),
            backward=backward if backward is not None else torch.Tensor.backward,
            max_grad_norm=max_grad_norm,
            sync_meta_val_grads=sync_meta_val_grads,
            head_names=head_names(model),
        )

    def __call__(
        self,
        inputs: torch.Tensor,
        targets: torch.Tensor,
        meta_inputs: torch.Tensor | None = None,
        meta_targets: torch.Tensor | None = None,
    ) -> dict[str, Any]:
        """One iteration; returns ``{"inner_loss": float, "meta_objective": float | None, "meta_step": bool,
        "gamma": Tensor (N,) | None, "logits": Tensor (N, K)}`` (tensors detached)."""
        is_meta = self.iteration % self.meta_every == 0
        self.iteration += 1
        self.ctx.model.train()
        if not is_meta:
            real = real_step(self.ctx, inputs, targets, keep_old=False, with_meta_graph=False)
            gamma = real.meta.detach() if torch.is_tensor(real.meta) else None
            return {
                "inner_loss": float(real.loss),
                "meta_objective": None,
                "meta_step": False,
                "gamma": gamma,
                "logits": real.logits,
            }
        if meta_inputs is None or meta_targets is None:
            raise ValueError("a meta step needs the meta-validation batch: call step(x, y, x_meta, y_meta)")
        self.meta_optimizer.zero_grad(set_to_none=True)
        out = self.backend(self.ctx, inputs, targets, meta_inputs, meta_targets)
        for p in self.meta_parameters:  # every rank must call the same collectives
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        if self.sync_meta_grads is not None:
            self.sync_meta_grads(self.meta_parameters)
        if self.max_meta_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.meta_parameters, self.max_meta_grad_norm)
        self.meta_optimizer.step()
        return {
            "inner_loss": float(out.inner_loss),
            "meta_objective": float(out.meta_objective),
            "meta_step": True,
            "gamma": out.gamma,
            "logits": out.logits,
        }

    def state_dict(self) -> dict[str, Any]:
        return {"iteration": self.iteration, "meta_optimizer": self.meta_optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.iteration = int(state["iteration"])
        self.meta_optimizer.load_state_dict(state["meta_optimizer"])


def build_meta_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    objective: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    **options: Any,
) -> MetaStep:
    """``MetaStep(model, optimizer, objective, **options)`` (see :class:`MetaStep`)."""
    return MetaStep(model, optimizer, objective, **options)
