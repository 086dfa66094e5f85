"""Image pipelines: paper augmentation (Wang & Golebiowski 2024, §4: random crop with 4-pixel zero padding + horizontal
flip) on the training view only; evaluation views are only scaled to [0, 1] and normalised.

Inputs are uint8 tensors (C, H, W). Cropping and flipping act on the uint8 image, so the padding is
black pixels (value 0) before normalisation, as with the usual PIL pipeline. ``folder_views`` builds the
configurable pipeline of a user's ``image_folder`` (resize, centre / random crop, flip, normalise).

torchvision is imported where a pipeline is built, not with the module. Its import takes about 2 s on 2 CPU cores
(it loads ``torch._dynamo``): without it ``python -m metacal.train --help`` and a refused config answer in about
2 s instead of 4, and a run on vectors (MNIST-1D, arrays, the Gaussian mixture) starts 0.7 s sooner.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch

Transform = Callable[[torch.Tensor], torch.Tensor]


def eval_transform(mean: Sequence[float], std: Sequence[float]) -> Transform:
    """uint8 (C,H,W) → float32 ``(x/255 − mean)/std``."""
    from torchvision.transforms import v2

    return v2.Compose([v2.ToDtype(torch.float32, scale=True), v2.Normalize(list(mean), list(std))])


def train_transform(mean: Sequence[float], std: Sequence[float], crop: int, padding: int = 4,
                    flip: bool = True) -> Transform:
    """Random ``crop``×``crop`` crop of the zero-padded image (+ horizontal flip with p=0.5), then as eval."""
    from torchvision.transforms import v2

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


def resized_size(height: int, width: int, resize: int | tuple[int, int] | None) -> tuple[int, int]:
    """(H, W) after ``v2.Resize(resize)``: an int sets the shorter side (the longer one is scaled by the same
    factor and truncated, torchvision's rule), a pair is the exact size, None keeps the image as it is."""
    if resize is None:
        return height, width
    if isinstance(resize, int):
        if width <= height:
            return int(resize * height / width), resize
        return resize, int(resize * width / height)
    return int(resize[0]), int(resize[1])


def folder_views(mean: Sequence[float], std: Sequence[float], size: tuple[int, int],
                 resize: int | tuple[int, int] | None = None, crop: tuple[int, int] | None = None,
                 random_crop: bool = False, padding: int = 0, flip: bool = False) -> tuple[Transform, Transform]:
    """``(train_transform, eval_transform)`` of ``image_folder``, on uint8 (C, H, W) images.

    eval:  [Resize(resize)] → [CenterCrop(crop)] → x/255 → (x − mean)/std
    train: [Resize(resize)] → RandomCrop(crop or ``size``, zero padding ``padding``) if ``random_crop``, else
           [CenterCrop(crop)] → [horizontal flip, p = 0.5, if ``flip``] → x/255 → (x − mean)/std
    ``size`` is the (H, W) every image has after resize and crop (the random crop's size without ``crop``).
    """
    from torchvision.transforms import v2

    head: list = [v2.Resize(resize, antialias=True)] if resize is not None else []
    tail: list = [v2.ToDtype(torch.float32, scale=True), v2.Normalize(list(mean), list(std))]
    centre = [v2.CenterCrop(list(crop))] if crop is not None else []
    train: list = [v2.RandomCrop(list(crop or size), padding=padding, fill=0)] if random_crop else list(centre)
    if flip:
        train.append(v2.RandomHorizontalFlip(0.5))
    return v2.Compose(head + train + tail), v2.Compose(head + centre + tail)
