"""Image corruptions for dataset-shift evaluation (Hendrycks & Dietterich, ICLR 2019, "Benchmarking neural network
robustness to common corruptions and perturbations"), applied to float images (N, C, H, W) in [0, 1], any device.

Severity 0 is the identity (an exact copy); 1…5 follow the ladders below (ImageNet-C's values for noise, contrast
and brightness; pixel sizes scaled to 28×28 images). Every function returns a new tensor of the same shape and
dtype, clipped to [0, 1]. Random families draw from a CPU generator seeded by ``seed`` (the same draws at every
severity, so damage grows monotonically per image), then move to the images' device: results do not depend on it.
Geometric families (rotate, translate, zoom) live in :mod:`metacal.data.corruptions_geometric`.

A family is one function and one :func:`corruption` call that registers it in :data:`CORRUPTIONS` (one's own too,
from a module of one's own); the ``corruptions`` shift suite (metacal/data/corruption_suite.py) reads the registry.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from metacal.registry import Registry, unknown_name

NOISE_STD = (0.0, 0.08, 0.12, 0.18, 0.26, 0.38)  # Gaussian noise σ (ImageNet-C gaussian_noise)
IMPULSE_AMOUNT = (0.0, 0.03, 0.06, 0.09, 0.17, 0.27)  # salt-and-pepper fraction of values (ImageNet-C impulse_noise)
BLUR_SIGMA = (0.0, 0.5, 0.75, 1.0, 1.5, 2.0)  # Gaussian blur σ in pixels (ImageNet-C's 1…6 px scaled to 28 px)
CONTRAST = (1.0, 0.4, 0.3, 0.2, 0.1, 0.05)  # factor on the deviation from the image mean (ImageNet-C contrast)
BRIGHTNESS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)  # added to every pixel (ImageNet-C brightness, on the HSV value)
PIXELATE = (1, 2, 3, 4, 5, 6)  # block size in pixels (ImageNet-C down-samples by 0.6…0.25)

SEVERITIES = (1, 2, 3, 4, 5)

Family = Callable[..., torch.Tensor]  # (images, severity[, generator]) → corrupted images


@dataclass(frozen=True)
class Corruption:
    """One family: ``apply(images, severity)`` (and a CPU generator where ``random``: it draws random numbers);
    ``fit``: a fit family of the ``corruptions`` suite (one per group: noise, blur, photometric, geometric), which
    a shift-aware calibrator may see; the others are held out for judging."""

    apply: Family
    random: bool = False
    fit: bool = False


#: every family by name; registered in the fixed order of the ``corruptions`` suite (:func:`families`)
CORRUPTIONS: Registry[Corruption] = Registry("corruption")


def corruption(name: str, random: bool = False, fit: bool = False) -> Callable[[Family], Family]:
    """Register the decorated function as corruption family ``name`` (after those registered before it)."""

    def add(apply: Family) -> Family:
        CORRUPTIONS.register(name)(Corruption(apply, random, fit))  # type: ignore[arg-type]
        return apply

    return add


def families() -> list[str]:
    """Every family's name, in the order registered: the ``corruptions`` suite's fixed order."""
    return [name for name, _ in CORRUPTIONS.entries()]


def check_images(images: torch.Tensor, severity: int) -> None:
    """One-line ValueError unless ``images`` is a float (N, C, H, W) tensor and ``severity`` is 0..5."""
    if not isinstance(images, torch.Tensor) or images.dim() != 4 or not images.is_floating_point():
        got = f"{images.dtype} {tuple(images.shape)}" if isinstance(images, torch.Tensor) else type(images).__name__
        raise ValueError(f"images must be a float tensor (N, C, H, W), got {got}")
    if isinstance(severity, bool) or not isinstance(severity, int) or severity not in range(6):
        raise ValueError(f"severity must be an integer 0..5, got {severity!r}")


def _uniform_like(images: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    return torch.rand(images.shape, generator=generator).to(images.device, images.dtype)


@corruption("gaussian_noise", random=True, fit=True)
def gaussian_noise(images: torch.Tensor, severity: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """x + σ_s·ε, ε ~ N(0, 1) per value, drawn in float32 from the CPU ``generator``."""
    check_images(images, severity)
    if severity == 0:
        return images.clone()
    eps = torch.randn(images.shape, generator=generator).to(images.device, images.dtype)
    return (images + NOISE_STD[severity] * eps).clamp(0, 1)


@corruption("impulse_noise", random=True)
def impulse_noise(images: torch.Tensor, severity: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Salt and pepper: with u ~ U(0, 1) per value, u < a/2 → 0, a/2 ≤ u < a → 1 (a = ``IMPULSE_AMOUNT[s]``)."""
    check_images(images, severity)
    if severity == 0:
        return images.clone()
    a = IMPULSE_AMOUNT[severity]
    u = _uniform_like(images, generator)
    out = torch.where(u < a / 2, torch.zeros_like(images), images)
    return torch.where((u >= a / 2) & (u < a), torch.ones_like(images), out)


