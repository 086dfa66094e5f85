"""Grid-evaluated SECE against the exact metric; Pearson r against numpy and scipy; the gradient weights."""

import numpy as np
import pytest
import torch
from scipy import stats

from metacal import losses, metrics
from experiments.ablations.correlation import pearson
from experiments.ablations.estimators import ESTIMATORS, sece_grid
from experiments.ablations.grad_weighting import per_sample_gradients, weight_stats


@pytest.mark.parametrize("n", [500, 3000])
def test_sece_grid_matches_exact_metric(n):
    gen = torch.Generator().manual_seed(n)
    conf = 0.1 + 0.9 * torch.rand(n, generator=gen, dtype=torch.float64)
    correct = (torch.rand(n, generator=gen, dtype=torch.float64) < conf**1.5).double()
    exact = float(metrics.sece_metric_from_confidence(conf, correct))
    assert sece_grid(conf, correct) == pytest.approx(exact, abs=1e-6)
    assert sece_grid(conf, correct, bandwidth=0.05) == pytest.approx(
        float(metrics.sece_metric_from_confidence(conf, correct, 0.05)), abs=1e-6)


def test_estimators_on_perfectly_calibrated_large_sample_are_small():
    gen = torch.Generator().manual_seed(0)
    n = 8_000
    conf = 0.5 + 0.5 * torch.rand(n, generator=gen, dtype=torch.float64)
    correct = torch.rand(n, generator=gen, dtype=torch.float64) < conf
    labels = torch.where(correct, 0, 1)
    probs = torch.stack([conf, 1 - conf], 1)
    values = {k: f(probs, labels) for k, f in ESTIMATORS.items()}
    assert all(np.isfinite(v) and 0 <= v < 0.04 for v in values.values()), values


def test_pearson_matches_numpy_and_scipy():
    rng = np.random.default_rng(0)
    x = rng.normal(size=1000)
    y = 0.3 * x + rng.normal(size=1000)
    r = pearson(torch.from_numpy(x), torch.from_numpy(y))
    assert r == pytest.approx(np.corrcoef(x, y)[0, 1], abs=1e-12)
    assert r == pytest.approx(stats.pearsonr(x, y).statistic, abs=1e-12)
    assert pearson(torch.arange(5.0), 2 * torch.arange(5.0) + 1) == pytest.approx(1.0)
    assert pearson(torch.arange(5.0), -torch.arange(5.0)) == pytest.approx(-1.0)


def test_pearson_edge_cases():
    assert np.isnan(pearson(torch.ones(4), torch.arange(4.0)))
    with pytest.raises(ValueError):
        pearson(torch.ones(3), torch.ones(4))


def test_ce_gradient_is_p_minus_onehot_and_weight_one():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(64, 5, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 5, (64,), generator=gen)
    g = per_sample_gradients(losses.build("ce", reduction="none"), logits, y)
    expected = torch.softmax(logits, 1) - torch.nn.functional.one_hot(y, 5).double()
    assert torch.allclose(g, expected, atol=1e-12)
    post = torch.softmax(torch.randn(64, 5, generator=gen, dtype=torch.float64), 1)
    s = weight_stats(losses.build("ce", reduction="none"), logits, y, post)
    assert torch.allclose(s["weight"], torch.ones(64, dtype=torch.float64))


def test_bsce_gra_weight_is_the_brier_score_and_true_brier_formula():
    """BSCE-GRA (β = γ = 2): ∇_z ℓ = ‖e_y − p‖²·(p − e_y), so weight = Brier score exactly (Lin et al. 2025, eq. 9)."""
    gen = torch.Generator().manual_seed(1)
    logits = 2 * torch.randn(200, 4, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 4, (200,), generator=gen)
    post = torch.softmax(torch.randn(200, 4, generator=gen, dtype=torch.float64), 1)
    s = weight_stats(losses.build("bsce_gra", reduction="none"), logits, y, post)
    assert torch.allclose(s["weight"], s["brier"], atol=1e-10)
    # E_{y~η} ‖e_y − p‖², summed explicitly over the classes
    p = torch.softmax(logits, 1)
    explicit = sum(post[:, k] * (torch.nn.functional.one_hot(torch.full((200,), k), 4).double() - p).square().sum(1)
                   for k in range(4))
    assert torch.allclose(s["true_brier"], explicit, atol=1e-12)
    assert torch.allclose(s["true_unc"], 1 - post.max(1).values)


def test_spearman_matches_scipy_with_ties():
    from experiments.ablations.correlation import ranks, spearman

    rng = np.random.default_rng(3)
    x = rng.integers(0, 20, size=300).astype(float)  # many ties
    y = x + rng.normal(size=300)
    assert torch.allclose(ranks(torch.from_numpy(x)), torch.from_numpy(stats.rankdata(x)))
    assert spearman(torch.from_numpy(x), torch.from_numpy(y)) == pytest.approx(stats.spearmanr(x, y).statistic,
                                                                               abs=1e-12)
    z = torch.linspace(0.01, 2, 50)
    assert spearman(z, z**1.5) == pytest.approx(1.0)  # monotone but curved: ρ = 1, r < 1
    assert pearson(z, z**1.5) < 1 - 1e-3


def test_gradient_norms_are_exact_functions_of_brier():
    gen = torch.Generator().manual_seed(2)
    logits = 2 * torch.randn(100, 6, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 6, (100,), generator=gen)
    post = torch.softmax(torch.randn(100, 6, generator=gen, dtype=torch.float64), 1)
    ce = weight_stats(losses.build("ce", reduction="none"), logits, y, post)
    assert torch.allclose(ce["grad_norm"], ce["brier"].sqrt(), atol=1e-12)
    gra = weight_stats(losses.build("bsce_gra", reduction="none"), logits, y, post)
    assert torch.allclose(gra["grad_norm"], gra["brier"] ** 1.5, atol=1e-10)
