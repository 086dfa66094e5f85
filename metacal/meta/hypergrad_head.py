"""``head`` backend: one-step lookahead through the classifier head only (Bohdal et al.'s choice).

The body is held fixed for the hypergradient: θ_head' = SGD-step of the head (same optimizer settings,
momentum state and clip factor as the real step), everything else treated as constant.

Decision — meta-val features come from the UPDATED body: the meta objective is evaluated at the real θ'
(body' and head'), exactly the network the real step produced, and only the head path to φ is
differentiated. So, with f_i the train features at the old body (the head's inputs in the real forward)
and f^m_j = body'(x^m_j) the meta-val features (constants, computed under no_grad with scratch BN buffers):

    J(θ_head') = objective(f^m θ_W'ᵀ + θ_b', y^m),   v = ∇_{θ_head'} J,   t = −η·c·s·v
    dJ/dφ ≈ ∂/∂φ [Σ_i ∂L/∂z_i(z_i, γ_i(φ))·(f_i t_Wᵀ + t_b) + ∂L/∂θ_head·t_head]

i.e. the full-network formula with the Jacobian of the head alone (J_head t)_i = f_i t_Wᵀ + t_b.
The test compares it with ``higher`` run over a module that holds only the head, fed the same f and f^m.
Cost over a plain focal step: one no-grad meta-val forward and O(N·K·d) head algebra.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .step_context import (
    StepContext,
    StepResult,
    contract_hypergradient,
    meta_val_forward,
    real_step,
)


def head_meta_step(ctx: StepContext, inputs, targets, meta_inputs, meta_targets) -> StepResult:
    wn, bn = ctx.head_names
    named = dict(ctx.model.named_parameters())
    old_w = named[wn].detach().clone()
    old_b = named[bn].detach().clone() if bn is not None else None
    real = real_step(ctx, inputs, targets, keep_old=False)
    with torch.no_grad():
        _, meta_features = meta_val_forward(ctx, meta_inputs, return_features=True)
    w_new = named[wn].detach().requires_grad_(True)
    b_new = named[bn].detach().requires_grad_(True) if bn is not None else None
    leaves = [w_new] + ([b_new] if b_new is not None else [])
    with torch.enable_grad():
        objective = ctx.objective(F.linear(meta_features, w_new, b_new), meta_targets)
        grads = list(torch.autograd.grad(objective, leaves))
    ctx.average(grads)
    tw = grads[0].mul(-real.scales[wn])
    tb = grads[1].mul(-real.scales[bn]) if b_new is not None else None
    logit_tangent = None
    if ctx.inner.logits_depend_on_meta:
        logit_tangent = real.features.to(tw.dtype) @ tw.t()
        if tb is not None:
            logit_tangent = logit_tangent + tb
    gamma_grad = contract_hypergradient(ctx, real, targets, logit_tangent, (tw, tb), (old_w, old_b))
    gamma = real.meta.detach() if torch.is_tensor(real.meta) else None
    return StepResult(real.loss, objective.detach(), gamma, gamma_grad)
