"""Corruption families: severity 0 is an exact copy, damage grows with severity, hand-checked values, seeding."""

import math

import pytest
import torch

from metacal.data.corruptions import (BRIGHTNESS, CONTRAST, IMPULSE_AMOUNT, SEVERITIES, brightness, contrast, corrupt,
                                      families, gaussian_blur, gaussian_kernel1d, pixelate, random_families)
from metacal.data.corruptions_geometric import TRANSLATE_PIXELS, ZOOM, rotate, shift_pixels, translate, zoom


@pytest.fixture(scope="module")
def images():
    gen = torch.Generator().manual_seed(0)
    base = torch.rand(16, 1, 28, 28, generator=gen)
    # structured images (a smooth off-centre blob + edges) so blur, pixelation and geometry have something to move
    yy, xx = torch.meshgrid(torch.arange(28.0), torch.arange(28.0), indexing="ij")
    blob = torch.exp(-((xx - 14) ** 2 + (yy - 10) ** 2) / 30.0)
    return (0.15 + 0.6 * blob + 0.25 * (base > 0.5).float() * (xx > 14).float()).clamp(0, 1)


def test_the_nine_built_in_families_come_first_in_fixed_order():
    assert families()[:9] == ["gaussian_noise", "impulse_noise", "gaussian_blur", "pixelate", "contrast",
                                 "brightness", "rotate", "translate", "zoom"]


@pytest.mark.parametrize("name", families())
def test_severity_zero_is_an_exact_copy(images, name):
    out = corrupt(images, name, 0, seed=3)
    assert torch.equal(out, images) and out.data_ptr() != images.data_ptr()


