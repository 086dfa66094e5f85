"""Focal family: focal (scalar / per-class / per-sample γ), dual focal, inverse focal, FLSD, FLSc."""

import math

import pytest
import torch
import torch.nn.functional as F

from metacal import losses

D = torch.float64


def _batch(n=6, k=4, seed=0, scale=2.0):
    g = torch.Generator().manual_seed(seed)
    z = (scale * torch.randn(n, k, generator=g, dtype=D)).requires_grad_(True)
    y = torch.randint(0, k, (n,), generator=g)
    return z, y


def _grad(value, z):
    return torch.autograd.grad(value, z)[0]


# --- focal -------------------------------------------------------------------------------------

def test_focal_gamma_zero_equals_ce_in_value_and_gradient():
    z, y = _batch()
    ce = losses.build("ce")(z, y)
    ce_grad = _grad(ce, z)
    for gamma in (None, 0.0, torch.zeros(6, dtype=D)):
        fl = losses.build("focal", gamma=0.0)(z, y, gamma=gamma)
        torch.testing.assert_close(fl, ce)
        torch.testing.assert_close(_grad(fl, z), ce_grad)
    torch.testing.assert_close(ce, F.cross_entropy(z, y))


def test_focal_hand_value():
    # p = (0.75, 0.25) from logits (log 3, 0); γ = 2: ℓ = (1 − 0.75)² · (−log 0.75)
    z = torch.tensor([[math.log(3.0), 0.0]], dtype=D)
    value = losses.build("focal", gamma=2.0)(z, torch.tensor([0]))
    assert value.item() == pytest.approx(0.0625 * -math.log(0.75), rel=1e-12)


def test_per_sample_gamma_equals_loop_of_scalar_losses_and_has_gamma_gradient():
    z, y = _batch(n=5)
    gammas = torch.tensor([0.0, 0.5, 1.0, 2.5, 4.0], dtype=D, requires_grad=True)
    for name in ("focal", "dual_focal", "inverse_focal", "focal_gra", "dual_focal_gra"):
        per = losses.build(name, reduction="none")(z, y, gamma=gammas)
        loop = torch.stack([
            losses.build(name, gamma=float(g), reduction="none")(z[i:i + 1], y[i:i + 1])[0]
            for i, g in enumerate(gammas.detach())
        ])
        torch.testing.assert_close(per, loop)
        # mean reduction is the mean of the per-sample values; (N, 1) γ is accepted too
        torch.testing.assert_close(losses.build(name)(z, y, gamma=gammas.unsqueeze(1)), loop.mean())
        # gradient w.r.t. γ: d/dγ [−w^γ log p] = −w^γ log w log p, checked by gradcheck
        assert torch.autograd.gradcheck(
            lambda g: losses.build(name, reduction="none")(z.detach(), y, gamma=g), (gammas,)
        ), name


def test_focal_gamma_derivative_matches_closed_form():
    z, y = _batch(n=4, seed=3)
    g = torch.full((4,), 1.5, dtype=D, requires_grad=True)
    value = losses.build("focal", reduction="none")(z.detach(), y, gamma=g).sum()
    (dg,) = torch.autograd.grad(value, g)
    lp = F.log_softmax(z.detach(), -1).gather(1, y[:, None]).squeeze(1)
    w = 1 - lp.exp()
    torch.testing.assert_close(dg, -(w**1.5) * torch.log(w) * lp)


@pytest.mark.parametrize("name", ["focal", "dual_focal", "inverse_focal", "focal_gra", "dual_focal_gra"])
def test_per_class_gamma(name):
    z, y = _batch(n=8, k=3, seed=1)
    assert len(set(y.tolist())) == 3
    class_gamma = [0.0, 1.0, 3.0]
    value = losses.build(name, gamma=class_gamma, reduction="none")(z, y)
    expected = torch.stack([
        losses.build(name, gamma=class_gamma[int(y[i])])(z[i:i + 1], y[i:i + 1]) for i in range(8)
    ])
    torch.testing.assert_close(value, expected)


