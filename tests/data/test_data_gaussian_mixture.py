"""Gaussian mixture: true posteriors equal Bayes' rule on the generating densities (scipy oracle) and the
Bayes classifier is calibrated."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.special import logsumexp
from scipy.stats import multivariate_normal

import metacal.data as data


def scipy_posteriors(x: np.ndarray, means: np.ndarray, sigma: float, priors: np.ndarray) -> np.ndarray:
    joint = np.stack([multivariate_normal(mean=m, cov=sigma**2 * np.eye(len(m))).logpdf(x) for m in means], 1)
    joint += np.log(priors)
    return np.exp(joint - logsumexp(joint, axis=1, keepdims=True))


def ece_15(conf: torch.Tensor, correct: torch.Tensor, bins: int = 15) -> float:
    """Equal-width 15-bin ECE = Σ_b (n_b/N)|acc_b − conf_b| (Guo et al. 2017), bins (lo, hi]."""
    conf, correct = conf.double(), correct.double()
    edges = torch.linspace(0, 1, bins + 1, dtype=torch.float64)
    b = torch.bucketize(conf, edges[1:-1])  # index i with edges[i] < conf <= edges[i+1]
    gap = (torch.bincount(b, correct, minlength=bins) - torch.bincount(b, conf, minlength=bins)).abs()
    return (gap.sum() / len(conf)).item()  # Σ_b (n_b/N)·|Σ correct − Σ conf|/n_b


@pytest.mark.parametrize("options", [
    {},  # defaults: K=10, d=10 (simplex layout), uniform priors
    {"num_classes": 4, "dim": 3, "separation": 2.0, "sigma": 0.7, "priors": [0.1, 0.2, 0.3, 0.4]},  # polygon
    {"num_classes": 3, "dim": 1, "separation": 1.5, "priors": [0.5, 0.25, 0.25]},  # line
])
def test_posteriors_match_scipy_bayes_rule(options):
    b = data.build("gaussian_mixture", seed=4, n_train=500, n_test=400, **options)
    means, sigma, priors = b.info["means"].numpy(), b.info["sigma"], b.info["priors"].numpy()
    for split in (b.train, b.val, b.test):
        x = torch.stack([split[i][0] for i in range(len(split))]).reshape(len(split), -1).double().numpy()
        expected = scipy_posteriors(x, means, sigma, priors)
        np.testing.assert_allclose(split.posteriors.numpy(), expected, atol=2e-6, rtol=0)
    assert b.test.posteriors.shape == (400, b.num_classes)
    assert b.input_shape == (1, b.info["means"].shape[1]) and b.test[0][0].shape == b.input_shape


@pytest.mark.parametrize("k, d", [(10, 10), (5, 8), (6, 2)])
def test_means_have_the_requested_separation(k, d):
    b = data.build("gaussian_mixture", num_classes=k, dim=d, separation=2.5, n_train=10, n_test=10)
    means = b.info["means"]
    dist = torch.cdist(means, means)
    if d >= k:  # simplex: every pair at the separation
        off = dist[~torch.eye(k, dtype=torch.bool)]
        torch.testing.assert_close(off, torch.full_like(off, 2.5))
    else:  # polygon: neighbours at the separation
        nbr = torch.stack([dist[i, (i + 1) % k] for i in range(k)])
        torch.testing.assert_close(nbr, torch.full_like(nbr, 2.5))


def test_samples_follow_the_stated_generative_model():
    priors = [0.1, 0.2, 0.3, 0.4]
    b = data.build("gaussian_mixture", seed=1, num_classes=4, dim=3, sigma=0.5, priors=priors,
                   n_train=100, n_test=40_000)
    x, y = b.test.dataset.inputs.reshape(-1, 3).double(), b.test.targets
    freq = torch.bincount(y, minlength=4).double() / len(y)
    torch.testing.assert_close(freq, torch.tensor(priors, dtype=torch.float64), atol=0.01, rtol=0)
    for k in range(4):
        xs = x[y == k]
        torch.testing.assert_close(xs.mean(0), b.info["means"][k], atol=0.02, rtol=0)
        torch.testing.assert_close(xs.std(0), torch.full((3,), 0.5, dtype=torch.float64), atol=0.02, rtol=0)


def test_bayes_classifier_is_calibrated_and_a_sharpened_one_is_not():
    b = data.build("gaussian_mixture", seed=0, n_train=100, n_test=200_000)
    post, y = b.test.posteriors.double(), b.test.targets
    conf, pred = post.max(1)
    correct = (pred == y)
    bayes_ece = ece_15(conf, correct)
    # sampling noise alone gives about Σ_b (n_b/N)·√(2/π)·√(p(1−p)/n_b) ≈ 0.003 at N = 200,000
    assert bayes_ece < 0.006
    assert abs(correct.double().mean().item() - conf.mean().item()) < 0.004
    assert 0.6 < correct.double().mean().item() < 0.8  # default separation: Bayes error ≈ 0.3
    sharp = torch.softmax(2.0 * post.log(), dim=1)  # temperature 0.5: overconfident, same predictions
    sharp_conf, sharp_pred = sharp.max(1)
    assert torch.equal(sharp_pred, pred)
    assert ece_15(sharp_conf, correct) > 0.05


def test_deterministic_by_seed_and_splits():
    a = data.build("gaussian_mixture", seed=3, n_train=200, n_test=50)
    b = data.build("gaussian_mixture", seed=3, n_train=200, n_test=50)
    c = data.build("gaussian_mixture", seed=4, n_train=200, n_test=50)
    assert torch.equal(a.test.dataset.inputs, b.test.dataset.inputs)
    assert torch.equal(a.train.posteriors, b.train.posteriors)
    assert not torch.equal(a.test.dataset.inputs, c.test.dataset.inputs)
    assert a.sizes() == {"train": 160, "val": 20, "meta_val": 20, "test": 50}
    # the test set does not depend on the training-set size
    d = data.build("gaussian_mixture", seed=3, n_train=300, n_test=50)
    assert torch.equal(a.test.dataset.inputs, d.test.dataset.inputs)


@pytest.mark.parametrize("bad", [{"priors": [0.5, 0.5]}, {"sigma": 0.0}, {"num_classes": 1}, {"n_test": 0}])
def test_bad_options_raise(bad):
    with pytest.raises(ValueError):
        data.build("gaussian_mixture", **bad)
