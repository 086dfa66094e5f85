"""Matrix scaling with ODIR: recovers the identity and a known linear map, matches multinomial logistic
regression (scikit-learn) when unregularised, satisfies the stationarity condition of the regularised
objective (hand-derived gradient), tends to vector scaling as λ → ∞, and state round trip."""

import numpy as np
import pytest
import torch

from metacal.posthoc import MatrixScaling, VectorScaling
from metacal.posthoc.affine import gauge_fixed


def labelled(n, k, weight, bias, seed, scale=1.5):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, k, generator=g, dtype=torch.float64) * scale
    y = torch.multinomial(torch.softmax(z @ weight.T + bias, 1), 1, generator=g).squeeze(1)
    return z, y


def test_identity_data_recover_identity():
    k = 3
    z, y = labelled(30_000, k, torch.eye(k, dtype=torch.float64), torch.zeros(k, dtype=torch.float64), seed=0)
    ms = MatrixScaling(reg_lambda=0.0).fit(z, y)
    # standard errors at N = 30,000: ≈ 0.01 per entry; 0.05 is about 5 of them
    torch.testing.assert_close(ms.weight, torch.eye(k, dtype=torch.float64), atol=0.05, rtol=0)
    torch.testing.assert_close(ms.bias, torch.zeros(k, dtype=torch.float64), atol=0.05, rtol=0)


def test_known_linear_map_is_recovered():
    k = 4
    a = torch.tensor([[1.5, 0.4, 0.0, -0.3], [0.0, 1.0, 0.5, 0.0], [-0.4, 0.0, 2.0, 0.3], [0.2, -0.2, 0.0, 0.8]],
                     dtype=torch.float64)
    c = torch.tensor([0.3, -0.2, 0.0, 0.5], dtype=torch.float64)
    z, y = labelled(40_000, k, a, c, seed=1)
    ms = MatrixScaling(reg_lambda=0.0).fit(z, y)
    want_w, want_b = gauge_fixed(a, c)  # the same map written as the fit writes it (Σ off-diagonal = 0 per column)
    torch.testing.assert_close(ms.weight, want_w, atol=0.07, rtol=0)
    torch.testing.assert_close(ms.bias, want_b, atol=0.07, rtol=0)
    off = ms.weight - torch.diag(torch.diagonal(ms.weight))
    torch.testing.assert_close(off.sum(0), torch.zeros(k, dtype=torch.float64), atol=1e-12, rtol=0)


def test_unregularised_fit_matches_multinomial_logistic_regression():
    from sklearn.linear_model import LogisticRegression

    k = 4
    g = torch.Generator().manual_seed(2)
    a = torch.eye(k, dtype=torch.float64) * 1.5 + torch.randn(k, k, generator=g, dtype=torch.float64) * 0.3
    z, y = labelled(3000, k, a, torch.zeros(k, dtype=torch.float64), seed=3, scale=2.0)
    ms = MatrixScaling(reg_lambda=0.0).fit(z, y)
    lr = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(z.numpy(), y.numpy())
    test = torch.randn(500, k, generator=g, dtype=torch.float64) * 2.0
    diff = np.abs(ms.transform(test).numpy() - lr.predict_proba(test.numpy())).max()
    assert diff < 2e-5  # two optimisers stopping at gradient tolerances ~1e-7 (observed: 2.3e-6)


@pytest.mark.parametrize("lam, mu", [(0.1, 0.1), (1.0, 0.01), (0.01, 1.0)])
def test_stationary_point_of_the_regularised_objective(lam, mu):
    # ∂L/∂W = (Q − Y)ᵀ Z / N + 2λ/(K(K−1)) · offdiag(W),  ∂L/∂b = mean(Q − Y) + 2μ/K · b  (hand-derived).
    # The fit runs in gauge-fixed coordinates; the full gradient must still vanish there, because the
    # gauge-fixed representative is the minimiser of the unconstrained objective.
    k = 5
    g = torch.Generator().manual_seed(4)
    z, y = labelled(800, k, torch.randn(k, k, generator=g, dtype=torch.float64) + torch.eye(k, dtype=torch.float64),
                    torch.randn(k, generator=g, dtype=torch.float64), seed=5)
    ms = MatrixScaling(reg_lambda=lam, reg_mu=mu).fit(z, y)
    w, b = ms.weight, ms.bias
    resid = torch.softmax(z @ w.T + b, 1) - torch.nn.functional.one_hot(y, k)
    grad_w = resid.T @ z / len(y) + 2 * lam / (k * (k - 1)) * (w - torch.diag(torch.diagonal(w)))
    grad_b = resid.mean(0) + 2 * mu / k * b
    assert float(grad_w.abs().max()) < 1e-6 and float(grad_b.abs().max()) < 1e-6


