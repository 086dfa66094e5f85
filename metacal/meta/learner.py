"""The meta learner: one training iteration of the bilevel method (Wang & Golebiowski 2024, Alg. 1).

``MetaLearner.step(x, y)`` does, in order:

1. the real backbone update with the inner loss at the current meta-parameters φ — focal loss at
   per-sample γ = γ-Net(features) (FLγ-SECE / FLγ-DECE), or CE + learnable L2 on the head (CE-SECE /
   CE-DECE, Bohdal et al. 2023) — through ``forward_model`` / ``backward`` / ``optimizer.step()``;
2. the meta objective J = objective(logits, y) + ce_weight·CE on the next meta-validation batch at the
   UPDATED weights θ' (train-mode BN batch statistics; running statistics not touched);
3. dJ/dφ by the chosen hypergradient backend (:data:`BACKENDS`), averaged over processes, optional
   clipping, one ``meta_optimizer.step()``.

Every ``every``-th call is a meta step; the others are plain steps with γ from the γ-Net under no_grad.
Only φ receives gradients from J (every backend uses ``torch.autograd.grad`` w.r.t. explicit leaves).

Several processes (DDP): the real forward goes through the wrapped ``forward_model``, the lookahead and
the JVP through the unwrapped ``model``. The meta-val gradients v and the φ gradients are averaged over
ranks (``average``), so every rank applies the same meta update, which is the exact hypergradient of
the global batch: θ' uses the rank-averaged g, so dJ̄/dφ = mean_r ∂/∂φ[−η·c·v̄ᵀ g_r], v̄ = mean_r v_r.

:class:`~metacal.meta.plain_step.PlainStep` offers the same ``step(x, y) -> StepResult`` for runs without meta-learning.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Callable, Iterator, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from metacal.distributed import average_over_processes, broadcast_from_main, mean_over_processes, world_size
from metacal.objectives._inputs import check_targets
from metacal.registry import unknown_name

from .step_context import StepContext, StepResult, real_step
from .gamma_net import GammaNet
from .inner import make_inner
from .settings import BACKENDS, HORIZONS, MetaSettings
from .sgd_lookahead import unwrap_sgd
from .trajectory import TrajectoryHypergradient

def check_batch(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, name: str) -> None:
    """One-line ValueError unless ``targets`` holds one integer class index in [0, K) per row of ``inputs``,
    K = ``model.classifier.out_features`` (DDP's ``.module`` unwrapped; range unchecked without a linear head).
    Called before anything changes. Float targets are refused: the losses' ``targets.long()`` would truncate
    them silently (1.7 → class 1)."""
    head = getattr(getattr(model, "module", model), "classifier", None)
    k = head.out_features if isinstance(head, nn.Linear) else None
    n = inputs.shape[0] if isinstance(inputs, torch.Tensor) and inputs.dim() > 0 else 0
    check_targets(targets, n, k, name=f"{name} targets", rows=f"{name} inputs")


class MetaLearner:
    """Real SGD step of the backbone + one hypergradient update of the meta-parameters φ per iteration.

    Args:
        model: the classifier, unwrapped (contract: ``model(x, return_features=True)``, ``model.classifier``).
        optimizer: ``torch.optim.SGD`` over the backbone (any momentum/dampening/nesterov/weight decay), or
            a wrapper holding it in ``.optimizer`` (accelerate's); its ``step`` is called. One SGD step per call.
        objective: the meta objective on logits, e.g. ``metacal.objectives.build("sece")``.
        gamma_net: the γ-Net (φ = its parameters; FLγ-*), with ``loss`` a focal-family loss taking a
            per-sample ``gamma=`` (default focal). Or, without a γ-Net, ``loss`` =
            ``metacal.losses.build("ce_learnable_l2", weight_shape=(K, d))`` (φ = its coefficients; CE-*).
        backend: a key of :data:`BACKENDS`.
        meta_optimizer: optimiser over φ (default Adam with lr ``meta_lr``).
        meta_val: an iterator of meta-validation batches ``(x, y)``; used when ``step`` gets none.
        ce_weight: J = objective + ce_weight·CE (Bohdal et al.'s later CE + 0.5·DECE; 0 = objective only).
        every: a meta step every n-th call (1 = every call).
        max_grad_norm / max_meta_grad_norm: optional total-norm clipping of backbone / meta gradients.
        backward: for the real loss (default ``Tensor.backward``; trainer: ``accelerator.backward``).
        forward_model: the module of the real train forward (a DDP wrapper); default ``model``.
        autocast: a context for the mixed-precision forwards that ``model``'s own forward does not make itself
            (trainer: ``accelerator.autocast``; the ``higher`` backend's functional copy needs it).
        average: in-place mean over processes of a list of tensors (default:
            :func:`metacal.distributed.average_over_processes`, a no-op in one process); applied to the
            meta-val gradients v and to φ's gradients.
        horizon: a value of :data:`HORIZONS`; "trajectory" (γ-Net only) gives the γ-Net's bias the
            hypergradient through all past steps instead of the last one; ``horizon_decay`` β ∈ [0, 1]
            weights a step k iterations back by β^k (1: the whole trajectory; 0: the last step only).
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer: Any,
        objective: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
        *,
        gamma_net: GammaNet | None = None,
        loss: nn.Module | None = None,
        backend: str = "jvp",
        meta_optimizer: torch.optim.Optimizer | None = None,
        meta_lr: float = MetaSettings.lr,
        meta_val: Iterator[tuple[torch.Tensor, torch.Tensor]] | None = None,
        ce_weight: float = 0.0,
        every: int = 1,
        max_grad_norm: float | None = None,
        max_meta_grad_norm: float | None = None,
        backward: Callable[[torch.Tensor], Any] | None = None,
        forward_model: nn.Module | None = None,
        average: Callable[[list[torch.Tensor]], None] = average_over_processes,
        horizon: str = "step",
        horizon_decay: float = 1.0,
        autocast: Callable[[], Any] = nullcontext,
    ) -> None:
        if horizon not in HORIZONS:
            raise ValueError(unknown_name("meta horizon", horizon, HORIZONS))
        if horizon == "trajectory" and gamma_net is None:
            raise ValueError("horizon 'trajectory' learns the γ-Net's bias: it needs a γ-Net (gamma_net=; in a config, "
                             "learner: gamma_net)")
        if backend not in BACKENDS:
            raise ValueError(unknown_name("meta backend", backend, sorted(BACKENDS)))
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"every must be a positive int, got {every!r}")
        for label, value in (("max_grad_norm", max_grad_norm), ("max_meta_grad_norm", max_meta_grad_norm)):
            if value is not None and not value > 0:
                raise ValueError(f"{label} must be > 0 or None, got {value!r}")
        forward_model = forward_model if forward_model is not None else model
        if backend == "higher" and (world_size() > 1 or isinstance(forward_model, nn.parallel.DistributedDataParallel)):
            raise ValueError("the 'higher' backend runs in a single process only (higher cannot run under "
                             "DistributedDataParallel); use 'jvp' (the same exact hypergradient) or 'head'")
        self.backend = backend
        self.gamma_net = gamma_net
        self.inner = make_inner(gamma_net, loss)
        self.meta_parameters = [p for p in self.inner.meta_parameters() if p.requires_grad]
        broadcast_from_main([p.data for p in self.meta_parameters])  # every process starts from rank 0's φ
        self.meta_optimizer = meta_optimizer or torch.optim.Adam(self.meta_parameters, lr=meta_lr)
        self.meta_val = meta_val
        self.ce_weight = float(ce_weight)
        self.every = every
        self.max_meta_grad_norm = max_meta_grad_norm
        self.average = average
        self.iteration = 0
        self.objective = objective
        self.ctx = StepContext(
            model=model, forward_model=forward_model, sgd=unwrap_sgd(optimizer), optimizer=optimizer,
            inner=self.inner, objective=self.meta_objective,
            backward=backward if backward is not None else torch.Tensor.backward,
            max_grad_norm=max_grad_norm, average=average, autocast=autocast)
        self.trajectory = (TrajectoryHypergradient(model, gamma_net.bias, horizon_decay)
                           if horizon == "trajectory" else None)

    def meta_objective(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """J(logits, y) = objective(logits, y) + ce_weight·CE(logits, y)."""
        value = self.objective(logits, targets)
        if self.ce_weight:
            value = value + self.ce_weight * F.cross_entropy(logits, targets.long())
        return value

    def step(self, inputs: torch.Tensor, targets: torch.Tensor,
             meta_batch: tuple[torch.Tensor, torch.Tensor] | None = None) -> StepResult:
        """One iteration on the train batch and (on a meta step) ``meta_batch`` or the next ``meta_val`` batch.

        Both batches are checked first (:func:`check_batch`): a bad one raises ValueError before the model, the
        optimizers, the tangents or the iteration count change (the meta objective would see it only after the
        backbone step)."""
        is_meta = self.iteration % self.every == 0
        check_batch(self.ctx.model, inputs, targets, "train")
        if is_meta:
            if meta_batch is None:
                if self.meta_val is None:
                    raise ValueError("a meta step needs the meta-validation batch: give meta_val= or "
                                     "step(x, y, (xm, ym))")
                meta_batch = next(self.meta_val)
            if not isinstance(meta_batch, (tuple, list)) or len(meta_batch) != 2:
                size = f" of length {len(meta_batch)}" if isinstance(meta_batch, (tuple, list)) else ""
                raise ValueError(f"meta_batch must be a pair (inputs, targets), got a {type(meta_batch).__name__}{size}")
            check_batch(self.ctx.model, *meta_batch, "meta-validation")
            meta_inputs, meta_targets = (t.to(inputs.device) for t in meta_batch)
        self.iteration += 1
        self.ctx.model.train()
        before = self.trajectory.snapshot(self.ctx, inputs) if self.trajectory is not None else None
        if not is_meta:
            real = real_step(self.ctx, inputs, targets, keep_old=False, with_meta_graph=False)
            if before is not None:
                self.trajectory.advance(self.ctx, before, inputs, targets)
            return StepResult(real.loss, None, real.meta.detach() if torch.is_tensor(real.meta) else None)
        self.meta_optimizer.zero_grad(set_to_none=True)
        out = BACKENDS[self.backend](self.ctx, inputs, targets, meta_inputs, meta_targets)
        if before is not None:  # b's gradient through the whole trajectory replaces its one-step one
            self.trajectory.advance(self.ctx, before, inputs, targets)
            self.gamma_net.bias.grad = self.trajectory.hypergradient(self.ctx, meta_inputs, meta_targets)
            out.level_grad = self.trajectory.level_gradient(self.gamma_net.bias.grad.detach())
        for p in self.meta_parameters:  # every rank must take part in the same collectives
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        self.average([p.grad for p in self.meta_parameters])
        out.meta_grad_norm = torch.linalg.vector_norm(torch.cat([p.grad.reshape(-1) for p in self.meta_parameters]))
        if self.max_meta_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.meta_parameters, self.max_meta_grad_norm)
        self.meta_optimizer.step()
        if out.gamma_grad is not None:  # dJ/dδ for a global offset γ_i + δ: < 0 asks for a larger γ
            out.diagnostics["dJ_dgamma_offset"] = out.gamma_grad.detach().sum()
        out.diagnostics["meta_grad_norm"] = out.meta_grad_norm.detach().reshape(())
        if out.level_grad is not None:  # the same signal for the γ level through the whole trajectory (meta.horizon)
            out.diagnostics["dJ_dlevel"] = torch.as_tensor(out.level_grad).detach().reshape(())
        return out

    def _regrouped(self, saved: dict[str, Any]) -> dict[str, Any]:
        """A meta-optimiser state saved with ONE parameter group over φ in ``meta_parameters`` order (runs
        before ``meta.shape_lr_scale`` put the γ-Net's bias in a group of its own), re-indexed for the current
        groups: each parameter keeps its own moments; the groups' settings are the current ones."""
        groups = self.meta_optimizer.param_groups
        if len(saved["param_groups"]) == len(groups) or len(saved["param_groups"]) != 1:
            return saved
        old_index = {id(p): i for i, p in enumerate(self.meta_parameters)}
        current = [p for g in groups for p in g["params"]]
        if len(current) != len(old_index) or any(id(p) not in old_index for p in current):
            return saved  # not the known layout: let torch say what does not match
        state = {j: saved["state"][old_index[id(p)]] for j, p in enumerate(current)
                 if old_index[id(p)] in saved["state"]}
        return {"state": state, "param_groups": self.meta_optimizer.state_dict()["param_groups"]}

    def epoch_metrics(self, diagnostics: Mapping[str, torch.Tensor] | None = None) -> dict[str, float]:
        """The epoch's meta steps (``meta_steps``, counted where γ has a hypergradient) and their "raise γ?" signal,
        each a mean over the processes: ``meta_dgamma`` (mean dJ/dδ), ``raise_gamma_frac`` (the share with
        dJ/dδ < 0), ``meta_grad_norm`` (mean ‖dJ/dφ‖); with ``meta.horizon: trajectory`` also ``raise_level_frac``
        (the share of steps whose trajectory hypergradient of the γ level asks for a larger γ)."""
        diagnostics = diagnostics or {}
        device = self.meta_parameters[0].device

        def mean(value: float) -> float:
            return mean_over_processes(value, device)

        out: dict[str, float] = {}
        offsets = diagnostics.get("dJ_dgamma_offset")
        if offsets is not None and len(offsets):
            out.update(meta_steps=len(offsets), meta_dgamma=mean(float(offsets.mean())),
                       raise_gamma_frac=mean(float((offsets < 0).double().mean())),
                       meta_grad_norm=mean(float(diagnostics["meta_grad_norm"].mean())))
        level = diagnostics.get("dJ_dlevel")
        if level is not None and len(level):
            out["raise_level_frac"] = mean(float((level < 0).double().mean()))
        return out

    def per_sample_gamma(self) -> nn.Module | None:
        return self.gamma_net

    def set_read_check(self, check: Callable[[], None]) -> None:
        """Nothing is read mid-epoch."""

    def summary(self, history: list[dict[str, Any]], selected_epoch: int) -> dict[str, Any]:
        return {}

    def checkpointables(self) -> list[Any]:
        """Stateful objects for accelerate's ``register_for_checkpointing``, in a fixed order."""
        out: list[Any] = [] if self.gamma_net is None else [self.gamma_net]
        out.append(self)
        if self.meta_val is not None and hasattr(self.meta_val, "state_dict"):
            out.append(self.meta_val)
        return out

    def state_dict(self) -> dict[str, Any]:
        state = {"iteration": self.iteration, "meta_optimizer": self.meta_optimizer.state_dict()}
        if self.trajectory is not None:
            state["trajectory"] = self.trajectory.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.iteration = int(state["iteration"])
        self.meta_optimizer.load_state_dict(self._regrouped(state["meta_optimizer"]))
        if self.trajectory is not None:
            self.trajectory.load_state_dict(state.get("trajectory", {}))
