"""``higher`` backend: the reference full-network one-step lookahead with ``higher.innerloop_ctx``.

Decision — the fast weights ARE the real update (the step is computed once, differentiably):

1. ``innerloop_ctx(model, optimizer, copy_initial_weights=False)``; its DifferentiableSGD copies the
   optimizer's momentum state and param groups (lr, momentum, dampening, nesterov, weight decay).
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
#99); with a DDP ``forward_model`` this backend refuses — use ``jvp`` (same hypergradient) or ``head``.
"""

from __future__ import annotations

import torch

from .backend import BACKENDS, StepContext, StepOutput
from .sgd_lookahead import clip_factor


def _refuse_distributed(ctx: StepContext) -> None:
    if isinstance(ctx.forward_model, torch.nn.parallel.DistributedDataParallel) or (
        torch.distributed.is_available()
        and torch.distributed.is_initialized()
        and torch.distributed.get_world_size() > 1
    ):
        raise ValueError(
            "the 'higher' meta backend cannot run under DistributedDataParallel (higher does not support "
            "it); use backend='jvp' (same exact hypergradient) or 'head'"
        )


@BACKENDS.register("higher")
def higher_meta_step(ctx: StepContext, inputs, targets, meta_inputs, meta_targets) -> StepOutput:
    import higher  # imported lazily: the other backends do not need it

    _refuse_distributed(ctx)
    model, optimizer = ctx.model, ctx.sgd
    ctx.optimizer.zero_grad(set_to_none=True)
    params = list(model.parameters())
    names = [n for n, _ in model.named_parameters()]
    wi = names.index(ctx.head_names[0])
    bi = names.index(ctx.head_names[1]) if ctx.head_names[1] is not None else None
    clip = (lambda grads: _clip(grads, ctx.max_grad_norm)) if ctx.max_grad_norm is not None else None
    with higher.innerloop_ctx(
        model, optimizer, copy_initial_weights=False, track_higher_grads=True
    ) as (fmodel, diffopt):
        logits, features = fmodel(inputs, return_features=True)
        with torch.no_grad():
            patched = dict(fmodel.named_buffers())
            for name, buf in model.named_buffers():
                buf.copy_(patched[name])
        meta = ctx.inner.meta_inputs(features)
        fast = fmodel.fast_params
        loss = ctx.inner.total(logits, targets, fast[wi], fast[bi] if bi is not None else None, meta)
        new_params = diffopt.step(loss, grad_callback=clip)
        with torch.no_grad():
            for p, q in zip(params, new_params):
                p.copy_(q)
        _write_momentum(optimizer, diffopt)
        objective = ctx.objective(fmodel(meta_inputs), meta_targets)
        meta_params = [p for p in ctx.inner.meta_parameters() if p.requires_grad]
        hyper = torch.autograd.grad(objective, meta_params, allow_unused=True)
    for p, g in zip(meta_params, hyper):
        if g is not None:
            p.grad = g.detach() if p.grad is None else p.grad + g.detach()
    gamma = meta.detach() if torch.is_tensor(meta) else None
    return StepOutput(loss.detach(), objective.detach(), gamma, logits.detach())


def _clip(grads, max_norm):
    s = clip_factor(list(grads), max_norm)
    return [None if g is None else g * s for g in grads]


def _write_momentum(optimizer: torch.optim.SGD, diffopt) -> None:
    """Copy DifferentiableSGD's new momentum buffers into the real optimizer's state."""
    for gi, group in enumerate(optimizer.param_groups):
        for pi, p in enumerate(group["params"]):
            buf = diffopt.state[gi][pi].get("momentum_buffer") if pi in diffopt.state[gi] else None
            if buf is not None:
                optimizer.state[p]["momentum_buffer"] = buf.detach().clone()
