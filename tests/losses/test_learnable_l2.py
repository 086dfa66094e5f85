"""ce_learnable_l2: value = CE + Σ c·w², ∂/∂c = w² (autograd), meta_parameters, reduction none."""

import pytest
import torch
import torch.nn.functional as F

from metacal import losses


def _setup(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(3, 4, generator=g, dtype=torch.float64)
    b = torch.randn(3, generator=g, dtype=torch.float64)
    x = torch.randn(5, 4, generator=g, dtype=torch.float64)
    y = torch.tensor([0, 1, 2, 1, 0])
    return w, b, x, y


def test_value_and_coefficient_gradient():
    w, b, x, y = _setup()
    loss = losses.build("ce_learnable_l2", weight_shape=(3, 4)).double()
    cw = torch.linspace(-0.5, 0.7, 12, dtype=torch.float64).reshape(3, 4)
    cb = torch.tensor([0.1, -0.2, 0.3], dtype=torch.float64)
    with torch.no_grad():
        loss.coeff_weight.copy_(cw)
        loss.coeff_bias.copy_(cb)
    logits = x @ w.T + b
    value = loss(logits, y, head_weight=w, head_bias=b)
    expected = F.cross_entropy(logits, y) + (cw * w**2).sum() + (cb * b**2).sum()
    torch.testing.assert_close(value, expected)
    gw, gb = torch.autograd.grad(value, loss.meta_parameters())
    torch.testing.assert_close(gw, w**2)
    torch.testing.assert_close(gb, b**2)


def test_init_zero_is_ce_and_gradient_reaches_head():
    w, b, x, y = _setup(1)
    w.requires_grad_(True)
    loss = losses.build("ce_learnable_l2", weight_shape=(3, 4), init=0.0).double()
    logits = x @ w.T + b
    torch.testing.assert_close(loss(logits, y, head_weight=w, head_bias=b), F.cross_entropy(logits, y))
    with torch.no_grad():
        loss.coeff_weight.fill_(0.25)
    value = loss(x @ w.T + b, y, head_weight=w, head_bias=b)
    (gw,) = torch.autograd.grad(value, w)
    wd = w.detach().requires_grad_(True)
    (ref,) = torch.autograd.grad(F.cross_entropy(x @ wd.T + b, y), wd)
    torch.testing.assert_close(gw, ref + 2 * 0.25 * w.detach())


def test_reduction_none_adds_penalty_per_sample_and_no_bias():
    w, b, x, y = _setup(2)
    loss = losses.build("ce_learnable_l2", weight_shape=(3, 4), bias=False, init=0.5,
                        reduction="none").double()
    assert len(loss.meta_parameters()) == 1 and loss.coeff_bias is None
    logits = x @ w.T + b
    per = loss(logits, y, head_weight=w, head_bias=b)
    assert per.shape == (5,)
    torch.testing.assert_close(per, F.cross_entropy(logits, y, reduction="none") + 0.5 * (w**2).sum())


def test_meta_parameters_are_the_coefficients_and_in_state_dict():
    loss = losses.build("ce_learnable_l2", weight_shape=(10, 7))
    mp = loss.meta_parameters()
    assert [tuple(p.shape) for p in mp] == [(10, 7), (10,)]
    assert all(p.requires_grad for p in mp)
    assert set(loss.state_dict()) == {"coeff_weight", "coeff_bias"}


def test_bad_input():
    with pytest.raises(ValueError, match="weight_shape"):
        losses.build("ce_learnable_l2", weight_shape=(3,))
    loss = losses.build("ce_learnable_l2", weight_shape=(3, 4))
    with pytest.raises(ValueError, match="expected"):
        loss(torch.zeros(2, 3), torch.zeros(2, dtype=torch.long), head_weight=torch.zeros(3, 5))
    with pytest.raises(ValueError, match="head_weight"):
        loss(torch.zeros(2, 3), torch.zeros(2, dtype=torch.long))


def test_hypergradient_through_one_sgd_step_matches_hand_derivation():
    # w' = w − lr·∇_w[CE(w) + Σ c⊙w²] = w − lr·∇CE(w) − 2·lr·c⊙w, so for a meta loss M(w'):
    # ∂M/∂c = −2·lr·w ⊙ ∇M(w')   (∇CE(w) does not depend on c)
    w, b, x, y = _setup(3)
    w.requires_grad_(True)
    lr = 0.5
    loss = losses.build("ce_learnable_l2", weight_shape=(3, 4), bias=False, init=0.2).double()
    inner = loss(x @ w.T + b, y, head_weight=w)
    (gw,) = torch.autograd.grad(inner, w, create_graph=True)
    w_fast = w - lr * gw
    meta = F.cross_entropy(x.flip(0) @ w_fast.T + b, y)
    (g_coeff,) = torch.autograd.grad(meta, loss.meta_parameters())
    wf = w_fast.detach().requires_grad_(True)
    (g_meta_w,) = torch.autograd.grad(F.cross_entropy(x.flip(0) @ wf.T + b, y), wf)
    torch.testing.assert_close(g_coeff, -2 * lr * w.detach() * g_meta_w)
