"""A small residual CNN for 28×28 inputs (Fashion-MNIST), well under 1M parameters.

Stem 3×3 conv → three stages of BasicBlocks (He et al. 2016) at widths ``widths`` with stride
1, 2, 2 → global average pool → linear head. Defaults (16, 32, 64), one block per stage:
≈ 0.078M parameters for 10 classes. Speed target (≥ 1,500 img/s train step at batch 128 on
2 CPU cores) is measured by scripts/bench_models.py, not by the tests.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from .base import Classifier, check_input_shape, check_sizes, global_pool, init_conv_bn
from .registry import MODELS


class BasicBlock(nn.Module):
    """Two 3×3 conv–BN layers with an identity (or 1×1 conv–BN projection) shortcut."""

    def __init__(self, in_planes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes)
            )

    def forward(self, x: Tensor) -> Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + self.shortcut(x))


class SmallResNet(Classifier):
    def __init__(
        self,
        num_classes: int,
        in_channels: int,
        widths: Sequence[int] = (16, 32, 64),
        blocks: Sequence[int] = (1, 1, 1),
    ) -> None:
        super().__init__()
        if len(widths) != len(blocks) or not widths or min(widths) < 1 or min(blocks) < 1:
            raise ValueError(
                f"small_resnet: widths {tuple(widths)} and blocks {tuple(blocks)} must be "
                "non-empty positive sequences of the same length"
            )
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, widths[0], 3, 1, 1, bias=False),
            nn.BatchNorm2d(widths[0]),
            nn.ReLU(inplace=True),
        )
        layers: list[nn.Module] = []
        in_planes = widths[0]
        for stage, (width, count) in enumerate(zip(widths, blocks)):
            for i in range(count):
                stride = 2 if (stage > 0 and i == 0) else 1
                layers.append(BasicBlock(in_planes, width, stride))
                in_planes = width
        self.layers = nn.Sequential(*layers)
        self.feature_dim = in_planes
        self.classifier = nn.Linear(in_planes, num_classes)
        init_conv_bn(self)

    def forward_features(self, x: Tensor) -> Tensor:
        return global_pool(self.layers(self.stem(x)))


@MODELS.register("small_resnet")
def small_resnet(
    num_classes: int,
    in_channels: int = 1,
    widths: Sequence[int] = (16, 32, 64),
    blocks: Sequence[int] = (1, 1, 1),
    input_shape: Sequence[int] | None = None,
) -> SmallResNet:
    """Small ResNet for 28×28 images (any size works: global average pooling)."""
    check_sizes("small_resnet", num_classes, in_channels)
    check_input_shape("small_resnet", in_channels, input_shape, 3)
    return SmallResNet(num_classes, in_channels, widths, blocks)
