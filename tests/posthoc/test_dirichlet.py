"""Dirichlet calibration: ≈ identity on a calibrated model, recovers a known map on log-probabilities, matches
multinomial logistic regression on ln p (scikit-learn) when unregularised, probabilities-only input."""

import numpy as np
import pytest
import torch

from metacal.posthoc import DirichletCalibration, MatrixScaling


def calibrated(n, k, seed, scale=2.0):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, k, generator=g, dtype=torch.float64) * scale
    return z, torch.multinomial(torch.softmax(z, 1), 1, generator=g).squeeze(1)


def test_calibrated_model_gives_identity():
    k = 4
    z, y = calibrated(30_000, k, seed=0)
    d = DirichletCalibration(reg_lambda=0.0).fit(z, y)
    # labels drawn from softmax(z) = softmax(I·ln p): W = I, b = 0 is the true map
    torch.testing.assert_close(d.weight, torch.eye(k, dtype=torch.float64), atol=0.05, rtol=0)
    torch.testing.assert_close(d.bias, torch.zeros(k, dtype=torch.float64), atol=0.05, rtol=0)
    test, _ = calibrated(2000, k, seed=1)
    assert float((d.transform(test) - torch.softmax(test, 1)).abs().max()) < 0.03
    # with ODIR chosen by cross-validation on a smaller set, still close to the identity
    z_small, y_small = z[:3000], y[:3000]
    cv = DirichletCalibration().fit(z_small, y_small)
    assert float((cv.transform(test) - torch.softmax(test, 1)).abs().max()) < 0.05
    assert cv.odir_scores is not None and cv.reg_lambda_used == cv.reg_mu_used


def test_known_map_on_log_probabilities_is_recovered():
    k = 3
    g = torch.Generator().manual_seed(2)
    a = torch.tensor([[0.6, 0.2, 0.0], [0.0, 0.8, 0.3], [0.1, 0.0, 0.5]], dtype=torch.float64)
    c = torch.tensor([0.2, -0.3, 0.1], dtype=torch.float64)
    z = torch.randn(40_000, k, generator=g, dtype=torch.float64) * 3.0
    log_p = torch.log_softmax(z, 1)
    y = torch.multinomial(torch.softmax(log_p @ a.T + c, 1), 1, generator=g).squeeze(1)
    d = DirichletCalibration(reg_lambda=0.0).fit(z, y)
    from metacal.posthoc.affine import gauge_fixed

    want_w, want_b = gauge_fixed(a, c)
    torch.testing.assert_close(d.weight, want_w, atol=0.05, rtol=0)
    torch.testing.assert_close(d.bias, want_b, atol=0.1, rtol=0)


def test_unregularised_fit_matches_logistic_regression_on_log_probs():
    from sklearn.linear_model import LogisticRegression

    k = 4
    z, y = calibrated(3000, k, seed=3, scale=3.0)
    z = z * 1.7  # over-confident: the map is not the identity
    d = DirichletCalibration(reg_lambda=0.0).fit(z, y)
    lr = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(torch.log_softmax(z, 1).numpy(), y.numpy())
    test, _ = calibrated(500, k, seed=4, scale=5.0)
    diff = np.abs(d.transform(test).numpy() - lr.predict_proba(torch.log_softmax(test, 1).numpy())).max()
    assert diff < 2e-5
    # Dirichlet calibration on ln p is matrix scaling on the logits ln p (same fit, same map)
    ms = MatrixScaling(reg_lambda=0.0).fit(torch.log_softmax(z, 1), y)
    torch.testing.assert_close(ms.weight, d.weight, atol=1e-12, rtol=0)


def test_probabilities_only_input_is_the_same_fit():
    z, y = calibrated(600, 3, seed=5)
    log_p = torch.log(torch.softmax(z, 1))  # what Predictions.logits_for_scaling() gives for a probs-only file
    a, b = DirichletCalibration(0.1).fit(z, y), DirichletCalibration(0.1).fit(log_p, y)
    torch.testing.assert_close(a.weight, b.weight, atol=1e-9, rtol=0)
    torch.testing.assert_close(a.transform(z), b.transform(log_p), atol=1e-9, rtol=0)
    q = a.transform(z)
    assert bool((q >= 0).all()) and torch.allclose(q.sum(1), torch.ones(600, dtype=torch.float64), atol=1e-12)


def test_bad_input():
    z, y = calibrated(100, 3, seed=6)
    with pytest.raises(ValueError, match="at least 12 fitting samples for K = 3, got N = 11"):
        DirichletCalibration().fit(z[:11], y[:11])
    with pytest.raises(ValueError, match="K = 3 classes, got logits with K = 4"):
        DirichletCalibration(0.1).fit(z, y).transform(torch.zeros(2, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="targets must lie in"):
        DirichletCalibration(0.1).fit(z, y + 1)
