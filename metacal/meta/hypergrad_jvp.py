"""``jvp`` backend: the exact full-network one-step hypergradient without a second-order graph.

Order of work in one call (each network pass once):

1. real step (:func:`backend.real_step`): train forward through ``forward_model`` (BN running stats
   updated here, once), inner loss at γ.detach(), ``backward``, SGD ``step`` → θ'. θ is copied first.
2. meta-val forward + backward at the real θ' (unwrapped model, scratch BN buffers, train-mode batch
   statistics); ``torch.autograd.grad`` w.r.t. the parameters only → v (nothing is written to ``.grad``).
3. tangent t_p = −η_p·c_p·s·v_p; one forward-mode pass of the network at the OLD θ along t on the train
   batch (``torch.autograd.forward_ad`` dual tensors swapped into the module's slots, under no_grad,
   scratch BN buffers → same batch statistics as the real forward, running stats untouched; the RNG state
   of the real forward is replayed, so dropout masks are the real step's) → (J t)_i.
4. ∂/∂φ [Σ_i ∂L/∂z_i(z_i, γ_i(φ))·(J t)_i + ∂L/∂θ_head·t_head] (:func:`backend.contract_hypergradient`).

For the learnable-L2 loss ∂L/∂z does not depend on φ: the hypergradient is the direct term
2·θ_head·t_head and needs only v_head, so the call is delegated to the ``head`` backend, which is exact in
that case (tested against ``higher``).
"""

from __future__ import annotations

import warnings
from contextlib import nullcontext

import torch
import torch.autograd.forward_ad as fwAD

from .bn_jvp import lean_batchnorm
from .hypergrad_head import head_meta_step
from .replay import PrimalRecorder, replay_primals
from .step_context import (
    RNGState,
    StepContext,
    StepResult,
    contract_hypergradient,
    differentiable_attention,
    head_params,
    meta_val_forward,
    real_step,
)


def preload_forward_ad() -> None:
    """Import what forward-mode AD loads on its first use, without its ``torch.jit.script is deprecated``
    FutureWarning.

    Why: the first ``torch.autograd.forward_ad.make_dual`` (the ``jvp`` hypergradient backend) imports
    ``torch._decomp.decompositions_for_jvp``, whose module body calls ``torch.jit.script`` on torch's own
    decompositions; torch 2.14 warns about that deprecation once per run although no metacal code scripts
    anything. Importing the module here, under a filter for exactly that message, keeps it out of every
    run's output; every other warning (of this import too) stays visible. Idempotent (a cached import)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"`torch\.jit\.script` is deprecated", category=FutureWarning)
        import torch._decomp.decompositions_for_jvp  # noqa: F401


def parameter_grads(ctx: StepContext, objective: torch.Tensor, names: list[str]) -> dict[str, torch.Tensor]:
    """v = ∇θ' J for the named parameters (zeros where J does not depend on one), averaged over processes."""
    named = dict(ctx.model.named_parameters())
    params = [named[n] for n in names]
    grads = torch.autograd.grad(objective, params, allow_unused=True)
    out = [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)]
    ctx.average(out)
    return dict(zip(names, out))


def network_jvp(
    ctx: StepContext,
    inputs: torch.Tensor,
    primals: dict[str, torch.Tensor],
    tangents: dict[str, torch.Tensor],
    rng: RNGState | None = None,
    recorder: PrimalRecorder | None = None,
) -> torch.Tensor:
    """(J t): forward-mode derivative of the logits at θ = ``primals`` along ``tangents`` (train mode;
    with ``rng`` the real forward's random draws — dropout masks — are replayed)."""
    with torch.no_grad(), fwAD.dual_level(), (rng.replay() if rng is not None else nullcontext()), \
            differentiable_attention():
        duals = {
            n: fwAD.make_dual(p, tangents[n]) if n in tangents else p for n, p in primals.items()
        }
        with ctx.slots.swapped({**duals, **ctx.slots.scratch_buffers()}), lean_batchnorm(
            ctx.model, recorder
        ), replay_primals(recorder):
            out = ctx.model(inputs)
        tangent = fwAD.unpack_dual(out).tangent
    if tangent is None:  # the logits do not depend on any moved parameter
        return torch.zeros_like(out)
    return tangent


def jvp_meta_step(ctx: StepContext, inputs, targets, meta_inputs, meta_targets) -> StepResult:
    if not ctx.inner.logits_depend_on_meta:
        # learnable L2: φ enters only the head's update, so the head lookahead IS the exact hypergradient
        # (same numbers, without the body's meta-val backward)
        return head_meta_step(ctx, inputs, targets, meta_inputs, meta_targets)
    real = real_step(ctx, inputs, targets, keep_old=True, recorder=ctx.recorder)
    moved = [n for n, s in real.scales.items() if s != 0.0]
    objective = ctx.objective(meta_val_forward(ctx, meta_inputs), meta_targets)
    v = parameter_grads(ctx, objective, moved)
    # t_p = −η_p·c_p·s·v_p, one multi-tensor multiply (one launch per group on a GPU, not one per parameter)
    tangents = dict(zip(moved, torch._foreach_mul([v[n] for n in moved], [-real.scales[n] for n in moved])))
    logit_tangent = network_jvp(ctx, inputs, real.old_params, tangents, real.rng, ctx.recorder)
    ctx.recorder.clear()
    wn, bn = ctx.head_names
    zero = lambda n: tangents[n] if n in tangents else torch.zeros_like(real.old_params[n])  # noqa: E731
    head_tangent = (zero(wn), zero(bn) if bn is not None else None)
    gamma_grad = contract_hypergradient(
        ctx, real, targets, logit_tangent, head_tangent, head_params(ctx, real.old_params)
    )
    gamma = real.meta.detach() if torch.is_tensor(real.meta) else None
    return StepResult(real.loss, objective.detach(), gamma, gamma_grad)
