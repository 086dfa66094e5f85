"""Classifiers by name: ``build(name, num_classes, in_channels, **options)``, ``available()``.

Every model returns logits from ``model(x)`` and ``(logits, features)`` from
``model(x, return_features=True)`` (one forward pass); ``model.classifier`` is the
``nn.Linear(model.feature_dim, num_classes)`` head, applied last. Every builder also accepts an
optional ``input_shape`` ((C,H,W) or (C,L), no batch dim) so a trainer can pass
``bundle.input_shape`` to any model; the MLP needs it (or ``in_features``).

Models (module — names):
  small_resnet.py — ``small_resnet`` (28×28 grayscale, 78k parameters)
  cnn1d.py        — ``cnn1d`` (MNIST-1D, Greydanus 2020, 5,210 parameters)
  mlp.py          — ``mlp`` (flattened input, hidden=(256, 256))
  resnet_cifar.py — ``resnet18/34/50`` (CIFAR stem), ``resnet20/32/56/110`` (He et al. CIFAR
                    ResNets), ``resnet110_bottleneck`` (focal_calibration's "resnet110")
  wide_resnet.py  — ``wrn28_10`` (pre-activation), ``wrn26_10`` (focal_calibration's
                    post-activation 6n+2 construction), ``wide_resnet`` (any depth/width)
  densenet.py     — ``densenet100`` (DenseNet-BC k=12), ``densenet121`` (stem imagenet|cifar)
2-D models end in global average pooling, so 32×32 and 64×64 (Tiny-ImageNet) inputs both work.

Beyond the registry: ``torchvision:<name>`` builds any torchvision classification network with a K-class
head (torchvision_models.py), and :func:`wrap` gives any ``nn.Module`` the contract, its features read
by a forward hook on the head's input or on a named layer (features.py). ``load_weights`` (weights.py)
starts a model from a local state dict with one-line errors for missing keys and shape mismatches.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from .base import Classifier
from .features import ContractError, FeatureClassifier, keeps_contract, probe_contract, wrap
from .registry import MODELS
from .torchvision_models import (PREFIX as TORCHVISION_PREFIX, build_torchvision, classification_models, is_torchvision,
                                 resolve, torchvision_name)
from .weights import WeightsMismatchError, load_weights
from . import small_resnet  # noqa: F401  (small_resnet)
from . import mlp  # noqa: F401  (mlp)
from . import cnn1d  # noqa: F401  (cnn1d)
from . import resnet_cifar  # noqa: F401  (resnet18/34/50, resnet20/32/56/110, resnet110_bottleneck)
from . import wide_resnet  # noqa: F401  (wide_resnet, wrn28_10, wrn26_10)
from . import densenet  # noqa: F401  (densenet100, densenet121)


def check_name(name: str) -> None:
    """UnknownNameError (closest names first, metacal.registry.unknown_name) unless ``name`` is registered or
    ``torchvision:<known>``; a torchvision network's bare name (``convnext_tiny``) gets ``torchvision:<name>``
    suggested."""
    if is_torchvision(name):
        resolve(torchvision_name(name))
    elif name not in MODELS:
        MODELS.get(name, more=[TORCHVISION_PREFIX + n for n in classification_models()])


def build(name: str, num_classes: int, in_channels: int, **options: Any) -> nn.Module:
    """Build a registered classifier, or ``torchvision:<name>``. An unknown name raises UnknownNameError
    listing the names; an option the model does not take raises ValueError listing the ones it does."""
    if is_torchvision(name):
        return build_torchvision(torchvision_name(name), num_classes=num_classes, in_channels=in_channels, **options)
    check_name(name)
    return MODELS.build(name, num_classes=num_classes, in_channels=in_channels, **options)


def available() -> list[str]:
    return MODELS.available()


__all__ = ["Classifier", "ContractError", "FeatureClassifier", "MODELS", "TORCHVISION_PREFIX", "WeightsMismatchError",
           "available", "build", "check_name", "keeps_contract", "load_weights", "probe_contract", "wrap"]
