"""Common shape of every metacal classifier.

A classifier is ``features = self.forward_features(x)`` followed by ONE linear head
``logits = self.classifier(features)`` (the last op; contracts: metacal.models). The γ-Net
(Wang & Golebiowski 2024, eq. 4–5) reads ``features``; meta-steps that only adapt the head
(Bohdal et al.) read ``classifier``.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import torch
from torch import Tensor, nn


class Classifier(nn.Module):
    """Base class: subclasses set ``self.feature_dim`` / ``self.classifier`` and implement
    :meth:`forward_features`."""

    feature_dim: int
    classifier: nn.Linear

    def forward_features(self, x: Tensor) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def forward(self, x: Tensor, return_features: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """``model(x)`` → logits (N, K); ``model(x, return_features=True)`` → (logits, features)
        from the same forward pass, features of shape (N, feature_dim)."""
        features = self.forward_features(x)
        logits = self.classifier(features)
        if return_features:
            return logits, features
        return logits


def check_sizes(name: str, num_classes: int, in_channels: int) -> None:
    """One-line ValueError for non-positive or non-integer class/channel counts (numpy ints are
    accepted, floats and bools are not)."""
    for label, value in (("num_classes", num_classes), ("in_channels", in_channels)):
        try:
            ok = not isinstance(value, bool) and operator.index(value) >= 1
        except TypeError:
            ok = False
        if not ok:
            raise ValueError(f"{name}: {label} must be a positive int, got {value!r}")


def check_input_shape(
    name: str, in_channels: int, input_shape: Sequence[int] | None, ndim: int | tuple[int, ...]
) -> tuple[int, ...] | None:
    """Validate an optional ``input_shape`` (C,H,W) or (C,L) — without the batch dimension —
    against ``in_channels`` and the number of dims the model accepts. Returns it as a tuple."""
    if input_shape is None:
        return None
    shape = tuple(int(s) for s in input_shape)
    allowed = (ndim,) if isinstance(ndim, int) else ndim
    if len(shape) not in allowed or any(s < 1 for s in shape):
        want = " or ".join(f"{n}-d" for n in allowed)
        raise ValueError(
            f"{name}: input_shape must be a {want} shape without the batch dimension, got {shape}"
        )
    if shape[0] != in_channels:
        raise ValueError(
            f"{name}: input_shape {shape} has {shape[0]} channels but in_channels={in_channels}"
        )
    return shape


def init_conv_bn(module: nn.Module) -> None:
    """He (fan_out) init for convolutions, BN γ=1 β=0 (He et al. 2016; most CIFAR code)."""
    for m in module.modules():
        if isinstance(m, (nn.Conv1d, nn.Conv2d)):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


def global_pool(x: Tensor) -> Tensor:
    """Adaptive average pooling to 1×1 then flatten: (N, C, H, W) → (N, C); any spatial size."""
    return torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)
