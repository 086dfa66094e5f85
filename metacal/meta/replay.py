"""Reuse the real forward's convolution/linear outputs as the primal values of the ``jvp`` backend's JVP pass.

The JVP runs at the OLD θ on the train batch — the very computation the real forward just did. Forward-mode
AD would recompute every primal convolution next to the two tangent ones (ż = conv(ẋ, W) + conv(x, Ẇ) + ḃ);
recording the outputs of ``nn.Conv{1,2,3}d`` / ``nn.Linear`` modules during the real forward (forward hooks,
references, no copies) lets the JVP pass skip those primal convolutions (3 → 2 convolutions per layer,
2 → 1 for the first layer, whose input has no tangent: the rule gets None for it, not a tensor of zeros, so the
pass computes exactly 2F − f₁ for forward FLOPs F and first-layer FLOPs f₁;
tests/experiments/benchmark/test_flops.py).

Safety: a recorded output is used only if it has not been modified in place since (its version counter is
unchanged) and the input's shape and dtype match (an autocast real forward records low-precision outputs); otherwise, or when a module was not recorded (e.g. a compiled forward),
the module computes its primal normally. The RNG state of the real forward is replayed by the caller, so
upstream primal values (dropout masks included) are those of the real forward.

Train-mode BatchNorm: the JVP pass needs the batch statistics of each BatchNorm's input, and that input
is a replayed convolution output, i.e. the very tensor the real forward normalised. The recorder keeps the
mean and inverse std the real forward's ``native_batch_norm`` saved for its backward (CPU autograd node
``NativeBatchNormBackward0``); :meth:`PrimalRecorder.pop_batch_stats` hands them out only when the JVP
pass's input is that tensor (same storage, shape, strides, dtype, and unmodified), so they are exactly
what recomputing would give. Elsewhere (e.g. cuDNN's node on GPU) BatchNorm recomputes them.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F
from torch import nn

_REPLAYABLE = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear)
PLAIN_BATCHNORM = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
# (input, its version, mean, inverse std) of one train-mode BatchNorm call
BatchStats = tuple[torch.Tensor, int, torch.Tensor, torch.Tensor]


def _kernel(module: nn.Module) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None], torch.Tensor]:
    if isinstance(module, nn.Linear):
        return F.linear
    return module._conv_forward


class PrimalRecorder:
    """Forward hooks that keep (output, version) of each plain conv/linear module and the batch statistics of
    each plain train-mode BatchNorm, in call order."""

    def __init__(self, model: nn.Module) -> None:
        self.modules = [m for m in model.modules() if type(m) in _REPLAYABLE]
        self.norms = [m for m in model.modules() if type(m) in PLAIN_BATCHNORM]
        self.records: dict[nn.Module, list[tuple[torch.Tensor, int, torch.Size]]] = {}
        self.batch_stats: dict[nn.Module, list[BatchStats]] = {}

    @contextmanager
    def recording(self) -> Iterator["PrimalRecorder"]:
        self.records = {m: [] for m in self.modules}
        self.batch_stats = {m: [] for m in self.norms}

        def hook(module, args, output):
            if torch.is_tensor(output) and args and torch.is_tensor(args[0]):
                self.records[module].append((output.detach(), output._version, args[0].shape))

        def norm_hook(module, args, output):
            node = getattr(output, "grad_fn", None)
            if type(node).__name__ == "NativeBatchNormBackward0" and node._saved_training and args:
                x = args[0].detach()
                self.batch_stats[module].append((x, x._version, node._saved_result1, node._saved_result2))

        handles = [m.register_forward_hook(hook) for m in self.modules]
        handles += [m.register_forward_hook(norm_hook) for m in self.norms]
        try:
            yield self
        finally:
            for h in handles:
                h.remove()

    def pop_batch_stats(self, module: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(mean, inverse std) the real forward computed for this call of ``module`` if ``x`` (or its primal)
        is the tensor it normalised, unmodified; else None (recompute)."""
        queue = self.batch_stats.get(module)
        if not queue:
            return None
        recorded, version, mean, invstd = queue.pop(0)
        primal = fwAD.unpack_dual(x).primal
        same = (
            recorded._version == version
            and primal.data_ptr() == recorded.data_ptr()
            and primal.shape == recorded.shape
            and primal.stride() == recorded.stride()
            and primal.dtype == recorded.dtype
        )
        return (mean, invstd) if same else None

    def clear(self) -> None:
        self.records = {}
        self.batch_stats = {}


class _ReplayLinearOp(torch.autograd.Function):
    """Primal = the recorded output; tangent = K(ẋ, W) + K(x, Ẇ, ḃ) for the layer's kernel K."""

    @staticmethod
    def forward(ctx, x, weight, bias, box):
        recorded, kernel = box
        ctx.set_materialize_grads(False)  # an input without a tangent arrives as None, not as zeros to convolve
        ctx.save_for_forward(x, weight)
        ctx.kernel, ctx.out_shape = kernel, recorded.shape
        return recorded.detach()

    @staticmethod
    def jvp(ctx, x_t, weight_t, bias_t, _box_t):
        x, weight = ctx.saved_tensors
        out = ctx.kernel(x_t, weight, None) if x_t is not None else None
        if weight_t is None and bias_t is not None:
            weight_t = torch.zeros_like(weight)
        if weight_t is not None:
            term = ctx.kernel(x, weight_t, bias_t)
            out = term if out is None else out.add_(term)
        return out if out is not None else x.new_zeros(ctx.out_shape)


@contextmanager
def replay_primals(recorder: PrimalRecorder | None) -> Iterator[None]:
    """Within the block, recorded conv/linear modules return their recorded outputs as primal values."""
    if recorder is None or not recorder.records:
        yield
        return
    patched = []
    try:
        for module, queue in recorder.records.items():
            if not queue:
                continue
            module.forward = _replaying_forward(module, list(queue))
            patched.append(module)
        yield
    finally:
        for module in patched:
            del module.forward


def _replaying_forward(module: nn.Module, queue: list[tuple[torch.Tensor, int, torch.Size]]):
    original = type(module).forward.__get__(module)
    kernel = _kernel(module)

    def forward(x: torch.Tensor) -> torch.Tensor:
        if queue:
            recorded, version, in_shape = queue.pop(0)
            if recorded._version == version and x.shape == in_shape and recorded.dtype == x.dtype:
                return _ReplayLinearOp.apply(x, module.weight, module.bias, (recorded, kernel))
        return original(x)

    return forward
