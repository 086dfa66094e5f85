"""Far-OOD inputs from scikit-learn's bundled 8×8 digits (``sklearn.datasets.load_digits``; read from the package,
never downloaded): 1,797 images with values 0..16, the test set of the UCI "Optical Recognition of Handwritten
Digits" data (Alpaydin & Kaynak 1998; UCI ML Repository, licence CC BY 4.0), shipped in scikit-learn's data
files (scikit-learn: BSD-3-Clause).

* images (C, H, W): v/16 in [0, 1], resized bilinearly (``align_corners=False``) to H×W, clipped to [0, 1],
  the one grey channel repeated C times; the caller normalises like the dataset's images;
* anything else (sequences (1, L), feature vectors): each image's rows concatenated (64 values), resampled
  linearly to D = ∏ input_shape values, standardised to mean 0 and std 1 over the whole set (MNIST-1D's own
  standardisation) and reshaped to the input shape.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

NUM_DIGITS = 1797
MAX_VALUE = 16.0


def digit_images() -> torch.Tensor:
    """The 1,797 digits as float32 (N, 1, 8, 8) in [0, 1] (value / 16)."""
    from sklearn.datasets import load_digits

    images = np.asarray(load_digits().images, dtype=np.float32)
    return torch.from_numpy(images).unsqueeze(1) / MAX_VALUE


def digits_as_images(channels: int, height: int, width: int) -> torch.Tensor:
    """float32 (N, C, H, W) in [0, 1]: bilinear resize to H×W, grey channel repeated."""
    x = F.interpolate(digit_images(), size=(height, width), mode="bilinear", align_corners=False)
    return x.clamp(0, 1).repeat(1, channels, 1, 1)


def digits_as_vectors(shape: Sequence[int]) -> torch.Tensor:
    """float32 (N, *shape): rows concatenated, linearly resampled to ∏ shape values, standardised over the set."""
    d = math.prod(int(s) for s in shape)
    rows = digit_images().reshape(NUM_DIGITS, 1, 64)
    x = F.interpolate(rows, size=d, mode="linear", align_corners=False) if d != 64 else rows
    x = (x - x.mean()) / x.std()
    return x.reshape(NUM_DIGITS, *[int(s) for s in shape]).contiguous()
