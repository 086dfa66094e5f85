"""Image corruptions for the dataset-shift study (Karandikar et al. 2021, §5.3, after Hendrycks & Dietterich 2019's
CIFAR-10-C), applied on the fly to float images in [0, 1] of shape (N, C, H, W), any device/dtype.

Severity 0 is the identity; 1…5 follow the CIFAR-10-C parameter ladders (scaled to 28×28 where the
parameter is in pixels). Every function returns a new tensor of the same shape, clipped to [0, 1].
"""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F

NOISE_STD = (0.0, 0.08, 0.12, 0.18, 0.26, 0.38)  # Gaussian noise σ (CIFAR-10-C)
BLUR_SIGMA = (0.0, 0.5, 0.75, 1.0, 1.5, 2.0)  # Gaussian blur σ in pixels
CONTRAST = (1.0, 0.4, 0.3, 0.2, 0.1, 0.05)  # factor on the deviation from the image mean
BRIGHTNESS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)  # added to every pixel
PIXELATE = (1, 2, 3, 4, 5, 6)  # block size in pixels (CIFAR-10-C down-samples by 0.6…0.25)

SEVERITIES = (1, 2, 3, 4, 5)


def _check(images: torch.Tensor, severity: int) -> None:
    if images.dim() != 4 or not images.is_floating_point():
        raise ValueError(f"images must be a float tensor (N, C, H, W), got {images.dtype} {tuple(images.shape)}")
    if severity not in range(6):
        raise ValueError(f"severity must be an integer 0..5, got {severity!r}")


def gaussian_noise(images: torch.Tensor, severity: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """x + σ_s·ε, ε ~ N(0, 1) per pixel (``generator`` on the images' device for reproducible noise)."""
    _check(images, severity)
    eps = torch.randn(images.shape, generator=generator, device=images.device, dtype=images.dtype)
    return (images + NOISE_STD[severity] * eps).clamp(0, 1)


def gaussian_kernel1d(sigma: float, dtype=torch.float32, device=None) -> torch.Tensor:
    radius = max(1, math.ceil(3 * sigma))
    x = torch.arange(-radius, radius + 1, dtype=dtype, device=device)
    k = torch.exp(-x * x / (2 * sigma * sigma))
    return k / k.sum()


def gaussian_blur(images: torch.Tensor, severity: int) -> torch.Tensor:
    """Separable Gaussian blur with σ_s pixels, reflect padding, per channel."""
    _check(images, severity)
    if severity == 0:
        return images.clone()
    n, c, h, w = images.shape
    k = gaussian_kernel1d(BLUR_SIGMA[severity], images.dtype, images.device)
    r = (len(k) - 1) // 2
    x = images.reshape(n * c, 1, h, w)
    mode = "reflect" if r < min(h, w) else "replicate"
    x = F.conv2d(F.pad(x, (r, r, 0, 0), mode=mode), k.view(1, 1, 1, -1))
    x = F.conv2d(F.pad(x, (0, 0, r, r), mode=mode), k.view(1, 1, -1, 1))
    return x.reshape(n, c, h, w).clamp(0, 1)


def contrast(images: torch.Tensor, severity: int) -> torch.Tensor:
    """(x − m)·c_s + m with m the per-image mean over channels and pixels."""
    _check(images, severity)
    m = images.mean(dim=(1, 2, 3), keepdim=True)
    return ((images - m) * CONTRAST[severity] + m).clamp(0, 1)


def brightness(images: torch.Tensor, severity: int) -> torch.Tensor:
    """x + b_s, clipped (for grey images the same as CIFAR-10-C's shift of HSV value)."""
    _check(images, severity)
    return (images + BRIGHTNESS[severity]).clamp(0, 1)


def pixelate(images: torch.Tensor, severity: int) -> torch.Tensor:
    """Every b_s × b_s block replaced by its mean (edge blocks padded by replication), b_s = 1…6 pixels."""
    _check(images, severity)
    b = PIXELATE[severity]
    if b == 1:
        return images.clone()
    h, w = images.shape[-2:]
    ph, pw = (-h) % b, (-w) % b
    padded = F.pad(images, (0, pw, 0, ph), mode="replicate") if ph or pw else images
    means = F.avg_pool2d(padded, kernel_size=b, stride=b)
    up = means.repeat_interleave(b, dim=-2).repeat_interleave(b, dim=-1)
    return up[..., :h, :w].clamp(0, 1)


CORRUPTIONS: dict[str, Callable[..., torch.Tensor]] = {
    "gaussian_noise": gaussian_noise, "gaussian_blur": gaussian_blur, "contrast": contrast,
    "brightness": brightness, "pixelate": pixelate,
}


def corrupt(images: torch.Tensor, name: str, severity: int, seed: int = 0) -> torch.Tensor:
    """Apply corruption ``name`` at ``severity`` (noise drawn from a generator seeded by ``seed``)."""
    if name not in CORRUPTIONS:
        raise ValueError(f"unknown corruption {name!r}; available: {', '.join(CORRUPTIONS)}")
    if name == "gaussian_noise":
        gen = torch.Generator(device=images.device).manual_seed(seed)
        return gaussian_noise(images, severity, gen)
    return CORRUPTIONS[name](images, severity)
