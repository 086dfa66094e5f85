"""Wide ResNets for CIFAR (Zagoruyko & Komodakis 2016, "Wide residual networks", BMVC).

Two constructions, because the calibration literature uses two:

* ``style="preact"`` — the paper's WRN-d-k: 3×3 stem with 16 channels, 3 groups of
  n = (d − 4)/6 pre-activation blocks (BN-ReLU-conv3×3-BN-ReLU-[dropout]-conv3×3) at widths
  16k/32k/64k with strides 1/2/2, 1×1 conv shortcut (applied to the pre-activated input) where
  the width changes, final BN-ReLU, global average pool, linear head. ``wrn28_10`` (n = 4):
  36,479,194 parameters for 10 classes (paper: 36.5M, Table 4). Used by Karandikar et al.
  2021) via uncertainty-baselines.
* ``style="postact"`` — WRN-26-10 as built by torrvision/focal_calibration
  ``Net/wide_resnet.py`` (``wide_resnet_cifar(depth=26, width=10)``, used by Mukhoti et al.
  2020 and by BSCE-GRA, Lin et al. 2025): depth counted He-style as 6n + 2 (stem conv + 6n
  convs + head; 1×1 shortcuts not counted), so n = (26 − 2)/6 = 4 — the same number of blocks
  as WRN-28-10 — with post-activation BasicBlocks (conv-BN-ReLU-conv-BN, add, ReLU), 1×1
  conv+BN projection shortcuts, stem conv-BN-ReLU with 16 channels, widths 160/320/640.
  Zagoruyko's rule (d − 4) % 6 == 0 has no WRN-26; the 6n + 2 rule is what makes it exist.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn
from torch.nn import functional as F

from .base import Classifier, check_input_shape, check_sizes, global_pool, init_conv_bn
from .registry import MODELS
from .resnet_cifar import BasicBlock, CifarResNet


class PreActBlock(nn.Module):
    """WRN basic block B(3,3), pre-activation, optional dropout between the convolutions."""

    def __init__(self, in_planes: int, planes: int, stride: int, dropout: float) -> None:
        super().__init__()
        self.bn1 = nn.BatchNorm2d(in_planes)
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.dropout = dropout
        self.projection: nn.Module | None = None
        if stride != 1 or in_planes != planes:
            self.projection = nn.Conv2d(in_planes, planes, 1, stride, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        pre = F.relu(self.bn1(x))
        out = self.conv1(pre)
        out = F.relu(self.bn2(out))
        if self.dropout > 0:
            out = F.dropout(out, self.dropout, self.training)
        out = self.conv2(out)
        shortcut = x if self.projection is None else self.projection(pre)
        return out + shortcut


class WideResNet(Classifier):
    """Pre-activation WRN-d-k (Zagoruyko & Komodakis 2016)."""

    def __init__(self, depth: int, widen_factor: int, num_classes: int, in_channels: int,
                 dropout: float = 0.0) -> None:
        super().__init__()
        n = (depth - 4) // 6
        widths = [16 * widen_factor, 32 * widen_factor, 64 * widen_factor]
        self.stem = nn.Conv2d(in_channels, 16, 3, 1, 1, bias=False)
        groups: list[nn.Module] = []
        in_planes = 16
        for i, width in enumerate(widths):
            blocks = []
            for j in range(n):
                stride = 2 if (i > 0 and j == 0) else 1
                blocks.append(PreActBlock(in_planes, width, stride, dropout))
                in_planes = width
            groups.append(nn.Sequential(*blocks))
        self.groups = nn.Sequential(*groups)
        self.bn = nn.BatchNorm2d(in_planes)
        self.feature_dim = in_planes
        self.classifier = nn.Linear(in_planes, num_classes)
        init_conv_bn(self)

    def forward_features(self, x: Tensor) -> Tensor:
        return global_pool(F.relu(self.bn(self.groups(self.stem(x)))))


@MODELS.register("wide_resnet")
def wide_resnet(
    num_classes: int,
    in_channels: int = 3,
    depth: int = 28,
    widen_factor: int = 10,
    style: str = "preact",
    dropout: float = 0.0,
    input_shape: Sequence[int] | None = None,
) -> nn.Module:
    """WRN-depth-widen_factor; ``style`` "preact" (depth = 6n+4) or "postact" (depth = 6n+2)."""
    name = f"wide_resnet(depth={depth}, widen_factor={widen_factor}, style={style!r})"
    check_sizes(name, num_classes, in_channels)
    check_input_shape(name, in_channels, input_shape, 3)
    if not isinstance(widen_factor, int) or widen_factor < 1:
        raise ValueError(f"{name}: widen_factor must be a positive int")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"{name}: dropout must be in [0, 1), got {dropout}")
    if style == "preact":
        if depth < 10 or (depth - 4) % 6:
            raise ValueError(
                f"{name}: pre-activation WRN depth must be 6n+4 (10, 16, 22, 28, 34...); "
                "use style='postact' for 6n+2 depths such as 26"
            )
        return WideResNet(depth, widen_factor, num_classes, in_channels, dropout)
    if style == "postact":
        if depth < 8 or (depth - 2) % 6:
            raise ValueError(
                f"{name}: post-activation WRN depth must be 6n+2 (8, 14, 20, 26, 32...)"
            )
        if dropout:
            raise ValueError(f"{name}: dropout is only implemented for style='preact'")
        n = (depth - 2) // 6
        widths = (16 * widen_factor, 32 * widen_factor, 64 * widen_factor)
        return CifarResNet(BasicBlock, (n, n, n), widths, num_classes, in_channels,
                           shortcut="B", stem_width=16)
    raise ValueError(f"wide_resnet: style must be 'preact' or 'postact', got {style!r}")


@MODELS.register("wrn28_10")
def wrn28_10(num_classes: int, in_channels: int = 3, dropout: float = 0.0,
             input_shape: Sequence[int] | None = None) -> nn.Module:
    """WRN-28-10, pre-activation (Zagoruyko & Komodakis 2016)."""
    return wide_resnet(num_classes, in_channels, 28, 10, "preact", dropout, input_shape)


@MODELS.register("wrn26_10")
def wrn26_10(num_classes: int, in_channels: int = 3,
             input_shape: Sequence[int] | None = None) -> nn.Module:
    """WRN-26-10 as in focal_calibration: 4 post-activation blocks per stage, widths 160/320/640."""
    return wide_resnet(num_classes, in_channels, 26, 10, "postact", 0.0, input_shape)
