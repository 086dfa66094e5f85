"""The true top-label calibration error (experiments.ablations.true_calibration) against closed forms.

2-class, 1-D mixture: x | y ~ N(±1, 1), equal priors ⇒ η₁(x) = P(y=1 | x) = σ(2x) and the Bayes accuracy is
Φ(1). Two models whose TRUE calibration error we derive by hand:

* temperature-distorted Bayes, p̂₁ = σ(2x/T): ŷ = sign(x) (Bayes decision), conf = σ(2|x|/T), and the
  probability the prediction is correct is c = σ(2|x|). conf is strictly increasing in |x|, so conditioning
  on conf = q fixes |x| = T·logit(q)/2 and E[c | conf = q] = σ(T·logit q). Hence
  TCE = ∫₀^∞ |σ(2a) − σ(2a/T)| f(a) da with f(a) = φ(a − 1) + φ(a + 1) the density of |x|.
* constant confidence q with the Bayes decision: conf ≡ q, so E[c | conf] = E[c] = Φ(1) and
  TCE = |Φ(1) − q|, while the per-input gap E|c − q| = ∫₀^∞ |σ(2a) − q| f(a) da is strictly larger —
  this case fails if the estimate conditions per x instead of on the confidence level.
"""

import math

import numpy as np
import pytest
import torch
from scipy import integrate, stats

from experiments.ablations.true_calibration import (binned_conditional_gap, tie_aware_mass_bins,
                                                true_calibration_error)
from metacal.data.gaussian_mixture import bayes_log_posteriors, class_means, sample

N = 400_000


@pytest.fixture(scope="module")
def two_class():
    means = class_means(2, 1, 2.0)  # (−1, +1)
    assert torch.allclose(means.flatten(), torch.tensor([-1.0, 1.0], dtype=torch.float64))
    priors = torch.tensor([0.5, 0.5], dtype=torch.float64)
    ds = sample(N, means, 1.0, priors, torch.Generator().manual_seed(123))
    log_post = bayes_log_posteriors(ds.inputs, means, 1.0, priors)
    return ds.inputs.reshape(-1).double(), log_post


def density_abs_x(a: float) -> float:
    return stats.norm.pdf(a - 1) + stats.norm.pdf(a + 1)


def sigmoid(t: float) -> float:
    return 1.0 / (1.0 + math.exp(-t))


def test_posterior_matches_closed_form(two_class):
    x, log_post = two_class
    assert torch.allclose(log_post.exp()[:, 1], torch.sigmoid(2 * x), atol=1e-6)


def test_true_posterior_model_has_zero_error(two_class):
    _, log_post = two_class
    t = true_calibration_error(log_post.exp(), log_post.exp())
    assert t.tce == pytest.approx(0.0, abs=1e-12)
    assert t.per_sample_bound == pytest.approx(0.0, abs=1e-12)
    assert t.accuracy == pytest.approx(stats.norm.cdf(1.0), abs=2e-3)  # Bayes accuracy Φ(1) = 0.8413


def test_true_posterior_model_ten_classes():
    means = class_means(10, 10, 3.0)
    priors = torch.full((10,), 0.1, dtype=torch.float64)
    ds = sample(50_000, means, 1.0, priors, torch.Generator().manual_seed(0))
    post = bayes_log_posteriors(ds.inputs, means, 1.0, priors).exp()
    assert true_calibration_error(post, post).tce == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("temperature", [0.5, 2.0])
