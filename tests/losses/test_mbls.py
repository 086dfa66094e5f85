"""MbLS (Liu et al. 2022): a hand value, limiting cases (λ = 0 or a margin no gap reaches: CE), an independent
numpy oracle of eq. 7 and its gradient, and bad parameters."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from metacal import losses

D = torch.float64


def test_hand_value():
    # z = (12, 0, 1), y = 0, m = 10: gaps 0, 12, 11 → relu(gap − 10) = 0, 2, 1, mean 1; CE = −ln softmax_0
    z = torch.tensor([[12.0, 0.0, 1.0]], dtype=D)
    ce = -np.log(np.exp(12) / (np.exp(12) + 1 + np.exp(1)))
    assert losses.build("mbls")(z, torch.tensor([0])).item() == pytest.approx(ce + 0.1 * 1.0, rel=1e-12)
    assert losses.build("mbls", alpha=0.5, margin=11.5)(z, torch.tensor([2])).item() == pytest.approx(
        -np.log(np.exp(1) / (np.exp(12) + 1 + np.exp(1))) + 0.5 * 0.5 / 3, rel=1e-12)


def test_limiting_cases_are_cross_entropy():
    g = torch.Generator().manual_seed(0)
    z, y = 3 * torch.randn(16, 10, generator=g, dtype=D), torch.randint(0, 10, (16,), generator=g)
    ce = F.cross_entropy(z, y)
    torch.testing.assert_close(losses.build("mbls", alpha=0.0)(z, y), ce)
    wide = float((z.max(1).values[:, None] - z).max()) + 1.0  # no gap exceeds the margin
    torch.testing.assert_close(losses.build("mbls", margin=wide)(z, y), ce)


def test_matches_a_numpy_oracle_value_and_gradient():
    g = torch.Generator().manual_seed(1)
    z = (8 * torch.randn(32, 7, generator=g, dtype=D)).requires_grad_(True)
    y = torch.randint(0, 7, (32,), generator=g)
    loss = losses.build("mbls", margin=6.0, alpha=0.3, reduction="none")
    values = loss(z, y)
    zn, yn = z.detach().numpy(), y.numpy()
    logp = zn - np.log(np.exp(zn - zn.max(1, keepdims=True)).sum(1, keepdims=True)) - zn.max(1, keepdims=True)
    gaps = zn.max(1, keepdims=True) - zn
    oracle = -logp[np.arange(32), yn] + 0.3 * np.maximum(gaps - 6.0, 0).mean(1)
    np.testing.assert_allclose(values.detach().numpy(), oracle, rtol=1e-12, atol=1e-12)
    # gradient of the penalty: for j with gap > m, −λ/K on z_j and +λ/K on the top logit (distinct logits here)
    (grad,) = torch.autograd.grad(values.sum(), z)
    p = np.exp(logp)
    expected = p - np.eye(7)[yn]
    over = (gaps > 6.0).astype(float) * 0.3 / 7
    expected -= over
    expected[np.arange(32), zn.argmax(1)] += over.sum(1)
    np.testing.assert_allclose(grad.numpy(), expected, rtol=1e-10, atol=1e-12)


def test_defaults_and_bad_parameters():
    loss = losses.build("mbls")
    assert (loss.margin, loss.alpha) == (10.0, 0.1)
    for params, message in (({"margin": -1.0}, "margin must be >= 0"), ({"alpha": -0.1}, "alpha must be >= 0")):
        with pytest.raises(ValueError, match=message):
            losses.build("mbls", **params)
