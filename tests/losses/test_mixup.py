"""Mixup: λ = 1 is the primary, mixed inputs λx + (1−λ)x[π], seeded reproducibility, Beta(α, α) draws."""

import pytest
import torch
from scipy import stats

from metacal import losses


def _batch(n=8, k=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, k, generator=g, dtype=torch.float64), torch.randint(0, k, (n,), generator=g)


def test_lambda_one_and_no_extra_equal_primary():
    z, y = _batch()
    for primary, params in [("ce", {}), ("focal", {"gamma": 2.0})]:
        mix = losses.build("mixup", primary=primary, primary_params=params)
        ref = losses.build(primary, **params)(z, y)
        torch.testing.assert_close(mix(z, y), ref)
        torch.testing.assert_close(mix(z, y, targets_b=y.flip(0), lam=1.0), ref)


def test_forward_is_convex_combination_per_sample():
    z, y = _batch()
    yb = (y + 1) % 3
    mix = losses.build("mixup", reduction="none")
    ce = losses.build("ce", reduction="none")
    out = mix(z, y, targets_b=yb, lam=0.3)
    assert out.shape == (8,)
    torch.testing.assert_close(out, 0.3 * ce(z, y) + 0.7 * ce(z, yb))


def test_prepare_batch_mixes_inputs_with_returned_permutation():
    x = torch.randn(6, 2, 4, 4)
    y = torch.arange(6)  # targets_b = y[π] = π
    mix = losses.build("mixup", alpha=1.0, seed=3)
    mixed, extra = mix.prepare_batch(x, y)
    lam, perm = extra["lam"], extra["targets_b"]
    assert 0.0 <= lam <= 1.0 and sorted(perm.tolist()) == list(range(6))
    torch.testing.assert_close(mixed, lam * x + (1 - lam) * x[perm])


def test_seeded_reproducibility_and_state_dict_resume():
    x, y = torch.randn(10, 3), torch.arange(10)
    a, b, c = (losses.build("mixup", seed=s) for s in (7, 7, 8))
    draws_a = [a.prepare_batch(x, y) for _ in range(3)]
    draws_b = [b.prepare_batch(x, y) for _ in range(3)]
    draws_c = [c.prepare_batch(x, y) for _ in range(3)]
    for (xa, ea), (xb, eb) in zip(draws_a, draws_b):
        torch.testing.assert_close(xa, xb)
        assert ea["lam"] == eb["lam"] and torch.equal(ea["targets_b"], eb["targets_b"])
    assert [e["lam"] for _, e in draws_a] != [e["lam"] for _, e in draws_c]
    # resume: state saved after 3 draws gives the same 4th draw
    resumed = losses.build("mixup", seed=0)
    resumed.load_state_dict(a.state_dict())
    (_, e1), (_, e2) = a.prepare_batch(x, y), resumed.prepare_batch(x, y)
    assert e1["lam"] == e2["lam"] and torch.equal(e1["targets_b"], e2["targets_b"])


@pytest.mark.parametrize("alpha", [0.4, 1.0])
def test_lambda_follows_beta_alpha_alpha(alpha):
    mix = losses.build("mixup", alpha=alpha, seed=11)
    lams = [mix.sample_lambda() for _ in range(2000)]
    assert stats.kstest(lams, stats.beta(alpha, alpha).cdf).pvalue > 1e-3
    assert losses.build("mixup", alpha=0.0).sample_lambda() == 1.0


def test_bad_alpha_and_missing_lam():
    with pytest.raises(ValueError, match="alpha"):
        losses.build("mixup", alpha=-1.0)
    z, y = _batch()
    with pytest.raises(ValueError, match="lam"):
        losses.build("mixup")(z, y, targets_b=y)