def test_temperature_distortion_matches_analytic(two_class, temperature):
    _, log_post = two_class
    probs = torch.softmax(log_post / temperature, dim=1)
    exact, _ = integrate.quad(lambda a: abs(sigmoid(2 * a) - sigmoid(2 * a / temperature)) * density_abs_x(a),
                              0, np.inf)
    t = true_calibration_error(probs, log_post.exp())
    assert exact > 0.05  # a real miscalibration (T=0.5: 0.0893, T=2: 0.0994)
    assert t.tce == pytest.approx(exact, abs=1.5e-3)
    assert t.noise_floor < 1e-3
    # L2: TCE_2² = ∫ (σ(2a) − σ(2a/T))² f(a) da (the same conditioning argument)
    exact_sq, _ = integrate.quad(lambda a: (sigmoid(2 * a) - sigmoid(2 * a / temperature)) ** 2 * density_abs_x(a),
                                 0, np.inf)
    assert math.sqrt(exact_sq) > exact  # L2 ≥ L1 (Jensen), strictly for a non-constant gap
    assert t.tce_l2 == pytest.approx(math.sqrt(exact_sq), abs=1.5e-3)
    assert 0 < t.noise_floor_l2 < 1e-3
    # c is a function of conf here, so the per-input gap equals the conditional one
    assert t.per_sample_bound == pytest.approx(exact, abs=1.5e-3)


def test_constant_confidence_conditions_on_confidence_level(two_class):
    x, log_post = two_class
    q = 0.7
    p1 = torch.where(x > 0, torch.full_like(x, q), torch.full_like(x, 1 - q))
    probs = torch.stack([1 - p1, p1], dim=1)
    t = true_calibration_error(probs, log_post.exp())
    exact = abs(stats.norm.cdf(1.0) - q)  # 0.1413
    per_x, _ = integrate.quad(lambda a: abs(sigmoid(2 * a) - q) * density_abs_x(a), 0, np.inf)
    assert t.num_bins == 1  # one confidence value: one bin, never split
    assert t.tce == pytest.approx(exact, abs=2e-3)
    assert t.per_sample_bound == pytest.approx(per_x, abs=2e-3)
    assert per_x > exact + 0.02  # the per-x version would be wrong by > 2 points here


def test_ties_are_never_split():
    conf = torch.tensor([0.1, 0.2, 0.2, 0.2, 0.2, 0.3, 0.4, 0.4], dtype=torch.float64)
    idx = tie_aware_mass_bins(conf, 4)  # rank bins would be 0,0,1,1,2,2,3,3
    assert idx.tolist() == [0, 0, 0, 0, 0, 2, 3, 3]


def test_binned_gap_hand_computed():
    conf = torch.tensor([0.6, 0.6, 0.9, 0.9], dtype=torch.float64)
    c = torch.tensor([0.5, 0.9, 0.8, 0.8], dtype=torch.float64)
    gap, floor, used = binned_conditional_gap(conf, c, num_bins=2)
    # bin 1: mean c 0.7 vs 0.6 → 0.1; bin 2: 0.8 vs 0.9 → 0.1; weights ½ each
    assert gap == pytest.approx(0.1)
    assert used == 2
    # L2: sqrt(½·0.01 + ½·0.01) = 0.1; noise: Σ_b var_b(c − conf)/n = (0.04 + 0)/4 → sqrt(0.01 + 0.01) − 0.1
    gap_l2, floor_l2, _ = binned_conditional_gap(conf, c, num_bins=2, norm="l2")
    assert gap_l2 == pytest.approx(0.1) and floor_l2 == pytest.approx(math.sqrt(0.02) - 0.1)
    # noise floor: bin 1 sd 0.2 → ½·√(2/π)·0.2/√2; bin 2 sd 0
    assert floor == pytest.approx(0.5 * math.sqrt(2 / math.pi) * 0.2 / math.sqrt(2))


def test_binned_gap_never_exceeds_per_sample_gap():
    gen = torch.Generator().manual_seed(1)
    conf = torch.rand(5000, generator=gen, dtype=torch.float64)
    c = (conf + 0.3 * torch.randn(5000, generator=gen, dtype=torch.float64)).clamp(0, 1)
    for bins in (1, 10, 100, 5000):
        gap, _, _ = binned_conditional_gap(conf, c, bins)
        assert gap <= float((c - conf).abs().mean()) + 1e-12


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="differ in shape"):
        true_calibration_error(torch.full((3, 2), 0.5), torch.full((3, 3), 1 / 3))
