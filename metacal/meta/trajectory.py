"""Long-horizon hypergradient of the γ level: forward-mode accumulation of dθ/db along the whole training
trajectory for the γ-Net's bias b (real-time hyperparameter optimisation, "RTHO", Franceschi et al. 2017,
"Forward and Reverse Gradient-Based Hyperparameter Optimization", §3; docs/conventions.md#trajectory).

Why (docs/ablations/meta_signal.md): the one-step hypergradient dJ(θ_{t+1})/dφ sees only the
effect of γ on the last SGD step. After the first epoch that effect is tiny and noisy, Adam normalises the
noise into a random walk of γ, and the γ level a fixed-γ grid finds (≈ 2–3 where CE is over-confident) is
never reached. The level is what matters most, and it acts through every past step; b sets it
(γ_i = map((x̃_i W + b)/τ)), so b gets the hypergradient through the whole trajectory while A and W keep
the one-step hypergradient.

Tangents Z_t = dθ_t/db and V_t = d buf_t/db (SGD's momentum buffer), holding b fixed along the
trajectory (RTHO's approximation). Per parameter, with torch.optim.SGD's update (momentum μ, dampening τ,
nesterov, weight decay wd, learning rate η; clip factor s a constant, as in the one-step backends)::

    D_t     = s·(H_t Z_t + ∂g_t/∂b) + wd·Z_t      with  H_t Z_t + ∂g_t/∂b = ∇θ[ g_t·Z_t + ∂L_t/∂b ]
    V_{t+1} = D_t  (no buffer before the step: buf = clone(d))   |   μ·V_t + (1 − τ)·D_t  (buffer present)
    P_t     = V_{t+1}  (momentum)    |   D_t + μ·V_{t+1}  (nesterov)   |   D_t  (μ = 0)
    Z_{t+1} = Z_t − η·P_t

Which branch of V applies is read from the optimizer's state BEFORE the real step (:meth:`snapshot`): a run
that trained plain steps first already holds buffers, and V_t = 0 there (the old buffer does not depend on
b), so the first tangent is (1 − τ)·D_t, not D_t. A trainable parameter the optimizer does not hold is never
moved: Z = 0 for it (it still counts in the clipping norm, as in ``clip_grad_norm_(model.parameters())``).

With ``decay`` β < 1, Z and V are multiplied by β before each step: the influence of b on a step k
iterations back is weighted β^k (a truncated horizon of ≈ 1/(1 − β) steps); β = 0 is exactly the one-step
hypergradient of b, β = 1 (default) the whole trajectory.

g_t = ∇θ L(θ_t, b) on the step's train batch at the old θ_t (train-mode batch statistics, the real
forward's dropout masks replayed): one extra forward and one double backward per iteration, no Hessian
stored. At a meta step dJ/db = ∇θ J(θ_{t+1})·Z_{t+1} on the meta-validation batch; it replaces b's
one-step gradient (it contains it: the last step's ∂g_t/∂b term). Exactness is tested against
differentiating K unrolled SGD steps and against finite differences (tests/meta/test_trajectory.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from .step_context import RNGState, StepContext, differentiable_attention, meta_val_forward
from .sgd_lookahead import clip_factor


@dataclass
class Snapshot:
    """θ, the RNG state and the optimizer's view of each parameter before the real step (what
    :meth:`TrajectoryHypergradient.advance` replays and differentiates)."""

    params: dict[str, torch.Tensor]
    rng: RNGState
    groups: dict[str, dict[str, Any]]  # the SGD param group of every parameter the optimizer holds
    had_buffer: dict[str, bool]  # whether its momentum buffer existed before the step


class TrajectoryHypergradient:
    """Forward-mode tangents Z = dθ/db, V = d buf/db of one scalar meta-parameter b, advanced every
    iteration; ``hypergradient`` gives dJ/db at the current θ."""

    def __init__(self, model: nn.Module, parameter: nn.Parameter, decay: float = 1.0) -> None:
        if parameter.numel() != 1:
            raise ValueError("the trajectory hypergradient is for one scalar meta-parameter (the γ-Net's bias)")
        if not 0.0 <= decay <= 1.0:
            raise ValueError(f"horizon decay must be in [0, 1], got {decay!r}")
        self.parameter = parameter
        self.decay = float(decay)
        self.names = [n for n, p in model.named_parameters() if p.requires_grad]
        self.z: dict[str, torch.Tensor] = {}
        self.v: dict[str, torch.Tensor] = {}
        self.dgamma_db = torch.ones(())  # mean_i ∂γ_i/∂b on the last train batch (sign: does b raise γ?)

    def snapshot(self, ctx: StepContext, inputs: torch.Tensor) -> Snapshot:
        """Call BEFORE the real step: θ_t, the RNG state, and per parameter its SGD group (parameters the
        optimizer does not hold are left out: their tangent stays 0) and whether it had a momentum buffer."""
        named = dict(ctx.model.named_parameters())
        group_of = {id(p): g for g in ctx.sgd.param_groups for p in g["params"]}
        groups = {n: group_of[id(named[n])] for n in self.names if id(named[n]) in group_of}
        state = ctx.sgd.state  # .get: reading must not add empty entries to the optimizer's state
        had_buffer = {n: state.get(named[n], {}).get("momentum_buffer") is not None for n in groups}
        return Snapshot({n: named[n].detach().clone() for n in self.names}, RNGState(inputs.device),
                        groups, had_buffer)

    def advance(self, ctx: StepContext, before: Snapshot, inputs: torch.Tensor, targets: torch.Tensor) -> None:
        """Z_t, V_t → Z_{t+1}, V_{t+1} for the SGD step just taken from ``before`` (both first × ``decay``)."""
        if self.decay != 1.0:
            for tangent in (*self.z.values(), *self.v.values()):
                tangent.mul_(self.decay)
        leaves = {n: t.requires_grad_(True) for n, t in before.params.items()}
        params = [leaves[n] for n in self.names]
        with torch.enable_grad(), before.rng.replay(), ctx.slots.swapped({**leaves, **ctx.slots.scratch_buffers()}), \
                differentiable_attention():
            logits, features = ctx.model(inputs, return_features=True)
            gamma = ctx.inner.meta_inputs(features)
            self.dgamma_db = torch.autograd.grad(gamma.mean(), self.parameter, retain_graph=True)[0].detach()
            loss = ctx.inner.total(logits, targets, None, None, gamma)
            *grads, dloss_db = torch.autograd.grad(loss, params + [self.parameter], create_graph=True,
                                                   allow_unused=True)
            used = [i for i, g in enumerate(grads) if g is not None]
            scalar = sum((grads[i] * self.z[self.names[i]]).sum() for i in used if self.names[i] in self.z)
            if dloss_db is not None:
                scalar = scalar + dloss_db.sum()
            if not torch.is_tensor(scalar) or not scalar.requires_grad:  # b does not reach the loss
                second = [None] * len(params)
            else:
                second = torch.autograd.grad(scalar, params, allow_unused=True)
        s = clip_factor([grads[i].detach() for i in used], ctx.max_grad_norm)
        directions = [
            second[i].detach() if second[i] is not None else torch.zeros_like(params[i]) for i in used
        ]
        ctx.average(directions)  # the real update uses the process-averaged gradient
        for i, d in zip(used, directions):
            name = self.names[i]
            group = before.groups.get(name)
            if group is None:  # not held by the optimizer: not moved, Z stays 0
                continue
            z = self.z.get(name)
            d = s * d if z is None else s * d + float(group["weight_decay"]) * z
            momentum, step_dir = float(group["momentum"]), d
            if momentum != 0:
                v = self.v.get(name)
                if not before.had_buffer[name]:  # torch: buf = clone(d), no dampening
                    v = d
                elif v is None:  # buffer from steps before the tangent started: V_t = 0
                    v = (1.0 - float(group["dampening"])) * d
                else:
                    v = momentum * v + (1.0 - float(group["dampening"])) * d
                self.v[name] = v
                step_dir = d + momentum * v if group["nesterov"] else v
            update = -float(group["lr"]) * step_dir
            self.z[name] = update if z is None else z + update

    def level_gradient(self, db: torch.Tensor) -> torch.Tensor:
        """dJ/db per unit of the batch's mean γ, dJ/db ÷ mean_i ∂γ_i/∂b: negative asks for a larger γ whatever
        the sign of ∂γ/∂b (with the |·| map, b < 0 raises γ as b decreases)."""
        return db / self.dgamma_db if self.dgamma_db != 0 else torch.zeros_like(db)

    def hypergradient(self, ctx: StepContext, meta_inputs: torch.Tensor, meta_targets: torch.Tensor) -> torch.Tensor:
        """dJ/db = ∇θ J(θ)·Z at the current θ on the meta-validation batch (v averaged over processes)."""
        named = dict(ctx.model.named_parameters())
        names = [n for n in self.names if n in self.z]
        with torch.enable_grad():
            objective = ctx.objective(meta_val_forward(ctx, meta_inputs), meta_targets)
            grads = torch.autograd.grad(objective, [named[n] for n in names], allow_unused=True)
        v = [torch.zeros_like(named[n]) if g is None else g for n, g in zip(names, grads)]
        ctx.average(v)
        total = sum(((g * self.z[n]).sum() for g, n in zip(v, names)), torch.zeros((), dtype=self.parameter.dtype))
        return total.to(self.parameter.dtype).reshape(self.parameter.shape)

    def state_dict(self) -> dict[str, Any]:
        return {"z": dict(self.z), "v": dict(self.v)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.z, self.v = dict(state.get("z", {})), dict(state.get("v", {}))
