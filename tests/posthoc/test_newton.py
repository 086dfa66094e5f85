"""The Newton engine of the affine fit (metacal.posthoc.newton) against L-BFGS-B and torch autograd: both
engines reach the same minimum of the same convex L, Newton's end point has a zero gradient by autograd, it
converges in few steps (quadratic convergence), and K above NEWTON_MAX_CLASSES falls back to L-BFGS."""

import pytest
import torch

from metacal.posthoc import MatrixScaling
from metacal.posthoc.affine import affine_objective, fit_affine
from metacal.posthoc.newton import NEWTON_MAX_CLASSES, fit_newton


def sample(n, k, seed, scale=2.0):
    """Logits z and labels drawn from softmax(A z) with a random off-diagonal A: a map matrix scaling can fix."""
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, k, generator=g, dtype=torch.float64) * scale
    a = torch.eye(k, dtype=torch.float64) * 0.6 + 0.15 * torch.randn(k, k, generator=g, dtype=torch.float64)
    return z, torch.multinomial(torch.softmax(z @ a.T, 1), 1, generator=g).squeeze(1)


def autograd_gradient(x, y, w, b, lam, mu):
    w, b = w.clone().requires_grad_(True), b.clone().requires_grad_(True)
    affine_objective(x, y, w, b, lam, mu).backward()
    return torch.cat([w.grad.reshape(-1), b.grad])


@pytest.mark.parametrize("diagonal", [False, True])
@pytest.mark.parametrize("strength", [0.0, 1e-4, 1.0, 100.0])
def test_newton_and_lbfgs_reach_the_same_minimum(diagonal, strength):
    x, y = sample(1500, 6, seed=1)
    wn, bn = fit_affine(x, y, diagonal, strength, strength, engine="newton", tolerance_grad=1e-10)
    wl, bl = fit_affine(x, y, diagonal, strength, strength, engine="lbfgs", tolerance_grad=1e-10)
    ln = float(affine_objective(x, y, wn, bn, strength, strength))
    ll = float(affine_objective(x, y, wl, bl, strength, strength))
    assert ln <= ll + 1e-12  # Newton's end point is never worse
    assert ln == pytest.approx(ll, abs=1e-10)
    assert torch.allclose(wn, wl, atol=2e-5) and torch.allclose(bn, bl, atol=2e-5)


@pytest.mark.parametrize("diagonal", [False, True])
def test_newton_end_point_has_zero_gradient_by_autograd(diagonal):
    x, y = sample(2000, 5, seed=2)
    x = torch.log_softmax(x, 1)  # the Dirichlet features
    lam, mu = 3e-3, 1e-2
    w, b = fit_affine(x, y, diagonal, lam, mu, engine="newton", tolerance_grad=1e-11)
    grad = autograd_gradient(x, y, w, b, lam, mu)
    # the gradient of the gauge-fixed representative: zero up to the shift directions softmax ignores, along
    # which the penalty is already minimal at this representative, so the whole gradient vanishes
    assert float(grad.abs().max()) < 1e-9


def test_newton_converges_in_few_steps():
    x, y = sample(3000, 10, seed=3)
    k = 10
    start = torch.cat([torch.eye(k, dtype=torch.float64), torch.zeros(k, 1, dtype=torch.float64)], 1).numpy()
    for steps, expect_done in ((1, False), (25, True)):
        theta, value = fit_newton(x.numpy(), y.numpy(), False, 1e-3, 1e-3, start, 1e-9, steps)
        w, b = torch.from_numpy(theta[:, :k].copy()), torch.from_numpy(theta[:, -1].copy())
        done = float(autograd_gradient(x, y, w, b, 1e-3, 1e-3).abs().max()) < 1e-9
        assert done == expect_done
        assert value == pytest.approx(float(affine_objective(x, y, w, b, 1e-3, 1e-3)), abs=1e-12)


def test_many_classes_use_lbfgs_and_still_converge(monkeypatch):
    k = NEWTON_MAX_CLASSES + 1
    x, y = sample(k * (k + 1) * 3, k, seed=4)
    import metacal.posthoc.affine as affine

    def no_newton(*args, **kwargs):
        raise AssertionError("Newton used above NEWTON_MAX_CLASSES")

    monkeypatch.setattr(affine, "fit_newton", no_newton)
    w, b = fit_affine(x, y, False, 1.0, 1.0)
    assert float(autograd_gradient(x, y, w, b, 1.0, 1.0).abs().max()) < 1e-6


def test_matrix_scaling_cv_is_the_same_with_either_engine(monkeypatch):
    x, y = sample(1200, 4, seed=5)
    newton = MatrixScaling().fit(x, y)
    import metacal.posthoc.affine as affine

    monkeypatch.setattr(affine, "NEWTON_MAX_CLASSES", 0)
    lbfgs = MatrixScaling().fit(x, y)
    assert newton.reg_lambda_used == lbfgs.reg_lambda_used
    assert torch.allclose(newton.odir_scores, lbfgs.odir_scores, atol=1e-7)
    assert torch.allclose(newton.weight, lbfgs.weight, atol=1e-4)


def test_unknown_engine_is_refused():
    x, y = sample(100, 3, seed=6)
    with pytest.raises(ValueError, match="engine must be"):
        fit_affine(x, y, False, engine="adam")
