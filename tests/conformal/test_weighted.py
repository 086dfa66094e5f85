"""Weighted split conformal under covariate shift (Tibshirani et al. 2019): hand-computed quantiles, equal weights
give back split conformal exactly, the true likelihood ratio restores the coverage a shift breaks, and the domain
classifier's ratio matches the known one on Gaussians."""

from __future__ import annotations

import math

import pytest
import torch

from metacal.conformal import (ConformalPredictor, conformal_quantile, domain_weights, set_metrics,
                               weighted_quantiles)
from metacal.conformal.evaluation import SetRequest, set_columns, shift_weights


@pytest.mark.parametrize("test_weight, alpha, expected", [
    # calibration scores 0.1 … 0.4 with weights 1 … 4 (total 10): the first score whose cumulative weight reaches
    # (1 − α)(10 + w), else +∞
    (2.0, 0.2, 0.4),      # need 9.6: cumulative 1, 3, 6, 10
    (0.5, 0.2, 0.4),      # need 8.4
    (2.0, 0.5, 0.3),      # need 6.0, reached exactly at the third
    (1.0, 0.5, 0.3),      # need 5.5
    (10.0, 0.2, math.inf),  # need 16 > 10: the mass at +∞
    (0.0, 0.0001, 0.4),   # no mass at +∞: need 9.999, the largest score
    (0.0, 0.5, 0.3),      # need 5.0
])
def test_hand_computed_quantiles(test_weight, alpha, expected):
    scores = torch.tensor([0.3, 0.1, 0.4, 0.2])  # unsorted: the weights follow their scores
    weights = torch.tensor([3.0, 1.0, 4.0, 2.0])
    q = weighted_quantiles(scores, weights, torch.tensor([test_weight]), alpha)
    assert q.tolist() == pytest.approx([expected])


@pytest.mark.parametrize("n, alpha", [(n, a) for n in (4, 9, 10, 19, 57, 1000) for a in (0.05, 0.1, 0.2)
                                      if n >= math.ceil(1 / a) - 1])  # the smallest n of each α included
def test_equal_weights_are_split_conformal(n, alpha):
    scores = torch.rand(n, generator=torch.Generator().manual_seed(n))
    for w in (1.0, 0.37):  # any common scale
        q = weighted_quantiles(scores, torch.full((n,), w), torch.full((5,), w), alpha)
        assert q.tolist() == [conformal_quantile(scores, alpha)] * 5


def test_equal_weight_sets_equal_the_unweighted_sets():
    gen = torch.Generator().manual_seed(0)
    cal = torch.softmax(2 * torch.randn(300, 6, generator=gen), 1)
    labels = torch.randint(0, 6, (300,), generator=gen)
    test = torch.softmax(2 * torch.randn(200, 6, generator=gen), 1)
    for score in ("thr", "aps", "raps"):
        p = ConformalPredictor(score, 0.1).fit(cal, labels)
        assert torch.equal(p.predict_set(test, weights=(torch.ones(300), torch.ones(200))), p.predict_set(test))


A = torch.tensor([[3.0, 0.0], [-1.5, 2.6], [-1.5, -2.6]], dtype=torch.float64)
MU = torch.tensor([2.0, 0.0], dtype=torch.float64)


def draw(n: int, shifted: bool, gen: torch.Generator):
    """Three classes with P(y | x) = softmax(Ax); calibration inputs around MU (easy), test inputs around 0 (where
    the classes overlap); the model is a poor one, softmax(0.3·Ax + b)."""
    x = torch.randn(n, 2, generator=gen, dtype=torch.float64) + (MU if shifted else 0)
    y = torch.multinomial(torch.softmax(x @ A.T, 1), 1, generator=gen).squeeze(1)
    probs = torch.softmax(0.3 * x @ A.T + torch.tensor([0.0, 0.8, 0.8], dtype=torch.float64), 1)
    return x, probs, y


def true_ratio(x: torch.Tensor) -> torch.Tensor:
    """dN(0, I)/dN(MU, I)."""
    return torch.exp(-x @ MU + MU @ MU / 2)


