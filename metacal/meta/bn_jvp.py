"""A leaner forward-mode rule for train-mode BatchNorm, used only inside the ``jvp`` backend's JVP pass.

torch's generic forward-AD formula for ``native_batch_norm`` runs ~15 unfused elementwise/reduction passes
over the activation; here the tangent takes one fused kernel and three elementwise passes. With x̂ = (x − μ)·σ⁻¹ (batch
statistics per channel, biased variance, as train-mode BN) and y = w·x̂ + b, the tangent is::

    ẏ = w·σ⁻¹·(ẋ − mean(ẋ) − x̂·mean(ẋ·x̂)) + ẇ·x̂ + ḃ

(means over every dim but the channel dim). The ẋ part is a symmetric linear map of ẋ (BN's input
Jacobian in train mode is symmetric per channel), so it equals BN's input VJP applied to ẋ, computed by
the fused ``native_batch_norm_backward`` kernel; ẇ·x̂ + ḃ = (ẇ·σ⁻¹)·x + (ḃ − ẇ·σ⁻¹·μ) is a per-channel
scale and shift of x with the saved batch statistics. The primal is ``native_batch_norm`` in training mode WITHOUT running
statistics, so the JVP pass never updates running statistics; when the recorder of the real forward
(:class:`metacal.meta.replay.PrimalRecorder`) holds this call's batch statistics, the primal applies them
instead (eval-mode kernel with running variance σ⁻², eps 0: one elementwise pass, where the train-mode
CPU kernel also reduces over the batch). Exactness is covered by the jvp-vs-higher tests on BN networks
(float64, 1e-8).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch
from torch import nn

from .replay import PLAIN_BATCHNORM, PrimalRecorder


def _channel_view(t: torch.Tensor, ndim: int) -> torch.Tensor:
    return t.reshape((1, -1) + (1,) * (ndim - 2))


class _TrainBatchNorm(torch.autograd.Function):
    """y = BN_train(x; w, b) with batch statistics, and the tangent rule above (forward mode only)."""

    @staticmethod
    def forward(ctx, x, weight, bias, eps, stats):
        ctx.set_materialize_grads(False)  # a frozen weight's or bias's tangent arrives as None: no pass over zeros
        if stats is None:
            out, mean, invstd = torch.native_batch_norm(x, weight, bias, None, None, True, 0.0, eps)
        else:  # the real forward's batch statistics of this very input
            mean, invstd = stats
            out = torch.native_batch_norm(x, weight, bias, mean, invstd.pow(-2), False, 0.0, 0.0)[0]
        ctx.save_for_forward(x, weight, mean, invstd)
        ctx.eps = eps
        return out

    @staticmethod
    def jvp(ctx, x_t, weight_t, bias_t, _eps_t, _stats_t):
        x, weight, mean, invstd = ctx.saved_tensors
        out = None
        if x_t is not None:  # a·(ẋ − mean(ẋ) − x̂·mean(ẋ·x̂)): BN's input-Jacobian is symmetric → its VJP kernel
            out = torch.ops.aten.native_batch_norm_backward(
                x_t, x, weight, None, None, mean, invstd, True, ctx.eps, [True, False, False]
            )[0]
        if weight_t is not None or bias_t is not None:
            # ẇ·x̂ + ḃ = (ẇ·σ⁻¹)·x + (ḃ − ẇ·σ⁻¹·μ): one per-channel scale and shift of x (saved statistics)
            view = lambda t: _channel_view(t, x.dim())  # noqa: E731
            shift = view(bias_t) if bias_t is not None else torch.zeros_like(view(mean))
            if weight_t is not None:
                scale = view(weight_t * invstd)
                shift = shift - scale * view(mean)
                affine = x * scale
                out = affine if out is None else out.add_(affine)
            out = out.add_(shift) if out is not None else (shift + torch.zeros_like(x))
        return out if out is not None else torch.zeros_like(x)


def _lean_forward(module: nn.modules.batchnorm._BatchNorm, recorder: PrimalRecorder | None):
    def forward(x: torch.Tensor) -> torch.Tensor:
        module._check_input_dim(x)
        stats = recorder.pop_batch_stats(module, x) if recorder is not None else None
        return _TrainBatchNorm.apply(x, module.weight, module.bias, module.eps, stats)

    return forward


@contextmanager
def lean_batchnorm(model: nn.Module, recorder: PrimalRecorder | None = None) -> Iterator[None]:
    """Within the block, every plain BatchNorm{1,2,3}d in training mode uses :class:`_TrainBatchNorm`
    (batch statistics — the real forward's from ``recorder`` where they apply —, running statistics
    untouched). Other normalisation layers are left as they are."""
    patched = []
    try:
        for module in model.modules():
            if type(module) in PLAIN_BATCHNORM and module.training:
                module.forward = _lean_forward(module, recorder)
                patched.append(module)
        yield
    finally:
        for module in patched:
            del module.forward