def test_per_class_gamma_errors():
    z, y = _batch(n=8, k=3, seed=1)
    with pytest.raises(ValueError, match="per-class gamma"):
        losses.build("focal", gamma=[1.0, 2.0])(z, torch.full((8,), 2))


@pytest.mark.parametrize("gamma, message", [
    ("nan", "gamma must be a number or a non-empty per-class list of numbers; got 'nan'"),  # YAML's bare nan
    (float("nan"), "gamma must be finite; got nan"),
    ([1.0, float("inf")], "gamma must be finite; got inf"),
    ([1.0, "abc"], "gamma must be a number or a non-empty per-class list of numbers; got 'abc'"),
    ([1.0, None], "gamma must be a number or a non-empty per-class list of numbers; got None"),
    ([], "gamma must be a number or a non-empty per-class list"),
])
@pytest.mark.parametrize("name", ["focal", "dual_focal", "inverse_focal"])
def test_a_gamma_that_is_not_a_finite_number_is_refused_at_construction(name, gamma, message):
    with pytest.raises(ValueError) as info:
        losses.build(name, gamma=gamma)
    assert str(info.value) == message


def test_numpy_scalars_are_numbers_for_gamma():
    np = pytest.importorskip("numpy")
    assert losses.build("focal", gamma=np.int64(2)).gamma == 2.0
    assert losses.build("focal", gamma=[np.float32(0.5), 3]).class_gamma.tolist() == [0.5, 3.0]


def test_per_sample_gamma_wrong_length_is_a_clear_error():
    z, y = _batch(n=4)
    with pytest.raises(ValueError, match="one value per sample"):
        losses.build("focal")(z, y, gamma=torch.ones(3))


# --- dual focal: p_j is the largest probability strictly below p_y ------------------------------

@pytest.mark.parametrize(
    "probs, target, p_y, p_j",
    [
        ([0.5, 0.3, 0.15, 0.05], 0, 0.5, 0.3),    # correct: next one down is the runner-up
        ([0.5, 0.3, 0.15, 0.05], 1, 0.3, 0.15),   # misclassified: p_j is below p_y, not the max 0.5
        ([0.5, 0.3, 0.15, 0.05], 3, 0.05, 0.0),   # p_y the smallest → p_j = 0
        ([0.4, 0.4, 0.15, 0.05], 0, 0.4, 0.15),   # tie with p_y: not strictly below, skipped
        ([0.25, 0.25, 0.25, 0.25], 2, 0.25, 0.0), # all tied → nothing below → p_j = 0
    ],
)
def test_dual_focal_hand_values(probs, target, p_y, p_j):
    z = torch.log(torch.tensor([probs], dtype=D))
    y = torch.tensor([target])
    gamma = 2.0
    expected = (1 - p_y + p_j) ** gamma * -math.log(p_y)
    value = losses.build("dual_focal", gamma=gamma)(z, y)
    assert value.item() == pytest.approx(expected, rel=1e-10)


def test_dual_focal_numbers_written_out():
    z = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]] * 3, dtype=D))
    y = torch.tensor([0, 1, 3])
    value = losses.build("dual_focal", gamma=2.0, reduction="none")(z, y)
    # 0.8²·ln2, 0.85²·(−ln 0.3), 0.95²·(−ln 0.05)
    torch.testing.assert_close(value, torch.tensor([0.443614, 0.869871, 2.703648], dtype=D), atol=2e-6, rtol=0)


def test_dual_focal_gamma_zero_is_ce_and_default_gamma_is_5():
    z, y = _batch(seed=4)
    torch.testing.assert_close(losses.build("dual_focal", gamma=0.0)(z, y), F.cross_entropy(z, y))
    assert losses.build("dual_focal").gamma == 5.0


