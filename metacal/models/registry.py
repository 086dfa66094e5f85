"""The model registry: ``MODELS.build(name, num_classes=..., in_channels=..., **options)``."""

from __future__ import annotations

from torch import nn

from metacal.registry import Registry

MODELS: Registry[nn.Module] = Registry("model", listing="metacal.models", supplied=("num_classes", "in_channels"))
