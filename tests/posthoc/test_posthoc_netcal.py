"""The post-hoc calibrators against netcal where it fits the same map on the same data.

What netcal computes (read from its source, netcal 1.4): ``LogisticCalibration(method="mle")`` on K-class
probabilities fits softmax(w ⊙ ln p + b), w, b ∈ R^K, unregularised, by scipy's BFGS with finite-difference
gradients (default gtol 1e-5), ln p clipped at float64 eps; ``temperature_only=True`` / ``TemperatureScaling``
fit softmax(w ln p); ``BetaCalibration(method="mle")`` on a binary confidence p fits sigmoid(a ln p − b ln(1 − p)
+ c) (a, b ≥ 0 enforced only when the free fit is negative); ``binning.IsotonicRegression`` fits scikit-learn's
isotonic regression one-vs-rest on p_c and divides by the row sum. So: vector scaling and TS on logits that are
log-probabilities, Dirichlet calibration at K = 2 unregularised, and isotonic regression are the same fits.
Tolerances: netcal's finite-difference BFGS stops ~1e-5 from the optimum (observed differences are given
next to each bound); isotonic regression is exact.
"""

import warnings

import numpy as np
import pytest

from metacal.posthoc import DirichletCalibration, IsotonicCalibration, TemperatureScaling, VectorScaling

netcal = pytest.importorskip("netcal")


def softmax(a):
    e = np.exp(a - a.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    n, k = 2000, 4
    r = rng.normal(size=(n, k)) * 1.5
    # labels from an under-confident, biased version of r: the fitted maps are far from the identity
    y = np.array([rng.choice(k, p=row) for row in softmax(0.6 * r + np.array([0.3, -0.2, 0.0, 0.1]))])
    test = softmax(rng.normal(size=(500, k)) * 1.5)
    return softmax(r), y, test


def nll(q, y):
    return float(-np.log(q[np.arange(len(y)), y]).mean())


def test_vector_scaling_matches_logistic_calibration(data):
    from netcal.scaling import LogisticCalibration

    p, y, test = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = LogisticCalibration(method="mle").fit(p, y)
    vs = VectorScaling().fit(np.log(p), y)
    assert np.abs(ref.transform(test) - vs.transform(np.log(test)).numpy()).max() < 1e-4  # observed 1.4e-5
    np.testing.assert_allclose(vs.weight.numpy(), ref.weights, atol=1e-3)  # observed 4e-5
    np.testing.assert_allclose(vs.bias.numpy(), ref.intercept - ref.intercept.mean(), atol=1e-3)
    # the same objective: metacal's minimum is not above netcal's
    assert nll(vs.transform(np.log(p)).numpy(), y) <= nll(ref.transform(p), y) + 1e-9


def test_temperature_scaling_matches_netcal(data):
    from netcal.scaling import TemperatureScaling as NetcalTS

    p, y, test = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = NetcalTS(method="mle").fit(p, y)
    ts = TemperatureScaling("nll").fit(np.log(p), y)
    assert 1 / ts.temperature == pytest.approx(float(ref.weights[0]), abs=1e-5)  # observed 1e-8
    assert np.abs(ref.transform(test) - ts.transform(np.log(test)).numpy()).max() < 1e-5


def test_binary_dirichlet_matches_beta_calibration():
    from netcal.scaling import BetaCalibration

    rng = np.random.default_rng(1)
    s = rng.normal(size=3000) * 1.5
    p1 = 1 / (1 + np.exp(-s))
    y = (rng.random(3000) < 1 / (1 + np.exp(-(1.3 * s - 0.4)))).astype(np.int64)  # a = b = 1.3 > 0, c = −0.4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = BetaCalibration(method="mle").fit(p1, y)
    two = lambda q: np.log(np.stack([1 - q, q], 1))  # noqa: E731
    d = DirichletCalibration(reg_lambda=0.0).fit(two(p1), y)
    new = 1 / (1 + np.exp(-rng.normal(size=500) * 1.5))
    assert np.abs(ref.transform(new) - d.transform(two(new)).numpy()[:, 1]).max() < 1e-4  # observed 9.4e-6
    # the same fit scores the same NLL on the fitting data
    q_ref, q = ref.transform(p1), d.transform(two(p1)).numpy()[:, 1]
    ll = lambda q1: -np.mean(np.where(y == 1, np.log(q1), np.log(1 - q1)))  # noqa: E731
    assert ll(q) <= ll(q_ref) + 1e-9


def test_isotonic_matches_netcal(data):
    from netcal.binning import IsotonicRegression

    p, y, test = data
    ref = IsotonicRegression().fit(p, y)
    iso = IsotonicCalibration().fit(p, y)
    np.testing.assert_allclose(iso.transform(test).numpy(), ref.transform(test), atol=1e-12)  # observed 1e-16
    np.testing.assert_allclose(iso.transform(p).numpy(), ref.transform(p), atol=1e-12)
