"""Datasets over decoded images: in-memory uint8 arrays (CIFAR, SVHN, Fashion-MNIST) or image files
(Tiny-ImageNet). Several views with different transforms can share one array without copying."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset

from .errors import DataFormatError

Transform = Callable[[torch.Tensor], torch.Tensor]


class ImageArrayDataset(Dataset):
    """Images held as a uint8 tensor (N, C, H, W); item = ``(transform(image), label)``."""

    def __init__(self, images: torch.Tensor | np.ndarray, targets: torch.Tensor | np.ndarray,
                 transform: Transform | None = None) -> None:
        self.images = torch.as_tensor(images)
        self.targets = torch.as_tensor(targets, dtype=torch.int64)
        if self.images.dtype != torch.uint8 or self.images.dim() != 4:
            raise ValueError(f"images must be uint8 (N, C, H, W), got {self.images.dtype} {tuple(self.images.shape)}")
        if len(self.images) != len(self.targets):
            raise ValueError(f"{len(self.images)} images but {len(self.targets)} labels")
        self.transform = transform

    def with_transform(self, transform: Transform | None) -> "ImageArrayDataset":
        """Another view of the same images (no copy) with a different transform."""
        return ImageArrayDataset(self.images, self.targets, transform)

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        image = self.images[index]
        if self.transform is not None:
            image = self.transform(image)
        return image, self.targets[index]


def load_image(path: str | Path, mode: str = "RGB") -> torch.Tensor:
    """Decode an image file to a uint8 (C, H, W) tensor: ``mode`` "RGB" (C = 3; grayscale files are
    expanded, an alpha channel is dropped) or "L" (C = 1; colour files become luminance, ITU-R 601-2)."""
    with Image.open(path) as img:
        array = np.asarray(img.convert(mode), dtype=np.uint8)
    if array.ndim == 2:
        array = array[:, :, None]
    return torch.from_numpy(array.copy()).permute(2, 0, 1).contiguous()


def load_rgb(path: str | Path) -> torch.Tensor:
    """Decode an image file to a uint8 (3, H, W) tensor (grayscale files are expanded to RGB)."""
    return load_image(path, "RGB")


class ImageFileDataset(Dataset):
    """Images read from disk on access; item = ``(transform(uint8 image), label)``; ``mode`` "RGB" or "L"
    (:func:`load_image`). A file that cannot be decoded raises :class:`DataFormatError` naming it."""

    def __init__(self, paths: Sequence[str | Path], targets: Sequence[int] | torch.Tensor,
                 transform: Transform | None = None, mode: str = "RGB") -> None:
        if len(paths) != len(targets):
            raise ValueError(f"{len(paths)} image paths but {len(targets)} labels")
        if mode not in ("RGB", "L"):
            raise ValueError(f"mode must be 'RGB' or 'L', got {mode!r}")
        self.paths = [str(p) for p in paths]
        self.targets = torch.as_tensor(targets, dtype=torch.int64)
        self.transform = transform
        self.mode = mode

    def with_transform(self, transform: Transform | None) -> "ImageFileDataset":
        return ImageFileDataset(self.paths, self.targets, transform, self.mode)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        try:
            image = load_image(self.paths[index], self.mode)
        except Exception as err:  # PIL raises OSError, SyntaxError, ValueError, DecompressionBombError …
            raise DataFormatError(f"{self.paths[index]}: cannot read the image ({' '.join(str(err).split())}); "
                                  "replace or remove the file") from None
        if self.transform is not None:
            image = self.transform(image)
        return image, self.targets[index]


class VectorDataset(Dataset):
    """Float inputs held in memory (e.g. (N, 1, L) sequences); optional true posteriors (N, K)."""

    def __init__(self, inputs: torch.Tensor, targets: torch.Tensor,
                 posteriors: torch.Tensor | None = None) -> None:
        self.inputs = torch.as_tensor(inputs, dtype=torch.float32)
        self.targets = torch.as_tensor(targets, dtype=torch.int64)
        if len(self.inputs) != len(self.targets):
            raise ValueError(f"{len(self.inputs)} inputs but {len(self.targets)} labels")
        self.posteriors = posteriors

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.inputs[index], self.targets[index]