@pytest.mark.parametrize("name, default", [
    ("focal", 1.0), ("dual_focal", 5.0), ("inverse_focal", 1.0), ("focal_gra", 1.0), ("dual_focal_gra", 5.0),
])
def test_gamma_losses_default_and_reduction_of_per_sample(name, default):
    z, y = _batch(seed=6)
    loss = losses.build(name)
    assert loss.gamma == default and losses.build(name, gamma=None).gamma == default
    per_sample = losses.build(name, reduction="none")(z, y)
    assert per_sample.shape == y.shape
    torch.testing.assert_close(per_sample, loss.per_sample(z, y, default), atol=0.0, rtol=0.0)
    torch.testing.assert_close(loss(z, y), per_sample.mean(), atol=0.0, rtol=0.0)


# --- inverse focal -------------------------------------------------------------------------------

def test_inverse_focal_hand_value_and_gamma_zero():
    z = torch.tensor([[math.log(3.0), 0.0]], dtype=D)  # p = (0.75, 0.25)
    y = torch.tensor([0])
    value = losses.build("inverse_focal", gamma=2.0)(z, y)
    assert value.item() == pytest.approx(1.75**2 * -math.log(0.75), rel=1e-12)
    z2, y2 = _batch(seed=5)
    torch.testing.assert_close(losses.build("inverse_focal", gamma=0.0)(z2, y2), F.cross_entropy(z2, y2))


# --- FLSD-53 / FLSD-52 / FLSc-531 ---------------------------------------------------------------

def _focal_value(z, y, gamma):
    return losses.build("focal", gamma=gamma)(z, y)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_flsd_thresholds_are_exact(dtype):
    # K = 5 equal logits → p_t = 1/5 = 0.2 exactly: the 0.2 ≤ p_t < 0.5 branch (γ = 3).
    z5 = torch.zeros(1, 5, dtype=dtype)
    y0 = torch.tensor([0])
    # K = 2 equal logits → p_t = 0.5 exactly: the p_t ≥ 0.5 branch (γ = 3 for 53, 2 for 52).
    z2 = torch.zeros(1, 2, dtype=dtype)
    eps = 1e-3
    below_02 = torch.tensor([[-eps, 0, 0, 0, 0]], dtype=dtype)
    above_02 = torch.tensor([[eps, 0, 0, 0, 0]], dtype=dtype)
    below_05 = torch.tensor([[-eps, 0]], dtype=dtype)
    above_05 = torch.tensor([[eps, 0]], dtype=dtype)
    cases = [
        (z5, 3.0, 3.0), (below_02, 5.0, 5.0), (above_02, 3.0, 3.0),
        (z2, 3.0, 2.0), (below_05, 3.0, 3.0), (above_05, 3.0, 2.0),
    ]
    for z, g53, g52 in cases:
        v53 = losses.build("flsd53")(z, y0)
        v52 = losses.build("flsd52")(z, y0)
        torch.testing.assert_close(v53, _focal_value(z, y0, g53))
        torch.testing.assert_close(v52, _focal_value(z, y0, g52))
    # the branches really differ at these points (otherwise the test could not fail)
    assert not torch.allclose(_focal_value(z5, y0, 3.0), _focal_value(z5, y0, 5.0))
    assert not torch.allclose(_focal_value(z2, y0, 3.0), _focal_value(z2, y0, 2.0))


def test_flsd_gamma_carries_no_gradient():
    z, y = _batch(n=32, k=5, seed=6)
    value = losses.build("flsd53")(z, y)
    p = F.softmax(z.detach(), -1).gather(1, y[:, None]).squeeze(1)
    gamma = torch.where(p < 0.2, 5.0, 3.0).to(D)  # constant tensor, no grad
    assert (p < 0.2).any() and (p >= 0.2).any()
    ref = losses.build("focal")(z, y, gamma=gamma)
    torch.testing.assert_close(value, ref)
    torch.testing.assert_close(_grad(value, z), _grad(ref, z))


def test_flsc531_switches_at_epochs_100_and_250():
    z, y = _batch(seed=7)
    loss = losses.build("flsc531")
    for epoch, gamma in [(0, 5.0), (99, 5.0), (100, 3.0), (249, 3.0), (250, 1.0), (349, 1.0)]:
        loss.set_epoch(epoch)
        assert loss.current_gamma() == gamma
        torch.testing.assert_close(loss(z, y), _focal_value(z, y, gamma))
