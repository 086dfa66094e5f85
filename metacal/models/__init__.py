"""Classifiers by name: ``build(name, num_classes, in_channels, **options)``, ``available()``.

Every model returns logits from ``model(x)`` and ``(logits, features)`` from
``model(x, return_features=True)`` (one forward pass); ``model.classifier`` is the
``nn.Linear(model.feature_dim, num_classes)`` head, applied last. Every builder also accepts an
optional ``input_shape`` ((C,H,W) or (C,L), no batch dim) so a trainer can pass
``bundle.input_shape`` to any model; the MLP needs it (or ``in_features``).
"""

from __future__ import annotations

from typing import Any

from torch import nn

from .base import Classifier
from .registry import MODELS
from . import small_resnet  # noqa: F401  (small_resnet)
from . import mlp  # noqa: F401  (mlp)
from . import cnn1d  # noqa: F401  (cnn1d)
from . import resnet_cifar  # noqa: F401  (resnet18/34/50, resnet20/32/56/110, resnet110_bottleneck)
from . import wide_resnet  # noqa: F401  (wide_resnet, wrn28_10, wrn26_10)
from . import densenet  # noqa: F401  (densenet100, densenet121)


def build(name: str, num_classes: int, in_channels: int, **options: Any) -> nn.Module:
    """Build a registered classifier; an unknown name raises UnknownNameError listing names."""
    return MODELS.build(name, num_classes=num_classes, in_channels=in_channels, **options)


def available() -> list[str]:
    return MODELS.available()


__all__ = ["Classifier", "MODELS", "build", "available"]
