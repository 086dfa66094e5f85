"""γ-Net (Wang & Golebiowski 2024, eq. 4–5): shape, positivity, start value γ ≈ init_gamma, detached features, formula."""

import functools
import math

import pytest
import torch

from metacal.meta import OUTPUT_MAPS, GammaNet
from metacal.models import build as build_model


@functools.lru_cache(maxsize=1)
def _resnet_features(n=128, seed=0):
    """Penultimate features of the project's small_resnet on random 28×28 images (ReLU + avg-pool, d=64)."""
    torch.manual_seed(seed)
    model = build_model("small_resnet", num_classes=10, in_channels=1)
    model.train()
    with torch.no_grad():
        _, feats = model(torch.randn(n, 1, 28, 28), return_features=True)
    return feats


def resnet_features():
    return _resnet_features().clone()


@pytest.mark.parametrize("output", OUTPUT_MAPS)
def test_shape_and_positivity(output):
    net = GammaNet(7, 4, output=output)
    with torch.no_grad():  # push the pre-activation across 0 so every branch of each map is exercised
        net.weight.normal_(0.0, 1.0)
    x = torch.randn(50, 7) * 3
    gamma = net(x)
    assert gamma.shape == (50,)
    assert torch.all(gamma >= 0)
    r = net.pre_activation(x)
    assert (r < 0).any() and (r > 0).any()
    if output == "sigmoid":
        assert torch.all(gamma <= net.gamma_max)


@pytest.mark.parametrize("output", OUTPUT_MAPS)
@pytest.mark.parametrize("init_gamma", [1.0, 2.0])
@pytest.mark.parametrize("scale", [1.0, 100.0])
def test_start_value_on_resnet_features(output, init_gamma, scale):
    feats = resnet_features() * scale
    torch.manual_seed(1)
    net = GammaNet(feats.shape[1], 10, output=output, init_gamma=init_gamma)
    gamma = net(feats).detach()
    assert abs(float(gamma.mean()) - init_gamma) < 0.05 * init_gamma
    # every sample starts close, not only the mean: spread of x̃W is ≤ ~0.02·τ → |γ − γ₀| ≲ 0.1
    assert float((gamma - init_gamma).abs().max()) < 0.15


def test_hand_derived_values():
    """d = k = 2, A = I, W = (1, −1), b = 0, τ = 0.01: x = (a, a) → p = (½, ½), x̃W = 0 → γ = 0;
    x = (100, 0) → p ≈ (1, 0), x̃ = (1, 0) → γ = 1/τ = 100."""
    net = GammaNet(2, 2).double()
    with torch.no_grad():
        net.attention.copy_(torch.eye(2))
        net.weight.copy_(torch.tensor([1.0, -1.0]))
        net.bias.zero_()
    gamma = net(torch.tensor([[3.0, 3.0], [100.0, 0.0]], dtype=torch.float64)).detach()
    assert gamma[0] == 0
    assert math.isclose(float(gamma[1]), 100.0, rel_tol=1e-12)


def test_maps_of_the_same_pre_activation():
    net = GammaNet(5, 3, output="abs").double()
    x = torch.randn(9, 5, dtype=torch.float64)
    with torch.no_grad():
        net.weight.normal_()
    r = net.pre_activation(x)
    for output, expected in [
        ("abs", r.abs()),
        ("relu", r.clamp_min(0)),
        ("softplus", torch.log1p(torch.exp(r))),
        ("sigmoid", 5.0 / (1 + torch.exp(-r))),
    ]:
        net.output = output
        torch.testing.assert_close(net(x), expected, rtol=1e-12, atol=1e-12)


def test_features_detached_no_grad_reaches_backbone():
    torch.manual_seed(0)
    backbone = torch.nn.Linear(4, 6)
    net = GammaNet(6, 3)
    feats = backbone(torch.randn(10, 4))
    assert feats.requires_grad
    net(feats).sum().backward()
    assert backbone.weight.grad is None and backbone.bias.grad is None
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in net.parameters())


def test_bad_arguments():
    with pytest.raises(ValueError, match="output"):
        GammaNet(4, 2, output="tanh")
    with pytest.raises(ValueError, match="feature_dim"):
        GammaNet(0, 2)
    with pytest.raises(ValueError, match="sigmoid"):
        GammaNet(4, 2, output="sigmoid", init_gamma=6.0, gamma_max=5.0)
    with pytest.raises(ValueError, match=r"\(N, 4\)"):
        GammaNet(4, 2)(torch.randn(3, 5))
