"""Small 1-D CNN for MNIST-1D (Greydanus 2020, "Scaling down deep learning"; ``ConvBase`` in the
mnist1d repository's models.py).

Three Conv1d layers with ``channels`` (25) filters — kernel 5, then 3, then 3; stride 2,
padding 1, ReLU after each — then the (channels × L₃) activations are flattened and fed to the
linear head. For the standard length-40 input, L: 40 → 19 → 10 → 5, features have
25·5 = 125 dims and the model has 5,210 parameters for 10 classes (the mnist1d README reports
≈ 5k parameters and ≈ 94% test accuracy for this CNN). The flattened size depends on the
input length, so it is fixed at build time from ``input_length`` (or ``input_shape=(C, L)``);
``pool="avg"`` replaces flattening by global average pooling (features = channels, any length).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from .base import Classifier, check_input_shape, check_sizes
from .registry import MODELS


def _conv_out(length: int, kernel: int, stride: int = 2, padding: int = 1) -> int:
    return (length + 2 * padding - kernel) // stride + 1


class CNN1D(Classifier):
    def __init__(
        self, num_classes: int, in_channels: int, input_length: int, channels: int, pool: str
    ) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv1d(in_channels, channels, 5, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv1d(channels, channels, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv1d(channels, channels, 3, stride=2, padding=1),
            nn.ReLU(),
        )
        self.pool = pool
        self.input_length = input_length
        out_len = _conv_out(_conv_out(_conv_out(input_length, 5), 3), 3)
        self.feature_dim = channels * out_len if pool == "flatten" else channels
        self.classifier = nn.Linear(self.feature_dim, num_classes)

    def forward_features(self, x: Tensor) -> Tensor:
        if x.dim() != 3:
            raise ValueError(f"cnn1d: expected inputs of shape (N, C, L), got {tuple(x.shape)}")
        if self.pool == "flatten" and x.shape[-1] != self.input_length:
            raise ValueError(
                f"cnn1d: built for length {self.input_length}, got inputs of shape "
                f"{tuple(x.shape)}; rebuild with input_length={x.shape[-1]} or pool='avg'"
            )
        h = self.body(x)
        return torch.flatten(h, 1) if self.pool == "flatten" else h.mean(dim=-1)


@MODELS.register("cnn1d")
def cnn1d(
    num_classes: int,
    in_channels: int = 1,
    input_length: int | None = None,
    channels: int = 25,
    pool: str = "flatten",
    input_shape: Sequence[int] | None = None,
) -> CNN1D:
    """MNIST-1D CNN; ``input_length`` defaults to ``input_shape[1]`` or 40."""
    check_sizes("cnn1d", num_classes, in_channels)
    shape = check_input_shape("cnn1d", in_channels, input_shape, 2)
    if shape is not None:
        if input_length is not None and input_length != shape[1]:
            raise ValueError(
                f"cnn1d: input_length={input_length} disagrees with input_shape {shape}"
            )
        input_length = shape[1]
    input_length = 40 if input_length is None else int(input_length)
    if pool not in ("flatten", "avg"):
        raise ValueError(f"cnn1d: pool must be 'flatten' or 'avg', got {pool!r}")
    if channels < 1:
        raise ValueError(f"cnn1d: channels must be positive, got {channels}")
    if _conv_out(_conv_out(_conv_out(input_length, 5), 3), 3) < 1:
        raise ValueError(f"cnn1d: input_length={input_length} is too short (need at least 3)")
    return CNN1D(num_classes, in_channels, input_length, channels, pool)
