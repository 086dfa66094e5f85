"""Raw inputs → model-ready tensors, with the arithmetic of a bundle's evaluation transform.

Images (bundles with input_shape (C, H, W)): uint8 0..255 (scaled by 1/255 as torchvision's
``ToDtype(float32, scale=True)``) or float in [0, 1], shaped (N, H, W) when C = 1, (N, C, H, W) or (N, H, W, C);
then (x − mean) / std per channel (``Normalize``). Other bundles (sequences, feature vectors): (N, *input_shape)
numbers, returned as float32 unchanged (their loaders yield the stored inputs as they are).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .bundle import DataBundle, DataSubset
from .image_datasets import VectorDataset


def to_unit(images: torch.Tensor) -> torch.Tensor:
    """uint8 → float32 in [0, 1] with torchvision's arithmetic (``ToDtype(float32, scale=True)``: x · (1/255))."""
    return images.to(torch.float32).mul_(1.0 / 255)


def normalise(bundle: DataBundle, images: torch.Tensor) -> torch.Tensor:
    """(x − mean) / std per channel, torchvision ``Normalize``'s arithmetic in the images' dtype."""
    mean = torch.as_tensor(bundle.mean, dtype=images.dtype).view(-1, 1, 1)
    std = torch.as_tensor(bundle.std, dtype=images.dtype).view(-1, 1, 1)
    return images.sub(mean).div_(std)


def _as_tensor(raw: Any) -> torch.Tensor:
    if isinstance(raw, torch.Tensor):
        return raw.detach().cpu()
    array = np.asarray(raw)
    if array.dtype.kind not in "biuf":
        raise ValueError(f"inputs must be numbers, got dtype {array.dtype}")
    return torch.from_numpy(np.ascontiguousarray(array))


def _channels_first(x: torch.Tensor, shape: tuple[int, int, int]) -> torch.Tensor:
    c, h, w = shape
    want = f"(N, {h}, {w}), (N, 1, {h}, {w}) or (N, {h}, {w}, 1)" if c == 1 else f"(N, {c}, {h}, {w}) or (N, {h}, {w}, {c})"
    if x.dim() == 3 and c == 1 and tuple(x.shape[1:]) == (h, w):
        return x.unsqueeze(1)
    if x.dim() == 4 and tuple(x.shape[1:]) == (c, h, w):
        return x
    if x.dim() == 4 and tuple(x.shape[1:]) == (h, w, c):
        return x.permute(0, 3, 1, 2)
    raise ValueError(f"images must have shape {want} for this model; got {tuple(x.shape)}")


def model_inputs(bundle: DataBundle, raw: Any) -> torch.Tensor:
    """``raw`` (numpy array or tensor) as the model's inputs for ``bundle`` (rules in the module docstring)."""
    x = _as_tensor(raw)
    shape = tuple(int(v) for v in bundle.input_shape)
    stored = bundle.val.dataset if isinstance(bundle.val, DataSubset) else bundle.val
    if len(shape) != 3 or isinstance(stored, VectorDataset):
        if tuple(x.shape[1:]) != shape or x.dim() != len(shape) + 1:
            raise ValueError(f"inputs must have shape (N, {', '.join(map(str, shape))}); got {tuple(x.shape)}")
        return x.to(torch.float32)
    x = _channels_first(x, shape)  # type: ignore[arg-type]
    if x.dtype == torch.uint8:
        unit = to_unit(x)
    elif x.is_floating_point():
        unit = x.to(torch.float32)
        if unit.numel() and not (float(unit.min()) >= 0.0 and float(unit.max()) <= 1.0):
            raise ValueError(f"float images must be in [0, 1] (got {float(unit.min()):g}..{float(unit.max()):g}); "
                             "pass uint8 0..255 or divide by 255")
    else:
        raise ValueError(f"images must be uint8 0..255 or float in [0, 1], got {x.dtype}")
    return normalise(bundle, unit.contiguous())
