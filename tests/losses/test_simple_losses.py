"""Label smoothing, L1 logit norm, Brier, MSE: limiting cases and hand values."""

import math

import pytest
import torch
import torch.nn.functional as F

from metacal import losses

D = torch.float64


def _batch(n=6, k=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (3 * torch.randn(n, k, generator=g, dtype=D)).requires_grad_(True), torch.randint(0, k, (n,), generator=g)


def test_label_smoothing_zero_and_l1_zero_equal_ce_value_and_gradient():
    z, y = _batch()
    ce = F.cross_entropy(z, y)
    (g_ce,) = torch.autograd.grad(ce, z)
    for loss in (losses.build("label_smoothing", epsilon=0.0), losses.build("l1_logit_norm", alpha=0.0)):
        v = loss(z, y)
        torch.testing.assert_close(v, ce)
        torch.testing.assert_close(torch.autograd.grad(v, z)[0], g_ce)


def test_label_smoothing_hand_value_and_torch_oracle():
    # p = (0.5, 0.25, 0.25), y = 0, ε = 0.3: ỹ = (0.8, 0.1, 0.1);
    # ℓ = −(0.8 ln 0.5 + 0.1 ln 0.25 + 0.1 ln 0.25) = 0.8·0.693147 + 0.2·1.386294 = 0.831777
    z = torch.log(torch.tensor([[0.5, 0.25, 0.25]], dtype=D))
    value = losses.build("label_smoothing", epsilon=0.3)(z, torch.tensor([0]))
    assert value.item() == pytest.approx(0.8 * math.log(2) + 0.2 * math.log(4), rel=1e-12)
    assert value.item() == pytest.approx(0.831777, abs=1e-6)
    zb, yb = _batch(seed=1)
    torch.testing.assert_close(losses.build("label_smoothing", epsilon=0.1)(zb, yb),
                               F.cross_entropy(zb, yb, label_smoothing=0.1))
    assert losses.build("label_smoothing").epsilon == 0.05


def test_l1_logit_norm_value():
    z = torch.tensor([[1.0, -2.0, 0.5]], dtype=D)
    y = torch.tensor([2])
    value = losses.build("l1_logit_norm", alpha=0.1)(z, y)
    assert value.item() == pytest.approx(F.cross_entropy(z, y).item() + 0.1 * 3.5, rel=1e-12)


def test_brier_and_mse_hand_values():
    z = torch.log(torch.tensor([[0.5, 0.25, 0.25], [0.5, 0.25, 0.25]], dtype=D))
    y = torch.tensor([0, 1])
    # y=0: 0.25 + 0.0625 + 0.0625 = 0.375; y=1: 0.25 + 0.5625 + 0.0625 = 0.875
    torch.testing.assert_close(losses.build("brier", reduction="none")(z, y), torch.tensor([0.375, 0.875], dtype=D))
    torch.testing.assert_close(losses.build("mse", reduction="none")(z, y), torch.tensor([0.125, 0.875 / 3], dtype=D))
    assert losses.build("brier")(z, y).item() == pytest.approx(0.625)


def test_bad_parameters_raise_value_error():
    with pytest.raises(ValueError, match="epsilon"):
        losses.build("label_smoothing", epsilon=1.5)
    with pytest.raises(ValueError, match="reduction"):
        losses.build("ce", reduction="sum")
    with pytest.raises(KeyError, match="available"):
        losses.build("no_such_loss")
