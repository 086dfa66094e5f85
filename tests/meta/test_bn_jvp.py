"""The JVP pass's train-mode BatchNorm rule against torch's own forward-mode AD of ``F.batch_norm``."""

import itertools

import pytest
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from metacal.meta.bn_jvp import _TrainBatchNorm, lean_batchnorm

EPS = 1e-5
TANGENTS = list(itertools.product([True, False], repeat=3))  # which of ẋ, ẇ, ḃ exist


class _Ops(TorchDispatchMode):
    """Names of the operators dispatched inside the block."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def _inputs(shape: tuple[int, ...]) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=g, dtype=torch.float64) * 3 + 1
    channels = shape[1]
    w, b = (torch.randn(channels, generator=g, dtype=torch.float64) for _ in range(2))
    return x, w, b, torch.randn_like(x), torch.randn_like(w), torch.randn_like(b)


@pytest.mark.parametrize("shape", [(16, 4), (8, 3, 5, 5), (4, 2, 3, 3, 3)])
@pytest.mark.parametrize("recorded", [False, True])
@pytest.mark.parametrize("mask", TANGENTS)
def test_tangent_and_primal_equal_torchs_forward_ad(shape, recorded, mask):
    x, w, b, *tangents = _inputs(shape)
    stats = torch.native_batch_norm(x, w, b, None, None, True, 0.0, EPS)[1:] if recorded else None
    with fwAD.dual_level():
        duals = [fwAD.make_dual(p, t) if on else p for p, t, on in zip((x, w, b), tangents, mask)]
        ours = fwAD.unpack_dual(_TrainBatchNorm.apply(*duals, EPS, stats))
        ref = fwAD.unpack_dual(F.batch_norm(duals[0], None, None, duals[1], duals[2], True, 0.0, EPS))
    torch.testing.assert_close(ours.primal, ref.primal, rtol=0, atol=1e-12)
    if any(mask):
        torch.testing.assert_close(ours.tangent, ref.tangent, rtol=0, atol=1e-12)
    else:
        assert ours.tangent is None


def test_weight_and_bias_tangent_is_one_kernel():
    """ẋ's part is BN's backward kernel, ẇ·x̂ + ḃ one eval-mode BN kernel: with the primal and σ² that is
    every operator the rule dispatches (metadata checks aside)."""
    x, w, b, *tangents = _inputs((8, 3, 5, 5))
    with fwAD.dual_level():
        duals = [fwAD.make_dual(p, t) for p, t in zip((x, w, b), tangents)]
        with _Ops() as ops:
            _TrainBatchNorm.apply(*duals, EPS, None)
    kernels = sorted(n for n in ops.names if n not in ("is_same_size", "_has_same_storage_numel"))
    assert kernels == ["add_", "native_batch_norm", "native_batch_norm", "native_batch_norm_backward", "pow"]


def test_lean_batchnorm_leaves_running_statistics_and_restores_the_module():
    bn = nn.BatchNorm2d(3).double().train()
    x = _inputs((8, 3, 5, 5))[0]
    before = (bn.running_mean.clone(), bn.running_var.clone(), bn.num_batches_tracked.clone())
    with lean_batchnorm(nn.Sequential(bn)):
        y = bn(x)
    assert all(torch.equal(a, c) for a, c in zip(before, (bn.running_mean, bn.running_var, bn.num_batches_tracked)))
    torch.testing.assert_close(y, F.batch_norm(x, None, None, bn.weight, bn.bias, True, 0.0, bn.eps))
    assert "forward" not in vars(bn)  # the class's forward again
