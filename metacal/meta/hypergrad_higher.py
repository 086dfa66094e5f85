"""``higher`` backend: the reference full-network one-step lookahead with ``higher.innerloop_ctx``.

Decision — the fast weights ARE the real update (the step is computed once, differentiably):

1. ``higher.monkeypatch(model, copy_initial_weights=False)`` and ``higher.optim.get_diff_optim`` (what
   ``innerloop_ctx`` does); the DifferentiableSGD copies the optimizer's momentum state and param groups (lr,
   momentum, dampening, nesterov, weight decay). A forward set on the model *instance* — accelerate's
   mixed-precision wrapper is one — is hidden while the functional copy is made: higher copies instance
   attributes, so the copy would run that wrapper, which is bound to the real module and its weights, and no
   fast weight would reach the loss. The copy's forwards run under ``ctx.autocast()`` instead, outputs in
   float32 as accelerate's wrapper returns them
   (its ``convert_to_fp32``: half-precision outputs only; float64 stays float64).
2. Train forward through the patched model (it holds its own clones of the BN buffers); their updated
   running statistics are written back to the real module right after this forward — the iteration's
   one and only running-stat update. The meta-val forward below then only touches the patched copies.
3. ``diffopt.step(L)`` (gradients with ``create_graph=True``; clipping via ``grad_callback`` with the clip
   factor as a constant, as in the other backends) → fast weights θ'(φ).
4. The real step: θ' values are copied into the model's parameters and the new momentum buffers into
   ``optimizer.state`` (so the next real/meta step continues exactly as ``optimizer.step()`` would have).
   ``optimizer.step()`` is not called; ``backward``/``forward_model`` are not used.
5. J(θ') on the meta-val batch through the patched model; ``torch.autograd.grad`` w.r.t. φ only, so no
   backbone parameter receives a ``.grad``.

Single-process only: higher cannot run under DistributedDataParallel (facebookresearch/higher #24, #98,
#99); :class:`metacal.meta.MetaLearner` refuses it with several processes — ``jvp`` gives the same
hypergradient.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch
from accelerate.utils import convert_to_fp32
from torch import nn

from .step_context import StepContext, StepResult, accumulate_grads, differentiable_attention
from .sgd_lookahead import clip_factor


def higher_meta_step(ctx: StepContext, inputs, targets, meta_inputs, meta_targets) -> StepResult:
    """One iteration with the full-network lookahead unrolled by higher (single process)."""
    import higher  # imported lazily: the other backends do not need it

    model, sgd = ctx.model, ctx.sgd
    ctx.optimizer.zero_grad(set_to_none=True)
    names = [n for n, _ in model.named_parameters()]
    head = [names.index(n) if n is not None else None for n in ctx.head_names]
    clip = (lambda grads: _clip(grads, ctx.max_grad_norm)) if ctx.max_grad_norm is not None else None
    with _class_forward(model):
        fmodel = higher.monkeypatch(model, copy_initial_weights=False)
    diffopt = higher.optim.get_diff_optim(sgd, model.parameters(), fmodel=fmodel)
    with differentiable_attention():
        # (1) train forward through the functional copy; its BN running statistics are the real ones
        with ctx.autocast():
            logits, features = convert_to_fp32(fmodel(inputs, return_features=True))
        with torch.no_grad():
            patched = dict(fmodel.named_buffers())
            for name, buf in model.named_buffers():
                buf.copy_(patched[name])
        # (2) inner loss at γ(φ) (or the L2 penalty with coefficients φ on the fast head weights)
        meta = ctx.inner.meta_inputs(features)
        w, b = (fmodel.fast_params[i] if i is not None else None for i in head)
        loss = ctx.inner.total(logits, targets, w, b, meta)
        # (3) differentiable SGD step: θ'(φ), with the graph back to φ
        fast = diffopt.step(loss, grad_callback=clip)
        # (4) this IS the real step: copy θ' and the new momentum buffers into the model and its optimizer
        with torch.no_grad():
            for p, q in zip(model.parameters(), fast):
                p.copy_(q)
        _write_momentum(sgd, diffopt)
        # (5) meta objective at θ' on the meta-val batch, differentiated w.r.t. φ only (and γ, a diagnostic)
        with ctx.autocast():
            meta_logits = convert_to_fp32(fmodel(meta_inputs))
        objective = ctx.objective(meta_logits, meta_targets)
        meta_params = [p for p in ctx.inner.meta_parameters() if p.requires_grad]
        with_gamma = torch.is_tensor(meta) and meta.requires_grad
        hyper = torch.autograd.grad(objective, meta_params + ([meta] if with_gamma else []), allow_unused=True)
    accumulate_grads(meta_params, hyper[:len(meta_params)])
    gamma = meta.detach() if torch.is_tensor(meta) else None
    return StepResult(loss.detach(), objective.detach(), gamma, hyper[-1].detach() if with_gamma else None)


@contextmanager
def _class_forward(model: nn.Module) -> Iterator[None]:
    """Within: ``model.forward`` is its class's (an instance-level forward, e.g. accelerate's autocast
    wrapper, is set aside and put back on exit)."""
    wrapper = model.__dict__.pop("forward", None)
    try:
        yield
    finally:
        if wrapper is not None:
            model.forward = wrapper


def _clip(grads, max_norm):
    s = clip_factor(list(grads), max_norm)
    return [None if g is None else g * s for g in grads]


def _write_momentum(optimizer: torch.optim.SGD, diffopt) -> None:
    """Copy DifferentiableSGD's new momentum buffers into the real optimizer's state: into the buffers it holds
    (in place, as ``optimizer.step()`` updates them, so that a CUDA graph replaying the step writes where the
    next step reads), or as new ones at the first step."""
    for gi, group in enumerate(optimizer.param_groups):
        for pi, p in enumerate(group["params"]):
            buf = diffopt.state[gi][pi].get("momentum_buffer") if pi in diffopt.state[gi] else None
            if buf is None:
                continue
            held = optimizer.state[p].get("momentum_buffer")
            if torch.is_tensor(held) and held.shape == buf.shape:
                held.copy_(buf.detach())
            else:
                optimizer.state[p]["momentum_buffer"] = buf.detach().clone()
