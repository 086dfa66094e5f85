"""Corruption functions: severity 0 is the identity, damage grows with severity, shapes/range preserved."""

import pytest
import torch

from experiments.ablations.corruptions import (BRIGHTNESS, CORRUPTIONS, SEVERITIES, brightness, contrast, corrupt,
                                           gaussian_blur, gaussian_kernel1d, pixelate)


@pytest.fixture(scope="module")
def images():
    gen = torch.Generator().manual_seed(0)
    base = torch.rand(16, 1, 28, 28, generator=gen)
    # structured images (smooth blobs + edges) so blur and pixelation have something to destroy
    yy, xx = torch.meshgrid(torch.arange(28.0), torch.arange(28.0), indexing="ij")
    blob = torch.exp(-((xx - 14) ** 2 + (yy - 10) ** 2) / 30.0)
    return (0.15 + 0.6 * blob + 0.25 * (base > 0.5).float() * (xx > 14).float()).clamp(0, 1)


@pytest.mark.parametrize("name", list(CORRUPTIONS))
def test_severity_zero_is_identity(images, name):
    assert torch.allclose(corrupt(images, name, 0), images, atol=1e-6)


@pytest.mark.parametrize("name", list(CORRUPTIONS))
def test_shape_dtype_range_preserved(images, name):
    for sev in SEVERITIES:
        out = corrupt(images, name, sev)
        assert out.shape == images.shape and out.dtype == images.dtype
        assert float(out.min()) >= 0 and float(out.max()) <= 1
    rgb = torch.rand(3, 3, 32, 32, dtype=torch.float64)
    assert corrupt(rgb, name, 3).shape == rgb.shape


@pytest.mark.parametrize("name", list(CORRUPTIONS))
def test_damage_increases_with_severity(images, name):
    dist = [float((corrupt(images, name, s, seed=0) - images).abs().mean()) for s in (0,) + SEVERITIES]
    assert all(b > a for a, b in zip(dist, dist[1:])), dist


def test_hand_computed_values():
    x = torch.tensor([[[[0.2, 0.6], [0.4, 0.8]]]])
    assert torch.allclose(brightness(x, 3), (x + BRIGHTNESS[3]).clamp(0, 1))
    c = contrast(x, 1)  # mean 0.5, factor 0.4
    assert torch.allclose(c, torch.tensor([[[[0.38, 0.54], [0.46, 0.62]]]]))
    assert float(c.mean()) == pytest.approx(0.5)
    const = torch.full((2, 1, 28, 28), 0.3)
    assert torch.allclose(gaussian_blur(const, 5), const, atol=1e-6)  # blur keeps constant images
    assert torch.allclose(pixelate(const, 5), const, atol=1e-6)
    k = gaussian_kernel1d(1.0)
    assert float(k.sum()) == pytest.approx(1.0) and torch.allclose(k, k.flip(0))


def test_noise_is_reproducible_and_errors_are_clear(images):
    assert torch.equal(corrupt(images, "gaussian_noise", 2, seed=5), corrupt(images, "gaussian_noise", 2, seed=5))
    with pytest.raises(ValueError, match="unknown corruption"):
        corrupt(images, "fog", 1)
    with pytest.raises(ValueError, match="severity"):
        corrupt(images, "contrast", 6)
    with pytest.raises(ValueError, match="float tensor"):
        corrupt(images[0], "contrast", 1)
