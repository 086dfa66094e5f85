"""Ensemble temperature scaling: both fitting stages against independent minimisers (grid over T, scipy SLSQP
over a softmax-parametrised simplex, a brute-force simplex grid), limiting cases, valid probability rows,
state round trip, edge cases (K = 2, one class present, one-hot-like logits) and the probabilities refusal."""

import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from metacal.posthoc import EnsembleTemperatureScaling
from metacal.posthoc.ensemble_ts import simplex_quadratic_min


def data(n, k, seed, sharpen=1.0):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, k, generator=g, dtype=torch.float64) * 1.5
    y = torch.multinomial(torch.softmax(z, 1), 1, generator=g).squeeze(1)
    return z * sharpen, y


def mse_np(p, y):
    """Independent numpy squared error: mean over N·K entries of (p − onehot)²."""
    onehot = np.eye(p.shape[1])[y]
    return float(np.mean((p - onehot) ** 2))


def softmax_np(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def mix_np(z, t, w):
    return w[0] * softmax_np(z / t) + w[1] * softmax_np(z) + w[2] / z.shape[1]


@pytest.fixture(scope="module")
def sharp():
    return data(1500, 4, seed=0, sharpen=2.5)


def test_temperature_is_the_grid_minimiser_of_the_squared_error(sharp):
    z, y = sharp
    ets = EnsembleTemperatureScaling().fit(z, y)
    zn, yn = z.numpy(), y.numpy()
    grid = np.exp(np.linspace(np.log(0.5), np.log(10.0), 4001))  # ×1.00075 steps
    losses = np.array([mse_np(softmax_np(zn / t), yn) for t in grid])
    t_grid = grid[losses.argmin()]
    assert ets.temperature == pytest.approx(t_grid, rel=2e-3)
    assert mse_np(softmax_np(zn / ets.temperature), yn) <= losses.min() + 1e-12
    assert 2.0 < ets.temperature < 3.2  # logits sharpened 2.5×: T near 2.5


def test_weights_match_slsqp_and_beat_a_simplex_grid(sharp):
    z, y = sharp
    ets = EnsembleTemperatureScaling().fit(z, y)
    zn, yn, t = z.numpy(), y.numpy(), ets.temperature
    fitted = mse_np(mix_np(zn, t, ets.weights.numpy()), yn)

    def by_softmax(a):  # another parametrisation of the simplex: w = softmax(a)
        return mse_np(mix_np(zn, t, np.exp(a) / np.exp(a).sum()), yn)

    ref = min((minimize(by_softmax, a0, method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-15,
                                                                        "maxiter": 4000})
               for a0 in (np.zeros(3), np.array([3.0, 0, 0]), np.array([0, 0, 3.0]))), key=lambda r: r.fun)
    slsqp = minimize(lambda w: mse_np(mix_np(zn, t, w), yn), np.array([1.0, 0, 0]), method="SLSQP",
                     bounds=[(0, 1)] * 3, constraints={"type": "eq", "fun": lambda w: w.sum() - 1}, tol=1e-14)
    assert fitted <= ref.fun + 1e-12 and fitted <= slsqp.fun + 1e-12
    np.testing.assert_allclose(ets.weights.numpy(), slsqp.x, atol=2e-4)
    step = 0.005
    best = min(mse_np(mix_np(zn, t, np.array([a, b, 1 - a - b])), yn)
               for a in np.arange(0, 1 + 1e-9, step) for b in np.arange(0, 1 - a + 1e-9, step))
    assert fitted <= best + 1e-12
    assert ets.weights.sum().item() == pytest.approx(1.0, abs=1e-15) and bool((ets.weights >= 0).all())


def test_simplex_solver_on_hand_derived_quadratics():
    # minimise |w − a|² = wᵀIw − 2aᵀw + |a|²: the Euclidean projection of a onto the simplex
    for a, expected in (([0.2, 0.3, 0.5], [0.2, 0.3, 0.5]),  # interior point: itself
                        ([1.0, 1.0, -1.0], [0.5, 0.5, 0.0]),  # edge: (1,1,−1) → (½,½,0)
                        ([2.0, 0.0, 0.0], [1.0, 0.0, 0.0])):  # vertex
        w = simplex_quadratic_min(torch.eye(3, dtype=torch.float64), torch.tensor(a, dtype=torch.float64))
        torch.testing.assert_close(w, torch.tensor(expected, dtype=torch.float64), atol=1e-12, rtol=0)


