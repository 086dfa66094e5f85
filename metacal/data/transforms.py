"""Image pipelines: paper augmentation (Wang & Golebiowski 2024, §4: random crop with 4-pixel zero padding + horizontal
flip) on the training view only; evaluation views are only scaled to [0, 1] and normalised.

Inputs are uint8 tensors (C, H, W). Cropping and flipping act on the uint8 image, so the padding is
black pixels (value 0) before normalisation, as with the usual PIL pipeline.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch
from torchvision.transforms import v2

Transform = Callable[[torch.Tensor], torch.Tensor]


def eval_transform(mean: Sequence[float], std: Sequence[float]) -> Transform:
    """uint8 (C,H,W) → float32 ``(x/255 − mean)/std``."""
    return v2.Compose([v2.ToDtype(torch.float32, scale=True), v2.Normalize(list(mean), list(std))])


def train_transform(mean: Sequence[float], std: Sequence[float], crop: int, padding: int = 4,
                    flip: bool = True) -> Transform:
    """Random ``crop``×``crop`` crop of the zero-padded image (+ horizontal flip with p=0.5), then as eval."""
    steps: list = [v2.RandomCrop(crop, padding=padding, fill=0)]
    if flip:
        steps.append(v2.RandomHorizontalFlip(0.5))
    steps += [v2.ToDtype(torch.float32, scale=True), v2.Normalize(list(mean), list(std))]
    return v2.Compose(steps)


def image_views(mean: Sequence[float], std: Sequence[float], crop: int, flip: bool,
                augment: bool = True) -> tuple[Transform, Transform]:
    """``(train_transform, eval_transform)``; with ``augment=False`` both are the eval transform."""
    plain = eval_transform(mean, std)
    return (train_transform(mean, std, crop, flip=flip) if augment else plain), plain