def gaussian_kernel1d(sigma: float, dtype: torch.dtype = torch.float32, device=None) -> torch.Tensor:
    """exp(−x²/2σ²) on x = −r…r, r = max(1, ⌈3σ⌉), normalised to sum 1."""
    radius = max(1, math.ceil(3 * sigma))
    x = torch.arange(-radius, radius + 1, dtype=dtype, device=device)
    k = torch.exp(-x * x / (2 * sigma * sigma))
    return k / k.sum()


@corruption("gaussian_blur", fit=True)
def gaussian_blur(images: torch.Tensor, severity: int) -> torch.Tensor:
    """Separable Gaussian blur with σ_s pixels, reflect padding (replicate when the kernel outgrows the image)."""
    check_images(images, severity)
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


@corruption("pixelate")
def pixelate(images: torch.Tensor, severity: int) -> torch.Tensor:
    """Every b_s × b_s block replaced by its mean (edge blocks padded by replication), b_s = 1…6 pixels."""
    check_images(images, severity)
    b = PIXELATE[severity]
    if b == 1:
        return images.clone()
    h, w = images.shape[-2:]
    ph, pw = (-h) % b, (-w) % b
    padded = F.pad(images, (0, pw, 0, ph), mode="replicate") if ph or pw else images
    means = F.avg_pool2d(padded, kernel_size=b, stride=b)
    up = means.repeat_interleave(b, dim=-2).repeat_interleave(b, dim=-1)
    return up[..., :h, :w].clamp(0, 1)


@corruption("contrast", fit=True)
def contrast(images: torch.Tensor, severity: int) -> torch.Tensor:
    """(x − m)·c_s + m with m the per-image mean over channels and pixels."""
    check_images(images, severity)
    if severity == 0:
        return images.clone()
    m = images.mean(dim=(1, 2, 3), keepdim=True)
    return ((images - m) * CONTRAST[severity] + m).clamp(0, 1)


@corruption("brightness")
def brightness(images: torch.Tensor, severity: int) -> torch.Tensor:
    """x + b_s, clipped (for grey images the same as ImageNet-C's shift of the HSV value)."""
    check_images(images, severity)
    if severity == 0:
        return images.clone()
    return (images + BRIGHTNESS[severity]).clamp(0, 1)


def random_families() -> tuple[str, ...]:
    """The families that draw random numbers (:func:`corrupt`'s ``seed`` matters only for these)."""
    return tuple(name for name, family in CORRUPTIONS.entries() if family.random)


def corrupt(images: torch.Tensor, name: str, severity: int, seed: int = 0) -> torch.Tensor:
    """Corruption ``name`` at ``severity`` 0..5; random families draw from ``torch.Generator().manual_seed(seed)``."""
    if name not in CORRUPTIONS:
        raise ValueError(unknown_name("corruption", name, families()))
    family = CORRUPTIONS.get(name)
    if family.random:
        return family.apply(images, severity, torch.Generator().manual_seed(int(seed)))
    return family.apply(images, severity)
