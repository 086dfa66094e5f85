"""Calibration against known posteriors (metacal/metrics/true_posterior.py): a hand-computed table, limiting
cases and the bound gap ≤ TV."""

import numpy as np
import pytest
import torch

from metacal.metrics import bayes_error, posterior_gap, posterior_tv, true_posterior_summary


def test_by_hand():
    probs = torch.tensor([[0.7, 0.2, 0.1], [0.3, 0.3, 0.4]], dtype=torch.float64)
    post = torch.tensor([[0.5, 0.5, 0.0], [0.2, 0.2, 0.6]], dtype=torch.float64)
    # row 1: top class 0, |0.7 − 0.5| = 0.2; row 2: top class 2, |0.4 − 0.6| = 0.2
    assert posterior_gap(probs, post) == pytest.approx(0.2)
    # TV: ½(0.2 + 0.3 + 0.1) = 0.3; ½(0.1 + 0.1 + 0.2) = 0.2 → mean 0.25
    assert posterior_tv(probs, post) == pytest.approx(0.25)
    # Bayes error: 1 − mean(0.5, 0.6)
    assert bayes_error(post) == pytest.approx(0.45)
    assert true_posterior_summary(probs.numpy(), post.numpy()) == pytest.approx(
        {"posterior_gap": 0.2, "posterior_tv": 0.25, "bayes_error": 0.45})


def test_the_posterior_itself_scores_zero():
    post = torch.softmax(torch.randn(100, 5), dim=1)
    assert posterior_gap(post, post) == 0 and posterior_tv(post, post) == 0


def test_gap_is_at_most_tv():
    gen = np.random.default_rng(0)
    for _ in range(20):
        p, q = gen.dirichlet(np.ones(6), 50), gen.dirichlet(np.ones(6), 50)
        assert posterior_gap(p, q) <= posterior_tv(p, q) + 1e-12


def test_shapes_must_match():
    with pytest.raises(ValueError, match="both be N×K"):
        posterior_gap(torch.ones(3, 2) / 2, torch.ones(3, 3) / 3)