def test_the_likelihood_ratio_restores_coverage_under_covariate_shift():
    """200 draws of 500 calibration and 500 test points: unweighted THR sets lose coverage on the harder test
    region; with the true ratio (and with the domain classifier's) the mean coverage is 1 − α within Monte-Carlo
    error (4 standard errors)."""
    alpha, reps = 0.1, 200
    cov = {"plain": [], "true": [], "estimated": []}
    for r in range(reps):
        gen = torch.Generator().manual_seed(r)
        xc, pc, yc = draw(500, True, gen)
        xt, pt, yt = draw(500, False, gen)
        p = ConformalPredictor("thr", alpha).fit(pc, yc)
        for name, weights in (("plain", None), ("true", (true_ratio(xc), true_ratio(xt))),
                              ("estimated", domain_weights(xc, xt))):
            cov[name].append(set_metrics(p.predict_set(pt, weights=weights), yt)["coverage"])
    mean = {k: float(torch.tensor(v).mean()) for k, v in cov.items()}
    se = {k: float(torch.tensor(v).std()) / reps ** 0.5 for k, v in cov.items()}
    assert mean["plain"] < 1 - alpha - 0.1, mean  # the guarantee broken (about 0.77)
    for name in ("true", "estimated"):
        assert abs(mean[name] - (1 - alpha)) < 4 * se[name] + 0.005, (name, mean, se)


def test_domain_weights_recover_a_gaussian_likelihood_ratio():
    """Equal-covariance Gaussians: the log ratio is linear, so the logistic model is well specified."""
    gen = torch.Generator().manual_seed(0)
    xc = torch.randn(20000, 2, generator=gen, dtype=torch.float64) + MU
    xt = torch.randn(10000, 2, generator=gen, dtype=torch.float64)
    w_cal, w_test = domain_weights(xc, xt)
    assert w_cal.shape == (20000,) and w_test.shape == (10000,)
    truth = true_ratio(xt)
    inside = (truth > 0.1) & (truth < 10)  # away from the clip at [1/99, 99]
    # the fitted log ratio is linear like the truth; 0.2 is the sampling error of 30,000 points at |log w| ≈ 2.3
    assert torch.allclose(w_test[inside].log(), truth[inside].log(), atol=0.2)
    assert float((w_test[inside].log() - truth[inside].log()).abs().mean()) < 0.05
    assert float(w_cal.min()) >= 1 / 99 - 1e-12 and float(w_cal.max()) <= 99 + 1e-12


def test_weighted_sets_from_the_evaluation_path_use_the_domain_weights():
    gen = torch.Generator().manual_seed(3)
    cal = torch.softmax(torch.randn(400, 5, generator=gen, dtype=torch.float64), 1)
    labels = torch.randint(0, 5, (400,), generator=gen)
    test = torch.softmax(2 * torch.randn(300, 5, generator=gen, dtype=torch.float64), 1)
    test_labels = torch.randint(0, 5, (300,), generator=gen)
    predictor = ConformalPredictor("aps", 0.1).fit(cal, labels)
    weights = shift_weights(True, cal, test)
    assert shift_weights(False, cal, test) is None
    got = set_columns({"uncalibrated": predictor}, {"uncalibrated": test}, test_labels, weights=weights)
    expected = set_metrics(predictor.predict_set(test, weights=weights), test_labels)
    assert got["uncalibrated"]["coverage"] == expected["coverage"]
    assert got["uncalibrated"]["size_mean"] != set_metrics(predictor.predict_set(test), test_labels)["size_mean"]


@pytest.mark.parametrize("call, message", [
    (lambda p: p.predict_set(torch.ones(3, 4) / 4, weights=(torch.ones(50), torch.ones(2))), "one test weight"),
    (lambda p: p.predict_set(torch.ones(3, 4) / 4, weights=(torch.ones(49), torch.ones(3))), "one weight per"),
    (lambda p: p.predict_set(torch.ones(3, 4) / 4, weights=(-torch.ones(50), torch.ones(3))), "non-negative"),
    (lambda p: domain_weights(torch.ones(5, 2), torch.ones(5, 3)), "same D"),
    (lambda p: SetRequest("thr", 0.1, mondrian=True, weighted=True).check(), "weighted or mondrian"),
])
def test_bad_weights_are_one_line(call, message):
    gen = torch.Generator().manual_seed(0)
    p = ConformalPredictor("thr", 0.1).fit(torch.softmax(torch.randn(50, 4, generator=gen), 1),
                                           torch.randint(0, 4, (50,), generator=gen))
    with pytest.raises(ValueError, match=message) as err:
        call(p)
    assert len(str(err.value).splitlines()) == 1


def test_the_quantile_is_infinite_exactly_when_the_test_weight_exceeds_alpha_of_the_rest():
    """(1 − α)(W + w) > W ⇔ w > α·W / (1 − α): the rule the prediction-set pages count full sets by."""
    gen = torch.Generator().manual_seed(1)
    scores, w_cal = torch.rand(200, generator=gen), torch.rand(200, generator=gen) * 3
    w_test = torch.linspace(0, 150, 1001, dtype=torch.float64)  # the bound is about 76
    q = weighted_quantiles(scores, w_cal, w_test, 0.2)
    bound = 0.2 * float(w_cal.double().sum()) / 0.8
    assert torch.equal(torch.isinf(q), w_test > bound)
    assert 0 < int(torch.isinf(q).sum()) < 1001
