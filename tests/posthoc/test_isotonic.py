"""Isotonic regression: PAV by hand and against scikit-learn (ties, interpolation, clipping), one-vs-rest
properties (monotone per class, renormalised), the zero-row fallback, state round trip, bad input."""

import numpy as np
import pytest
import torch

from metacal.posthoc import IsotonicCalibration
from metacal.posthoc.isotonic import pav


def test_pav_by_hand():
    # y = 1, 0, 1, 1 at x = 0.1 … 0.4: the first two violate, pool to 0.5; the rest stay
    xs, fitted = pav(np.array([0.4, 0.1, 0.3, 0.2]), np.array([1.0, 1.0, 1.0, 0.0]))
    np.testing.assert_array_equal(xs, [0.1, 0.2, 0.3, 0.4])
    np.testing.assert_allclose(fitted, [0.5, 0.5, 1.0, 1.0], atol=1e-15)
    # ties in x are pooled first: x = 0.2 twice with y = 0 and 1 → one point of mean 0.5 and weight 2
    xs, fitted = pav(np.array([0.1, 0.2, 0.2, 0.3]), np.array([1.0, 0.0, 1.0, 0.0]))
    np.testing.assert_array_equal(xs, [0.1, 0.2, 0.3])
    np.testing.assert_allclose(fitted, [0.5, 0.5, 0.5], atol=1e-15)  # (1 + 0 + 1 + 0) / 4 pooled throughout
    xs, fitted = pav(np.array([0.5]), np.array([1.0]))
    assert xs.tolist() == [0.5] and fitted.tolist() == [1.0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pav_matches_sklearn(seed):
    from sklearn.isotonic import IsotonicRegression

    rng = np.random.default_rng(seed)
    x = np.round(rng.random(400), 2)  # many ties
    y = (rng.random(400) < x ** 2).astype(np.float64)
    xs, fitted = pav(x, y)
    ref = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(x, y)
    np.testing.assert_allclose(fitted, ref.predict(xs), atol=1e-12)
    new = np.concatenate([rng.random(300), [-0.5, 0.0, 1.0, 1.5]])  # interpolation and both clipped ends
    np.testing.assert_allclose(np.interp(new, xs, fitted), ref.predict(new), atol=1e-12)


def make_probs(n, k, seed, sharpen=2.5):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, k, generator=g, dtype=torch.float64)
    y = torch.multinomial(torch.softmax(z, 1), 1, generator=g).squeeze(1)
    return torch.softmax(z * sharpen, 1), y


def test_one_vs_rest_scores_are_monotone_and_outputs_are_probabilities():
    p, y = make_probs(1000, 4, seed=3)
    iso = IsotonicCalibration().fit(p, y)
    test, _ = make_probs(2000, 4, seed=4)
    s = iso.scores(test)
    for c in range(4):
        order = torch.argsort(test[:, c])
        assert bool((s[order, c].diff() >= -1e-15).all()), c  # non-decreasing in p_c before renormalising
    q = iso.transform(test)
    assert bool((q >= 0).all()) and torch.allclose(q.sum(1), torch.ones(2000, dtype=torch.float64), atol=1e-12)
    torch.testing.assert_close(q, s / s.sum(1, keepdim=True))
    # on the fitting data every class's mean score equals its frequency (a property of least-squares PAV)
    fit_scores = iso.scores(p)
    for c in range(4):
        assert float(fit_scores[:, c].mean()) == pytest.approx(float((y == c).double().mean()), abs=1e-12)


def test_rows_without_any_score_keep_their_probabilities():
    # classes 0 and 1 are seen only at high p_c and class 2 never: a row low in p_0 and p_1 scores 0 everywhere
    p = torch.tensor([[0.8, 0.1, 0.1], [0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.2, 0.7, 0.1]], dtype=torch.float64)
    y = torch.tensor([0, 0, 1, 1])
    iso = IsotonicCalibration().fit(p, y)
    rows = torch.tensor([[0.15, 0.15, 0.7], [0.45, 0.45, 0.1]], dtype=torch.float64)
    # f_0(0.45) = f_1(0.45) = interpolation halfway between (0.2, 0) and (0.7, 1) = 0.5; f_2 = 0
    torch.testing.assert_close(iso.scores(rows), torch.tensor([[0.0, 0.0, 0.0], [0.5, 0.5, 0.0]], dtype=torch.float64))
    torch.testing.assert_close(iso.transform(rows), torch.tensor([[0.15, 0.15, 0.7], [0.5, 0.5, 0.0]],
                                                                 dtype=torch.float64))


def test_state_round_trip_and_bad_input(tmp_path):
    p, y = make_probs(300, 3, seed=5)
    iso = IsotonicCalibration().fit(p, y)
    torch.save(iso.state_dict(), tmp_path / "iso.pt")
    other = IsotonicCalibration()
    other.load_state_dict(torch.load(tmp_path / "iso.pt"))
    torch.testing.assert_close(other.transform(p), iso.transform(p), atol=0, rtol=0)
    with pytest.raises(ValueError, match="at least 3 fitting samples for K = 3, got N = 2"):
        IsotonicCalibration().fit(p[:2], y[:2])
    with pytest.raises(ValueError, match="K = 3 classes"):
        iso.transform(torch.full((2, 4), 0.25, dtype=torch.float64))
    with pytest.raises(ValueError, match="NaN or inf"):
        iso.transform(torch.tensor([[float("nan"), 0.5, 0.5]], dtype=torch.float64))
    with pytest.raises(ValueError, match="sum to 1"):
        IsotonicCalibration().fit(p * 0.9, y)
    with pytest.raises(ValueError, match="increasing knots"):
        other.load_state_dict({"x": [torch.tensor([0.5, 0.2]), torch.tensor([0.1])],
                               "f": [torch.tensor([0.0, 1.0]), torch.tensor([0.3])]})
