"""Vector scaling: reduces to temperature scaling on class-symmetric data, recovers a known diagonal map,
never raises the fitting NLL, outputs probabilities, bad input."""

import pytest
import torch

from metacal.posthoc import TemperatureScaling, VectorScaling


def sample_labels(logits, generator):
    return torch.multinomial(torch.softmax(logits, 1), 1, generator=generator).squeeze(1)


def cyclic_copies(z, y):
    """Every sample with its K cyclic class relabellings: (roll(z, s), (y + s) mod K) for s = 0 … K−1."""
    k = z.shape[1]
    return (torch.cat([torch.roll(z, s, dims=1) for s in range(k)]),
            torch.cat([(y + s) % k for s in range(k)]))


def test_equal_scales_reduce_to_temperature_scaling():
    # On data that no relabelling of the classes changes, the convex VS objective has a minimiser with all
    # scales equal and b = 0 (average any minimiser over the K rotations); that is TS with w = 1/T.
    g = torch.Generator().manual_seed(0)
    z = torch.randn(400, 5, generator=g, dtype=torch.float64) * 2.0
    y = sample_labels(z / 2.5, g)  # calibrated at T = 2.5
    z, y = cyclic_copies(z, y)
    vs = VectorScaling().fit(z, y)
    s = float(vs.weight.mean())
    torch.testing.assert_close(vs.weight, torch.full((5,), s, dtype=torch.float64), atol=1e-9, rtol=0)
    torch.testing.assert_close(vs.bias, torch.zeros(5, dtype=torch.float64), atol=1e-9, rtol=0)
    # s is TS's optimum: d/ds mean CE(s·z, y) = (1/N) Σ_n Σ_k (softmax(s z_n)_k − 1[y_n = k]) z_nk = 0
    slope = ((torch.softmax(s * z, 1) - torch.nn.functional.one_hot(y, 5)) * z).sum(1).mean()
    assert abs(float(slope)) < 1e-6
    # TemperatureScaling's own L-BFGS stops at |dL/d log T| < 1e-7, about 1e-5 from the optimum in 1/T here
    t = TemperatureScaling("nll").fit(z, y).temperature
    assert s == pytest.approx(1 / t, abs=2e-5)
    assert s == pytest.approx(1 / 2.5, rel=0.15)  # labels drawn calibrated at T = 2.5


def test_recovers_a_known_diagonal_map():
    g = torch.Generator().manual_seed(1)
    w, b = torch.tensor([0.5, 1.0, 1.5, 2.0], dtype=torch.float64), torch.tensor([0.4, -0.2, 0.1, -0.3], dtype=torch.float64)
    z = torch.randn(40_000, 4, generator=g, dtype=torch.float64) * 1.5
    y = sample_labels(z * w + b, g)
    vs = VectorScaling().fit(z, y)
    # standard errors at N = 40,000 are ≈ 0.01–0.02 for w and b; 0.06 is about 4 of them
    torch.testing.assert_close(vs.weight, w, atol=0.06, rtol=0)
    torch.testing.assert_close(vs.bias, b - b.mean(), atol=0.06, rtol=0)  # b is returned with Σ b = 0
    assert abs(float(vs.bias.sum())) < 1e-10


def test_fit_lowers_nll_and_outputs_probabilities():
    for seed in range(4):
        g = torch.Generator().manual_seed(10 + seed)
        z = torch.randn(300, 6, generator=g, dtype=torch.float64) * float(torch.rand(1, generator=g) * 5 + 0.1)
        y = torch.randint(0, 6, (300,), generator=g)
        vs = VectorScaling().fit(z, y)
        q = vs.transform(z)
        nll_fit = torch.nn.functional.nll_loss(q.log(), y)
        assert nll_fit <= torch.nn.functional.cross_entropy(z, y) + 1e-12
        assert bool((q >= 0).all()) and torch.allclose(q.sum(1), torch.ones(300, dtype=torch.float64), atol=1e-12)


def test_intercept_penalty_shrinks_the_intercept():
    g = torch.Generator().manual_seed(2)
    z = torch.randn(2000, 3, generator=g, dtype=torch.float64)
    y = sample_labels(z + torch.tensor([1.0, 0.0, -1.0], dtype=torch.float64), g)
    free, shrunk = VectorScaling().fit(z, y), VectorScaling(reg_mu=10.0).fit(z, y)
    assert float(shrunk.bias.norm()) < 0.5 * float(free.bias.norm())
    assert free.bias[0] - free.bias[2] == pytest.approx(2.0, abs=0.25)


def test_bad_input():
    z = torch.randn(20, 4, dtype=torch.float64)
    y = torch.arange(20) % 4
    with pytest.raises(ValueError, match="at least 8 fitting samples"):
        VectorScaling().fit(z[:7], y[:7])
    bad = z.clone()
    bad[3, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN or inf in 1 row"):
        VectorScaling().fit(bad, y)
    bad[3, 1] = float("inf")
    with pytest.raises(ValueError, match="NaN or inf in 1 row"):
        VectorScaling().fit(z, y).transform(bad)
    vs = VectorScaling().fit(z, y)
    with pytest.raises(ValueError, match="K = 4 classes, got logits with K = 5"):
        vs.transform(torch.randn(3, 5, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="before fit"):
        VectorScaling().transform(z)
    with pytest.raises(ValueError, match="reg_mu"):
        VectorScaling(reg_mu=-1.0)
