"""A leaner forward-mode rule for train-mode BatchNorm, used only inside the ``jvp`` backend's JVP pass.

torch's generic forward-AD formula for ``native_batch_norm`` runs ~15 unfused elementwise/reduction passes
over the activation; here the tangent takes two kernels and one add. With x̂ = (x − μ)·σ⁻¹ (per channel, the
batch mean μ and σ = √(biased batch variance + eps), as train-mode BN) and y = w·x̂ + b, the tangent is::

    ẏ = w·σ⁻¹·(ẋ − mean(ẋ) − x̂·mean(ẋ·x̂)) + ẇ·x̂ + ḃ

(means over every dim but the channel dim). The ẋ part is a symmetric linear map of ẋ (BN's input
Jacobian in train mode is symmetric per channel), so it equals BN's input VJP applied to ẋ, computed by
the fused ``native_batch_norm_backward`` kernel. ẇ·x̂ + ḃ is eval-mode BatchNorm of x with weight ẇ, bias ḃ,
running mean μ and running variance σ² (eps 0): one elementwise kernel, where the per-channel scale and shift
written out take six small ones (fewer launches on a GPU, the same arithmetic).

The primal is ``native_batch_norm`` in training mode WITHOUT running statistics, so the JVP pass never
updates running statistics; when the recorder of the real forward (:class:`metacal.meta.replay.PrimalRecorder`)
holds this call's batch statistics, the primal applies them instead (the eval-mode kernel with μ and σ²,
eps 0: one elementwise pass, where the train-mode CPU kernel also reduces over the batch). Exactness is
covered by the jvp-vs-higher tests on BN networks (float64, 1e-8).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch
from torch import nn

from .replay import PLAIN_BATCHNORM, PrimalRecorder


class _TrainBatchNorm(torch.autograd.Function):
    """y = BN_train(x; w, b) with batch statistics, and the tangent rule above (forward mode only)."""

    @staticmethod
    def forward(ctx, x, weight, bias, eps, stats):
        ctx.set_materialize_grads(False)  # a frozen weight's or bias's tangent arrives as None: no pass over zeros
        if stats is None:
            out, mean, invstd = torch.native_batch_norm(x, weight, bias, None, None, True, 0.0, eps)
            var = invstd.pow(-2)  # σ², for the eval-mode kernel of the tangent
        else:  # the real forward's batch statistics of this very input
            mean, invstd = stats
            var = invstd.pow(-2)
            out = torch.native_batch_norm(x, weight, bias, mean, var, False, 0.0, 0.0)[0]
        ctx.save_for_forward(x, weight, mean, invstd, var)
        ctx.eps = eps
        return out

    @staticmethod
    def jvp(ctx, x_t, weight_t, bias_t, _eps_t, _stats_t):
        x, weight, mean, invstd, var = ctx.saved_tensors
        out = None
        if x_t is not None:  # w·σ⁻¹·(ẋ − mean(ẋ) − x̂·mean(ẋ·x̂)): the input Jacobian is symmetric → VJP kernel
            out = torch.ops.aten.native_batch_norm_backward(
                x_t, x, weight, None, None, mean, invstd, True, ctx.eps, [True, False, False]
            )[0]
        if weight_t is not None or bias_t is not None:
            if weight_t is None:  # ḃ alone: eval-mode BN needs a weight (x̂·0 + ḃ)
                weight_t = torch.zeros_like(bias_t)
            # ẇ·x̂ + ḃ, x̂ = (x − μ)·σ⁻¹ with the saved batch statistics: one eval-mode BN kernel
            affine = torch.native_batch_norm(x, weight_t, bias_t, mean, var, False, 0.0, 0.0)[0]
            out = affine if out is None else out.add_(affine)
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