def test_outputs_are_probability_rows_and_keep_the_argmax(sharp):
    z, y = sharp
    test, _ = data(800, 4, seed=1, sharpen=2.5)
    probs = EnsembleTemperatureScaling().fit(z, y).transform(test)
    assert probs.dtype == torch.float64 and bool((probs >= 0).all()) and bool((probs <= 1).all())
    torch.testing.assert_close(probs.sum(1), torch.ones(800, dtype=torch.float64), atol=1e-12, rtol=0)
    assert bool((probs.argmax(1) == test.argmax(1)).all())


def test_calibrated_data_give_t_near_one_and_no_uniform_weight():
    z, y = data(20000, 5, seed=3)  # labels drawn from softmax(z): calibrated
    ets = EnsembleTemperatureScaling().fit(z, y)
    assert ets.temperature == pytest.approx(1.0, abs=0.05)
    assert ets.weights[0] + ets.weights[1] > 0.98 and ets.weights[2] < 0.02
    # the fitted map hardly moves calibrated probabilities
    assert float((ets.transform(z) - torch.softmax(z, 1)).abs().max()) < 0.02


def test_labels_independent_of_the_logits_give_near_uniform_probabilities():
    g = torch.Generator().manual_seed(4)
    z = torch.randn(4000, 4, generator=g, dtype=torch.float64) * 3.0
    y = torch.arange(4000) % 4  # exactly uniform class frequencies, unrelated to z
    ets = EnsembleTemperatureScaling().fit(z, y)
    probs = ets.transform(z)
    assert float((probs - 0.25).abs().max()) < 0.03
    # the squared error then equals that of the uniform prediction, (1 − 1/K)/K = 0.1875, to within 1e-3
    assert mse_np(probs.numpy(), y.numpy()) == pytest.approx(0.1875, abs=1e-3)


def test_state_round_trip_is_bit_exact(sharp, tmp_path):
    z, y = sharp
    ets = EnsembleTemperatureScaling().fit(z, y)
    torch.save(ets.state_dict(), tmp_path / "ets.pt")
    other = EnsembleTemperatureScaling()
    other.load_state_dict(torch.load(tmp_path / "ets.pt"))
    assert torch.equal(other.transform(z), ets.transform(z))
    with pytest.raises(ValueError, match="weights must be 3 numbers ≥ 0 summing to 1"):
        other.load_state_dict({"temperature": 1.0, "weights": [0.5, 0.6, 0.0]})
    with pytest.raises(ValueError, match="temperature must be a finite number > 0, got -1.0"):
        other.load_state_dict({"temperature": -1.0, "weights": [1.0, 0.0, 0.0]})


def test_nll_temperature_option_matches_temperature_scaling(sharp):
    from metacal.posthoc import TemperatureScaling

    z, y = sharp
    assert EnsembleTemperatureScaling("nll").fit(z, y).temperature == TemperatureScaling().fit(z, y).temperature


@pytest.mark.parametrize("case", ["binary", "one_class", "one_hot"])
def test_edge_cases_give_finite_probabilities(case):
    z, y = data(400, 2 if case == "binary" else 3, seed=5, sharpen=2.0)
    if case == "one_class":
        y = torch.zeros_like(y)
    if case == "one_hot":  # confidence exactly 1.0 in float64
        z = torch.nn.functional.one_hot(z.argmax(1), 3).double() * 1e4
    ets = EnsembleTemperatureScaling().fit(z, y)
    probs = ets.transform(z)
    assert math.isfinite(ets.temperature) and bool(torch.isfinite(ets.weights).all())
    assert bool(torch.isfinite(probs).all())
    torch.testing.assert_close(probs.sum(1), torch.ones(400, dtype=torch.float64), atol=1e-12, rtol=0)
    if case == "one_class":  # always class 0: the best map pushes p_0 to 1 on rows that predict 0
        assert float(probs[:, 0].mean()) > float(torch.softmax(z, 1)[:, 0].mean())


def test_probabilities_passed_as_logits_are_refused(sharp):
    z, y = sharp
    with pytest.raises(ValueError, match=r"ensemble temperature scaling got probabilities \(every row in \[0, 1\] "
                                         r"summing to 1\); pass logits, or log-probabilities \(ln p\)"):
        EnsembleTemperatureScaling().fit(torch.softmax(z, 1), y)
    assert EnsembleTemperatureScaling().fit(torch.log_softmax(z, 1), y).temperature > 2.0  # ln p is accepted
