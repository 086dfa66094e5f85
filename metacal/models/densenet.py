"""DenseNets (Huang et al. 2017, "Densely connected convolutional networks", CVPR).

* ``densenet100`` — DenseNet-BC for CIFAR, depth L = 100, growth k = 12: 3×3 stem with 2k
  channels, 3 dense blocks of (L − 4)/6 = 16 bottleneck layers (BN-ReLU-conv1×1 to 4k,
  BN-ReLU-conv3×3 to k, concatenated), transitions BN-ReLU-conv1×1 with compression 0.5
  (floor) + 2×2 average pool, final BN-ReLU, global average pool, linear head. 769,162
  parameters for 10 classes (paper Table 2: 0.8M).
* ``densenet121`` — ImageNet DenseNet-121 (k = 32, blocks 6/12/24/16, 64 stem channels,
  bottleneck 4k, compression 0.5). ``stem="imagenet"`` (default): 7×7/2 conv-BN-ReLU + 3×3/2
  max-pool, parameter-for-parameter the torchvision layout (6,964,106 parameters for 10
  classes). ``stem="cifar"`` for small inputs (32×32, 64×64): one 3×3 stride-1 conv with 2k = 64
  channels and no pool, as in Kuang Liu's pytorch-cifar and torrvision/focal_calibration
  ``Net/densenet.py`` (the DenseNet-121 of Mukhoti et al. 2020 / BSCE-GRA): 6,956,298.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from .base import Classifier, check_input_shape, check_sizes, global_pool, init_conv_bn
from .registry import MODELS


class DenseLayer(nn.Module):
    """BN-ReLU-conv1×1 (bn_size·k) → BN-ReLU-conv3×3 (k); output concatenated to the input."""

    def __init__(self, in_planes: int, growth_rate: int, bn_size: int) -> None:
        super().__init__()
        inner = bn_size * growth_rate
        self.bn1 = nn.BatchNorm2d(in_planes)
        self.conv1 = nn.Conv2d(in_planes, inner, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(inner)
        self.conv2 = nn.Conv2d(inner, growth_rate, 3, 1, 1, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        out = self.conv1(F.relu(self.bn1(x)))
        out = self.conv2(F.relu(self.bn2(out)))
        return torch.cat([x, out], dim=1)


class Transition(nn.Module):
    """BN-ReLU-conv1×1 (compression) → 2×2 average pool."""

    def __init__(self, in_planes: int, out_planes: int) -> None:
        super().__init__()
        self.bn = nn.BatchNorm2d(in_planes)
        self.conv = nn.Conv2d(in_planes, out_planes, 1, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return F.avg_pool2d(self.conv(F.relu(self.bn(x))), 2)


class DenseNet(Classifier):
    def __init__(
        self,
        num_classes: int,
        in_channels: int,
        growth_rate: int,
        block_config: Sequence[int],
        stem: str,
        stem_width: int,
        bn_size: int = 4,
        compression: float = 0.5,
    ) -> None:
        super().__init__()
        if stem == "imagenet":
            self.stem = nn.Sequential(
                nn.Conv2d(in_channels, stem_width, 7, 2, 3, bias=False),
                nn.BatchNorm2d(stem_width),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(3, 2, 1),
            )
        else:  # "cifar": the first dense layer starts with BN-ReLU, so the stem is a bare conv
            self.stem = nn.Sequential(nn.Conv2d(in_channels, stem_width, 3, 1, 1, bias=False))
        layers: list[nn.Module] = []
        planes = stem_width
        for i, count in enumerate(block_config):
            for _ in range(count):
                layers.append(DenseLayer(planes, growth_rate, bn_size))
                planes += growth_rate
            if i < len(block_config) - 1:
                out_planes = int(math.floor(planes * compression))
                layers.append(Transition(planes, out_planes))
                planes = out_planes
        self.body = nn.Sequential(*layers)
        self.bn = nn.BatchNorm2d(planes)
        self.feature_dim = planes
        self.classifier = nn.Linear(planes, num_classes)
        init_conv_bn(self)

    def forward_features(self, x: Tensor) -> Tensor:
        return global_pool(F.relu(self.bn(self.body(self.stem(x)))))


@MODELS.register("densenet100")
def densenet100(num_classes: int, in_channels: int = 3, growth_rate: int = 12,
                input_shape: Sequence[int] | None = None) -> DenseNet:
    """DenseNet-BC-100 for CIFAR (k = 12 by default)."""
    check_sizes("densenet100", num_classes, in_channels)
    check_input_shape("densenet100", in_channels, input_shape, 3)
    if growth_rate < 1:
        raise ValueError(f"densenet100: growth_rate must be positive, got {growth_rate}")
    n = (100 - 4) // 6
    return DenseNet(num_classes, in_channels, growth_rate, (n, n, n), "cifar", 2 * growth_rate)


@MODELS.register("densenet121")
def densenet121(num_classes: int, in_channels: int = 3, stem: str = "imagenet",
                input_shape: Sequence[int] | None = None) -> DenseNet:
    """DenseNet-121; ``stem="cifar"`` (3×3, stride 1, no pool) for 32×32 / 64×64 inputs."""
    check_sizes("densenet121", num_classes, in_channels)
    check_input_shape("densenet121", in_channels, input_shape, 3)
    if stem not in ("imagenet", "cifar"):
        raise ValueError(f"densenet121: stem must be 'imagenet' or 'cifar', got {stem!r}")
    return DenseNet(num_classes, in_channels, 32, (6, 12, 24, 16), stem, 64)
