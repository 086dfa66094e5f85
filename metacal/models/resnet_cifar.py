"""ResNets for CIFAR-sized inputs (He et al. 2016, "Deep residual learning", CVPR).

Two families, both with a 3×3 stride-1 stem and no max-pool, ending in global average pooling
(so 32×32 CIFAR and 64×64 Tiny-ImageNet both work) and one linear head:

* ``resnet18/34/50`` — the ImageNet ResNets with the CIFAR stem, as in Kuang Liu's
  pytorch-cifar and torrvision/focal_calibration ``Net/resnet.py``: stages 64/128/256/512 with
  strides 1/2/2/2, BasicBlock (18, 34) or Bottleneck ×4 expansion (50), 1×1 conv+BN projection
  shortcuts. 10 classes: 11,173,962 / 21,282,122 / 23,520,842 parameters.
* ``resnet20/32/56/110`` — the CIFAR ResNets of He et al. §4.2: 3 stages of n BasicBlocks at
  16/32/64 channels, depth 6n+2, "option A" parameter-free shortcuts (stride-2 subsampling +
  zero-padded channels) as in the paper; ``shortcut="B"`` uses 1×1 conv+BN projections.
  ResNet-110 (n = 18) has ≈1.7M parameters (paper, Table 6).
* ``resnet110_bottleneck`` — what focal_calibration (Mukhoti et al. 2020) and the code bases
  built on it (BSCE-GRA, Lin et al. 2025) call "resnet110": the resnet50 layout with Bottleneck
  blocks (3, 4, 26, 3) (3·36 + 2 = 110 layers) — a much larger network than He et al.'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn
from torch.nn import functional as F

from .base import Classifier, check_input_shape, check_sizes, global_pool, init_conv_bn
from .registry import MODELS


class PadShortcut(nn.Module):
    """He et al. option A: identity with stride subsampling and zero-padded extra channels."""

    def __init__(self, in_planes: int, planes: int, stride: int) -> None:
        super().__init__()
        self.stride = stride
        self.pad = planes - in_planes

    def forward(self, x: Tensor) -> Tensor:
        if self.stride != 1:
            x = x[:, :, :: self.stride, :: self.stride]
        if self.pad:
            x = F.pad(x, (0, 0, 0, 0, self.pad // 2, self.pad - self.pad // 2))
        return x


def _projection(in_planes: int, planes: int, stride: int, kind: str) -> nn.Module:
    if stride == 1 and in_planes == planes:
        return nn.Identity()
    if kind == "A":
        return PadShortcut(in_planes, planes, stride)
    return nn.Sequential(
        nn.Conv2d(in_planes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes)
    )


class BasicBlock(nn.Module):
    """Two 3×3 conv–BN layers, ReLU after the sum (post-activation, He et al. 2016)."""

    expansion = 1

    def __init__(self, in_planes: int, planes: int, stride: int = 1, shortcut: str = "B") -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.shortcut = _projection(in_planes, planes, stride, shortcut)

    def forward(self, x: Tensor) -> Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + self.shortcut(x))


class Bottleneck(nn.Module):
    """1×1 reduce → 3×3 (with the stride) → 1×1 expand ×4, each with BN (He et al. 2016)."""

    expansion = 4

    def __init__(self, in_planes: int, planes: int, stride: int = 1, shortcut: str = "B") -> None:
        super().__init__()
        out_planes = planes * self.expansion
        self.conv1 = nn.Conv2d(in_planes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out_planes, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_planes)
        self.relu = nn.ReLU(inplace=True)
        self.shortcut = _projection(in_planes, out_planes, stride, shortcut)

    def forward(self, x: Tensor) -> Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + self.shortcut(x))


class CifarResNet(Classifier):
    """3×3 stem (stride 1, no pool) → stages → global average pool → linear head."""

    def __init__(
        self,
        block: type[BasicBlock] | type[Bottleneck],
        num_blocks: Sequence[int],
        widths: Sequence[int],
        num_classes: int,
        in_channels: int,
        shortcut: str = "B",
        stem_width: int | None = None,
    ) -> None:
        super().__init__()
        stem_width = widths[0] if stem_width is None else stem_width
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, stem_width, 3, 1, 1, bias=False),
            nn.BatchNorm2d(stem_width),
            nn.ReLU(inplace=True),
        )
        stages: list[nn.Module] = []
        in_planes = stem_width
        for i, (count, width) in enumerate(zip(num_blocks, widths)):
            blocks: list[nn.Module] = []
            for j in range(count):
                stride = 2 if (i > 0 and j == 0) else 1
                blocks.append(block(in_planes, width, stride, shortcut))
                in_planes = width * block.expansion
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        self.feature_dim = in_planes
        self.classifier = nn.Linear(in_planes, num_classes)
        init_conv_bn(self)

    def forward_features(self, x: Tensor) -> Tensor:
        return global_pool(self.stages(self.stem(x)))


def _build(
    name: str,
    block: type[BasicBlock] | type[Bottleneck],
    num_blocks: Sequence[int],
    widths: Sequence[int],
    num_classes: int,
    in_channels: int,
    shortcut: str,
    input_shape: Sequence[int] | None,
) -> CifarResNet:
    check_sizes(name, num_classes, in_channels)
    check_input_shape(name, in_channels, input_shape, 3)
    if shortcut not in ("A", "B"):
        raise ValueError(
            f"{name}: shortcut must be 'A' (zero-padding) or 'B' (1x1 conv), got {shortcut!r}"
        )
    return CifarResNet(block, num_blocks, widths, num_classes, in_channels, shortcut)


_WIDE = (64, 128, 256, 512)
_NARROW = (16, 32, 64)


def _register_imagenet_layout(name: str, block, num_blocks: tuple[int, ...]) -> None:
    @MODELS.register(name)
    def builder(num_classes: int, in_channels: int = 3, shortcut: str = "B",
                input_shape: Sequence[int] | None = None) -> CifarResNet:
        return _build(name, block, num_blocks, _WIDE, num_classes, in_channels, shortcut,
                      input_shape)

    builder.__name__ = name
    builder.__doc__ = f"{name}: CIFAR-stem ResNet, {block.__name__} × {num_blocks}, widths {_WIDE}"


def _register_cifar_layout(name: str, n: int) -> None:
    @MODELS.register(name)
    def builder(num_classes: int, in_channels: int = 3, shortcut: str = "A",
                input_shape: Sequence[int] | None = None) -> CifarResNet:
        return _build(name, BasicBlock, (n, n, n), _NARROW, num_classes, in_channels, shortcut,
                      input_shape)

    builder.__name__ = name
    builder.__doc__ = f"{name}: He et al. CIFAR ResNet, depth 6·{n}+2, widths {_NARROW}."


_register_imagenet_layout("resnet18", BasicBlock, (2, 2, 2, 2))
_register_imagenet_layout("resnet34", BasicBlock, (3, 4, 6, 3))
_register_imagenet_layout("resnet50", Bottleneck, (3, 4, 6, 3))
_register_imagenet_layout("resnet110_bottleneck", Bottleneck, (3, 4, 26, 3))
for _n, _depth in ((3, 20), (5, 32), (9, 56), (18, 110)):
    _register_cifar_layout(f"resnet{_depth}", _n)

__all__ = ["BasicBlock", "Bottleneck", "CifarResNet", "PadShortcut"]
