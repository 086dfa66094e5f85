"""Geometric corruptions of float images (N, C, H, W) in [0, 1]: rotation, translation and zoom, the affine
perturbations of Hendrycks & Dietterich (ICLR 2019, ImageNet-P / CIFAR-10-P: rotate, translate, scale).

Severity 0 is the identity (an exact copy); 1…5 follow the ladders below. Pixels brought in from outside the
image are black (zero fill, as torchvision's ``RandomRotation``/``RandomAffine`` default ``fill=0``); affine
resampling is bilinear (``F.affine_grid`` + ``F.grid_sample``, ``align_corners=False``). Each family is registered
after those of :mod:`metacal.data.corruptions`, in the ``corruptions`` suite's order: rotate, translate, zoom.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .corruptions import check_images, corruption

#: rotation angle in degrees (counter-clockwise as displayed, the turn of ``torch.rot90(x, 1, (-2, -1))``);
#: steps of 15° as in rotated-MNIST shift studies (Ovadia et al., NeurIPS 2019), a quarter turn at severity 5
ROTATE_DEGREES = (0.0, 15.0, 30.0, 45.0, 60.0, 90.0)
#: shift in pixels of a 28-pixel side (scaled by side/28 and rounded for other sizes), in one of the four
#: axis directions drawn per image; 10 px moves a centred 28×28 object about a third of the way out
TRANSLATE_PIXELS = (0, 2, 4, 6, 8, 10)
#: magnification about the centre (the central 1/z of each side fills the image; nothing to fill);
#: ImageNet-P's scale perturbation zooms up to about ×1.6
ZOOM = (1.0, 1.1, 1.2, 1.35, 1.5, 1.75)


def _affine(images: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """Bilinear resampling at ``theta @ (x, y, 1)`` (normalised coordinates), zero fill outside."""
    n = images.shape[0]
    theta = theta.to(images.dtype).to(images.device).expand(n, 2, 3)
    grid = F.affine_grid(theta, list(images.shape), align_corners=False)
    out = F.grid_sample(images, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    return out.clamp(0, 1)


@corruption("rotate", fit=True)
def rotate(images: torch.Tensor, severity: int) -> torch.Tensor:
    """Turn every image by ``ROTATE_DEGREES[severity]`` about its centre (pixel-space rotation, so also for H ≠ W)."""
    check_images(images, severity)
    if severity == 0:
        return images.clone()
    h, w = images.shape[-2:]
    a = math.radians(ROTATE_DEGREES[severity])
    c, s = math.cos(a), math.sin(a)
    # normalised x spans w/2 pixels, y spans h/2: rotate in pixels, S⁻¹ R S in normalised coordinates
    theta = torch.tensor([[c, -s * h / w, 0.0], [s * w / h, c, 0.0]], dtype=torch.float64)
    return _affine(images, theta.unsqueeze(0))


def shift_pixels(images: torch.Tensor, dy: int, dx: int) -> torch.Tensor:
    """Exact integer shift: output[..., i, j] = input[..., i − dy, j − dx], zero where that is outside."""
    out = torch.zeros_like(images)
    h, w = images.shape[-2:]
    if abs(dy) >= h or abs(dx) >= w:
        return out
    src_y, dst_y = slice(max(0, -dy), h - max(0, dy)), slice(max(0, dy), h - max(0, -dy))
    src_x, dst_x = slice(max(0, -dx), w - max(0, dx)), slice(max(0, dx), w - max(0, -dx))
    out[..., dst_y, dst_x] = images[..., src_y, src_x]
    return out


#: the four directions of :func:`translate`, as (dy, dx) signs: right, left, down, up
DIRECTIONS = ((0, 1), (0, -1), (1, 0), (-1, 0))


@corruption("translate", random=True)
def translate(images: torch.Tensor, severity: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Shift each image by k pixels (``TRANSLATE_PIXELS`` scaled to the side) in a direction drawn per image from
    :data:`DIRECTIONS` with the CPU ``generator``; zero fill."""
    check_images(images, severity)
    if severity == 0:
        return images.clone()
    h, w = images.shape[-2:]
    ky, kx = (round(TRANSLATE_PIXELS[severity] * side / 28) for side in (h, w))
    which = torch.randint(len(DIRECTIONS), (images.shape[0],), generator=generator).to(images.device)
    out = torch.empty_like(images)
    for d, (sy, sx) in enumerate(DIRECTIONS):
        mask = which == d
        if bool(mask.any()):
            out[mask] = shift_pixels(images[mask], sy * ky, sx * kx)
    return out


@corruption("zoom")
def zoom(images: torch.Tensor, severity: int) -> torch.Tensor:
    """Magnify every image by z = ``ZOOM[severity]`` about its centre: output(p) = input(p / z), bilinear."""
    check_images(images, severity)
    if severity == 0:
        return images.clone()
    z = ZOOM[severity]
    theta = torch.tensor([[1.0 / z, 0.0, 0.0], [0.0, 1.0 / z, 0.0]], dtype=torch.float64)
    return _affine(images, theta.unsqueeze(0))
