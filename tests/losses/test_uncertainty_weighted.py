"""BSCE / *_GRA (Lin et al. 2025): value u·CE; GRA gradient u·∇CE with u constant; BSCE weight = Brier score."""

import math

import pytest
import torch
import torch.nn.functional as F

from metacal import losses

D = torch.float64


def _batch(n=7, k=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    z = (2 * torch.randn(n, k, generator=g, dtype=D)).requires_grad_(True)
    return z, torch.randint(0, k, (n,), generator=g)


def _weights(name, z, y, gamma):
    """u computed independently of the library, from probabilities."""
    p = F.softmax(z.detach(), -1)
    p_y = p.gather(1, y[:, None]).squeeze(1)
    if name in ("bsce", "bsce_gra"):
        return ((p - F.one_hot(y, p.shape[1]).to(D)) ** 2).sum(1)  # β = γ = 2 → Brier score
    if name == "focal_gra":
        return (1 - p_y) ** gamma
    p_j = torch.tensor([max([q for q in row.tolist() if q < py] + [0.0]) for row, py in zip(p, p_y.tolist())], dtype=D)
    return (1 - p_y + p_j) ** gamma


@pytest.mark.parametrize("name", ["bsce_gra", "focal_gra", "dual_focal_gra"])
def test_gra_value_is_u_ce_and_gradient_is_u_times_grad_ce(name):
    z, y = _batch()
    params = {} if name == "bsce_gra" else {"gamma": 2.0}
    value = losses.build(name, reduction="none", **params)(z, y)
    u = _weights(name, z, y, 2.0)
    ce = F.cross_entropy(z, y, reduction="none")
    torch.testing.assert_close(value, u * ce)
    (g,) = torch.autograd.grad(value.sum(), z)
    (g_ref,) = torch.autograd.grad((u * F.cross_entropy(z, y, reduction="none")).sum(), z)  # u constant
    torch.testing.assert_close(g, g_ref)


def test_bsce_weight_is_brier_score_hand_value():
    # p = (0.75, 0.25), y = 0: Brier = 0.25² + 0.25² = 0.125; ℓ = 0.125·(−ln 0.75)
    z = torch.tensor([[math.log(3.0), 0.0]], dtype=D)
    y = torch.tensor([0])
    for name in ("bsce", "bsce_gra"):
        assert losses.build(name, beta=2.0, gamma=2.0)(z, y).item() == pytest.approx(
            0.125 * -math.log(0.75), rel=1e-12)
    # general β, γ: u = (Σ|y−p|^β)^{γ/β}; β = 1, γ = 1 → |1−0.75| + 0.25 = 0.5
    assert losses.build("bsce", beta=1.0, gamma=1.0)(z, y).item() == pytest.approx(0.5 * -math.log(0.75))


def test_bsce_and_bsce_gra_share_values_but_differ_in_gradient():
    z, y = _batch(seed=1)
    a = losses.build("bsce")(z, y)
    b = losses.build("bsce_gra")(z, y)
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(a, (_weights("bsce", z, y, 2.0) * F.cross_entropy(z, y, reduction="none")).mean())
    (ga,) = torch.autograd.grad(a, z)
    (gb,) = torch.autograd.grad(b, z)
    assert (ga - gb).abs().max() > 1e-3
    # BSCE's gradient includes the weight's own derivative: ∇(u·CE) = u∇CE + CE∇u
    p = F.softmax(z, -1)
    u = ((p - F.one_hot(y, 4).to(D)) ** 2).sum(1)
    (g_full,) = torch.autograd.grad((u * F.cross_entropy(z, y, reduction="none")).mean(), z)
    torch.testing.assert_close(ga, g_full)


def test_focal_gra_matches_focal_value():
    z, y = _batch(seed=2)
    torch.testing.assert_close(losses.build("focal_gra", gamma=3.0)(z, y), losses.build("focal", gamma=3.0)(z, y))
    torch.testing.assert_close(losses.build("dual_focal_gra", gamma=3.0)(z, y),
                               losses.build("dual_focal", gamma=3.0)(z, y))


def test_bad_bsce_parameters():
    with pytest.raises(ValueError, match="beta > 0"):
        losses.build("bsce", beta=0.0)