@pytest.mark.parametrize("name", families())
def test_shape_dtype_range_preserved(images, name):
    for sev in SEVERITIES:
        out = corrupt(images, name, sev)
        assert out.shape == images.shape and out.dtype == images.dtype
        assert float(out.min()) >= 0 and float(out.max()) <= 1
    rgb = torch.rand(3, 3, 32, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    out = corrupt(rgb, name, 3)
    assert out.shape == rgb.shape and out.dtype == torch.float64


@pytest.mark.parametrize("name", families())
def test_damage_increases_with_severity(images, name):
    dist = [float((corrupt(images, name, s, seed=0) - images).abs().mean()) for s in (0,) + SEVERITIES]
    assert dist[0] == 0.0 and all(b > a for a, b in zip(dist, dist[1:])), dist


@pytest.mark.parametrize("name", random_families())
def test_random_families_are_seeded(images, name):
    a, b = corrupt(images, name, 3, seed=5), corrupt(images, name, 3, seed=5)
    assert torch.equal(a, b)
    assert not torch.equal(a, corrupt(images, name, 3, seed=6))


def test_deterministic_families_ignore_the_seed(images):
    for name in set(families()) - set(random_families()):
        assert torch.equal(corrupt(images, name, 4, seed=0), corrupt(images, name, 4, seed=9))


def test_brightness_contrast_blur_pixelate_by_hand():
    x = torch.tensor([[[[0.2, 0.6], [0.4, 0.8]]]])
    assert torch.allclose(brightness(x, 3), (x + BRIGHTNESS[3]).clamp(0, 1))
    assert torch.allclose(brightness(x, 5), torch.tensor([[[[0.7, 1.0], [0.9, 1.0]]]]))  # 0.6 + 0.5 clipped
    c = contrast(x, 1)  # mean 0.5, factor 0.4: 0.5 + 0.4 (x − 0.5)
    assert torch.allclose(c, torch.tensor([[[[0.38, 0.54], [0.46, 0.62]]]]))
    const = torch.full((2, 1, 28, 28), 0.3)
    for s in SEVERITIES:  # a constant image has no contrast to lose, no edge to blur, no block to average
        assert torch.allclose(contrast(const, s), const, atol=1e-7)
        assert torch.allclose(gaussian_blur(const, s), const, atol=1e-6)
        assert torch.allclose(pixelate(const, s), const, atol=1e-6)
    k = gaussian_kernel1d(1.0)  # radius 3: 7 taps, exp(−x²/2)/Σ
    assert len(k) == 7 and float(k.sum()) == pytest.approx(1.0)
    assert float(k[3] / k[4]) == pytest.approx(math.exp(0.5))
    blocks = torch.arange(16.0).view(1, 1, 4, 4) / 16
    assert torch.allclose(pixelate(blocks, 1)[0, 0, :2, :2], torch.full((2, 2), 2.5 / 16))  # mean of 0, 1, 4, 5
    assert CONTRAST[0] == 1.0 and BRIGHTNESS[0] == 0.0


def test_impulse_noise_sets_the_expected_fraction():
    x = torch.full((4, 3, 32, 32), 0.5)
    for s in SEVERITIES:
        out = corrupt(x, "impulse_noise", s, seed=1)
        assert set(out.unique().tolist()) <= {0.0, 0.5, 1.0}
        changed = float((out != 0.5).float().mean())
        assert changed == pytest.approx(IMPULSE_AMOUNT[s], abs=0.01)  # 12,288 values: ±0.01 is > 3 s.e.
        assert float((out == 0).float().mean()) == pytest.approx(IMPULSE_AMOUNT[s] / 2, abs=0.01)


def test_rotate_quarter_turn_is_rot90():
    x = torch.rand(2, 3, 28, 28, generator=torch.Generator().manual_seed(2))
    assert torch.allclose(rotate(x, 5), torch.rot90(x, 1, dims=(-2, -1)), atol=1e-5)  # severity 5 = 90°
    rect = torch.rand(1, 1, 20, 32, generator=torch.Generator().manual_seed(3))  # H ≠ W: centre kept, corners black
    out = rotate(rect, 3)
    assert out.shape == rect.shape and float(out[0, 0, 0, 0]) == 0.0


def test_translate_shifts_pixels_exactly():
    x = torch.rand(64, 1, 28, 28, generator=torch.Generator().manual_seed(4))
    k = TRANSLATE_PIXELS[2]  # 4 pixels at 28×28
    out = translate(x, 2, torch.Generator().manual_seed(0))
    shifts = [shift_pixels(x, 0, k), shift_pixels(x, 0, -k), shift_pixels(x, k, 0), shift_pixels(x, -k, 0)]
    kinds = [[i for i, s in enumerate(shifts) if torch.equal(out[n], s[n])] for n in range(len(x))]
    assert all(len(kind) == 1 for kind in kinds)
    assert len({kind[0] for kind in kinds}) == 4  # all four directions occur among 64 images
    right = shift_pixels(x[:1], 0, 3)
    assert torch.equal(right[..., 3:], x[:1, ..., :-3]) and float(right[..., :3].abs().sum()) == 0.0
    assert float(shift_pixels(x[:1], 28, 0).abs().sum()) == 0.0


def test_zoom_magnifies_about_the_centre():
    yy, xx = torch.meshgrid(torch.arange(28.0), torch.arange(28.0), indexing="ij")
    ramp = (xx / 27).view(1, 1, 28, 28)  # a horizontal ramp: magnified by z, its slope is divided by z
    out = zoom(ramp, 4)
    z = ZOOM[4]
    centre = out[0, 0, 14, 10:18]
    slope = float((centre[-1] - centre[0]) / 7)
    assert slope == pytest.approx(1 / (27 * z), rel=1e-4)
    assert torch.allclose(out[0, 0, :, 13] + out[0, 0, :, 14], torch.ones(28), atol=1e-5)  # symmetric about 13.5


def test_bad_input_raises_one_line():
    x = torch.rand(2, 1, 8, 8)
    with pytest.raises(ValueError, match="did you mean gaussian_blur"):
        corrupt(x, "gaussian_blurr", 1)
    with pytest.raises(ValueError, match="severity must be an integer 0..5"):
        corrupt(x, "contrast", 6)
    with pytest.raises(ValueError, match="float tensor"):
        corrupt(x[0], "rotate", 1)
    with pytest.raises(ValueError, match="float tensor"):
        corrupt((x * 255).to(torch.uint8), "brightness", 1)
