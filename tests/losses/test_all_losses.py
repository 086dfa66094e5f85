"""Every registered loss: finite values and gradients for |logits| up to 1e4, batch of 1, all-correct and
all-wrong batches, ``reduction="none"`` shape (N,), hooks callable, and gradcheck in float64."""

import pytest
import torch

from metacal import losses

K, FEAT = 4, 3
GAMMA_FREE = {"focal", "dual_focal", "inverse_focal", "focal_gra", "dual_focal_gra"}
NAMES = losses.available()
# GRA losses: by design ∇ℓ = u·∇CE is NOT the derivative of ℓ's value (Lin et al. 2025, eq. 9); their gradient
# is checked against u·∇CE in test_uncertainty_weighted.py instead of by finite differences.
NOT_CONSERVATIVE = {"bsce_gra", "focal_gra", "dual_focal_gra"}


def _make(name, reduction="mean", dtype=torch.float64):
    params = {"reduction": reduction}
    if name == "ce_learnable_l2":
        params["weight_shape"] = (K, FEAT)
        params["init"] = 0.1
    if name == "primary_plus_secondary":
        params["secondary"] = "mdca"
    return losses.build(name, **params).to(dtype)


def _extra(name, targets, dtype):
    if name == "ce_learnable_l2":
        g = torch.Generator().manual_seed(1)
        return {"head_weight": torch.randn(K, FEAT, generator=g, dtype=dtype),
                "head_bias": torch.randn(K, generator=g, dtype=dtype)}
    if name == "mixup":
        return {"targets_b": targets.roll(1), "lam": 0.3}
    return {}


def _cases(dtype):
    g = torch.Generator().manual_seed(0)
    n = 8
    y = torch.randint(0, K, (n,), generator=g)
    big = 1e4 * torch.randn(n, K, generator=g, dtype=dtype)
    onehot = torch.nn.functional.one_hot(y, K).to(dtype)
    return {
        "random": (torch.randn(n, K, generator=g, dtype=dtype), y),
        "huge": (big, y),
        "all_correct_saturated": (1e4 * onehot, y),
        "all_wrong_saturated": (1e4 * onehot.roll(1, dims=1), y),
        "all_correct_mild": (3 * onehot, y),
        "all_wrong_mild": (3 * onehot.roll(1, dims=1), y),
        "equal_logits": (torch.zeros(n, K, dtype=dtype), y),
        "batch_of_1": (torch.tensor([[2.0, -1.0, 0.5, 0.0]], dtype=dtype), y[:1]),
        "batch_of_1_huge": (torch.tensor([[-1e4, 1e4, 0.0, 5e3]], dtype=dtype), y[:1]),
    }


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", NAMES)
def test_finite_values_and_gradients(name, dtype):
    for case, (z0, y) in _cases(dtype).items():
        for reduction in ("mean", "none"):
            loss = _make(name, reduction, dtype)
            z = z0.clone().requires_grad_(True)
            extra = _extra(name, y, dtype)
            if name in GAMMA_FREE:
                extra["gamma"] = torch.linspace(0.0, 3.0, z.shape[0], dtype=dtype).requires_grad_(True)
            value = loss(z, y, **extra)
            expected_shape = () if reduction == "mean" else (z.shape[0],)
            assert value.shape == expected_shape, (case, reduction)
            assert torch.isfinite(value).all(), (name, case, reduction, value)
            inputs = [z] + ([extra["gamma"]] if "gamma" in extra else []) + list(loss.meta_parameters())
            grads = torch.autograd.grad(value.sum(), inputs, allow_unused=True)
            for gr in grads:
                assert gr is None or torch.isfinite(gr).all(), (name, case, reduction)
            assert grads[0] is not None


@pytest.mark.parametrize("name", NAMES)
def test_mean_is_mean_of_none(name):
    z, y = _cases(torch.float64)["random"]
    extra = _extra(name, y, torch.float64)
    torch.testing.assert_close(_make(name, "mean")(z, y, **extra), _make(name, "none")(z, y, **extra).mean())


@pytest.mark.parametrize("name", NAMES)
def test_hooks_are_callable(name):
    loss = _make(name)
    z, y = _cases(torch.float64)["random"]
    loss.set_epoch(3)
    x = torch.randn(8, 5)
    mixed, extra = loss.prepare_batch(x, y)
    assert mixed.shape == x.shape and isinstance(extra, dict)
    if name == "adafocal":
        z = torch.randn(40, K)
        y = torch.randint(0, K, (40,))
    loss.update_from_validation(z, y)
    assert isinstance(loss.meta_parameters(), list)


@pytest.mark.parametrize("name", NAMES)
def test_gradcheck_float64(name):
    if name in NOT_CONSERVATIVE:
        pytest.skip("gradient deliberately differs from the value's derivative (GRA)")
    g = torch.Generator().manual_seed(5)
    z = torch.randn(5, K, generator=g, dtype=torch.float64).requires_grad_(True)
    y = torch.tensor([0, 1, 2, 3, 1])
    loss = _make(name, "none")
    extra = _extra(name, y, torch.float64)
    assert torch.autograd.gradcheck(lambda t: loss(t, y, **extra), (z,))


NAN, INF = float("nan"), float("inf")
#: (loss, parameters, the message): a weight, rate or exponent that is NaN, infinite or of the wrong sign is
#: refused when the loss is built (a run would otherwise train on NaN losses, or reward miscalibration)
BAD_PARAMETERS = [
    ("adafocal", {"lam": NAN}, "adafocal lam must be a finite number >= 0, got nan"),
    ("adafocal", {"switch_threshold": -0.2}, "adafocal switch_threshold must be a finite number >= 0, got -0.2"),
    ("avuc", {"beta": NAN}, "beta must be a finite number >= 0, got nan"),
    ("mdca", {"beta": -2.0}, "beta must be a finite number >= 0, got -2.0"),
    ("sbece", {"beta": INF}, "beta must be a finite number >= 0, got inf"),
    ("primary_plus_secondary", {"secondary": "mmce", "beta": -1.0}, "beta must be a finite number >= 0, got -1.0"),
    ("bsce", {"gamma": NAN}, "bsce needs beta > 0 and gamma >= 0, got beta=2.0, gamma=nan"),
    ("bsce_gra", {"beta": INF}, "bsce needs beta > 0 and gamma >= 0, got beta=inf, gamma=2.0"),
    ("mixup", {"alpha": NAN}, "mixup alpha must be >= 0 (0 disables mixing), got nan"),
    ("l1_logit_norm", {"alpha": -1.0}, "l1_logit_norm alpha must be a finite number >= 0, got -1.0"),
    ("l1_logit_norm", {"alpha": NAN}, "l1_logit_norm alpha must be a finite number >= 0, got nan"),
    ("label_smoothing", {"epsilon": NAN}, "label smoothing epsilon must be in [0, 1], got nan"),
    ("mbls", {"alpha": NAN}, "mbls alpha must be >= 0, got nan"),
    ("focal", {"gamma": NAN}, "gamma must be finite; got nan"),
]


@pytest.mark.parametrize("name, params, message", BAD_PARAMETERS, ids=[f"{n}-{p}" for n, p, _ in BAD_PARAMETERS])
def test_a_parameter_outside_its_range_is_refused_when_built(name, params, message):
    with pytest.raises(ValueError) as info:
        losses.build(name, **params)
    assert str(info.value) == message