def test_large_lambda_tends_to_vector_scaling():
    # As λ → ∞ the off-diagonal entries vanish like 1/λ: to first order W_ij = −K(K−1)/(2λ) · G_ij, with
    # G = (Q − Y)ᵀ Z / N the NLL gradient at the vector-scaling solution (stationarity of L, hand-derived).
    k = 4
    g = torch.Generator().manual_seed(6)
    z, y = labelled(2000, k, torch.randn(k, k, generator=g, dtype=torch.float64) * 0.5 + torch.eye(k, dtype=torch.float64),
                    torch.zeros(k, dtype=torch.float64), seed=7)
    vs = VectorScaling().fit(z, y)
    grad = (vs.transform(z) - torch.nn.functional.one_hot(y, k)).T @ z / len(y)
    offdiag = 1 - torch.eye(k, dtype=torch.float64)
    for lam in (1e3, 1e4):
        ms = MatrixScaling(reg_lambda=lam, reg_mu=0.0).fit(z, y)
        predicted = -k * (k - 1) / (2 * lam) * grad * offdiag
        off = ms.weight * offdiag
        assert float((off - predicted).abs().max()) < 0.05 * float(predicted.abs().max()), lam
    torch.testing.assert_close(torch.diagonal(ms.weight), vs.weight, atol=5e-5, rtol=0)  # λ = 1e4
    torch.testing.assert_close(ms.transform(z), vs.transform(z), atol=1e-3, rtol=0)
    free = MatrixScaling(reg_lambda=0.0).fit(z, y)
    assert float((free.weight * offdiag).abs().max()) > 0.1  # the data do need off-diagonal entries


def test_state_round_trip_through_a_file(tmp_path):
    k = 3
    z, y = labelled(500, k, torch.eye(k, dtype=torch.float64) * 2, torch.zeros(k, dtype=torch.float64), seed=8)
    ms = MatrixScaling(reg_lambda=0.1).fit(z, y)
    torch.save(ms.state_dict(), tmp_path / "ms.pt")
    other = MatrixScaling()
    other.load_state_dict(torch.load(tmp_path / "ms.pt"))
    assert other.reg_lambda_used == pytest.approx(0.1) and other.reg_mu_used == pytest.approx(0.1)
    torch.testing.assert_close(other.transform(z), ms.transform(z), atol=0, rtol=0)
    with pytest.raises(ValueError, match="vector scaling"):
        VectorScaling().load_state_dict(ms.state_dict())
    with pytest.raises(ValueError, match="at least 12 fitting samples"):
        MatrixScaling().fit(z[:11], y[:11])
    with pytest.raises(ValueError, match="'cv'"):
        MatrixScaling(reg_lambda="grid")


@pytest.mark.parametrize("diagonal", [False, True])
def test_hand_derived_gradient_matches_autograd(diagonal):
    # the fit's numpy value and gradient (through the gauge map) against torch autograd of the definition
    from metacal.posthoc.affine import _value_and_gradient, affine_objective

    k, g = 5, torch.Generator().manual_seed(9)
    x = torch.randn(300, k, generator=g, dtype=torch.float64) * 2
    y = torch.randint(0, k, (300,), generator=g)
    w = torch.randn(k if diagonal else k * k, generator=g, dtype=torch.float64).requires_grad_(True)
    b = torch.randn(k, generator=g, dtype=torch.float64).requires_grad_(True)
    loss = affine_objective(x, y, *gauge_fixed(w if diagonal else w.reshape(k, k), b), 0.7, 0.3)
    loss.backward()
    value, grad = _value_and_gradient(torch.cat([w, b]).detach().numpy(), x.numpy(), y.numpy(), diagonal, 0.7, 0.3)
    assert value == pytest.approx(loss.detach().item(), abs=1e-12)
    np.testing.assert_allclose(grad, torch.cat([w.grad, b.grad]).numpy(), atol=1e-12)
