"""Multi-layer perceptron on flattened inputs.

``mlp(num_classes, in_channels, input_shape=None, in_features=None, hidden=(256, 256), ...)``:
the input (N, *input_shape) — e.g. (N, D) embeddings, (N, C, L) for MNIST-1D or (N, C, H, W) for images — is
flattened to (N, prod(input_shape)); each hidden layer is Linear → [BatchNorm1d] → activation
→ [Dropout]. The features are the last hidden activation (feature_dim = hidden[-1]); with
``hidden=()`` the model is multinomial logistic regression and the features are the flattened
input itself. The input size must be given, as ``input_shape`` (its first entry must equal
``in_channels``) or as ``in_features`` (then ``in_channels`` is not used).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from metacal.registry import unknown_name

from .base import Classifier, check_input_shape, check_sizes
from .registry import MODELS

_ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh, "silu": nn.SiLU}


class MLP(Classifier):
    def __init__(
        self,
        num_classes: int,
        in_features: int,
        hidden: Sequence[int] = (256, 256),
        activation: str = "relu",
        batch_norm: bool = False,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.in_features = in_features
        layers: list[nn.Module] = []
        width = in_features
        for h in hidden:
            layers.append(nn.Linear(width, h, bias=not batch_norm))
            if batch_norm:
                layers.append(nn.BatchNorm1d(h))
            layers.append(_ACTIVATIONS[activation]())
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
            width = h
        self.body = nn.Sequential(*layers)
        self.feature_dim = width
        self.classifier = nn.Linear(width, num_classes)

    def forward_features(self, x: Tensor) -> Tensor:
        flat = torch.flatten(x, 1)
        if flat.shape[1] != self.in_features:
            raise ValueError(
                f"mlp: expected inputs with {self.in_features} values per sample, got shape "
                f"{tuple(x.shape)}; build the model with the right input_shape/in_features"
            )
        return self.body(flat)


@MODELS.register("mlp")
def mlp(
    num_classes: int,
    in_channels: int = 1,
    input_shape: Sequence[int] | None = None,
    in_features: int | None = None,
    hidden: Sequence[int] = (256, 256),
    activation: str = "relu",
    batch_norm: bool = False,
    dropout: float = 0.0,
) -> MLP:
    """MLP on flattened inputs; give ``input_shape`` (C,L)/(C,H,W) or ``in_features``."""
    check_sizes("mlp", num_classes, in_channels)
    # any rank: the input is flattened (an arrays file may hold (N, D) embeddings or (N, A, B, C, …) features)
    rank = max(len(tuple(input_shape)), 1) if input_shape is not None else 1
    shape = check_input_shape("mlp", in_channels, input_shape, rank)
    if shape is not None:
        size = math.prod(shape)
        if in_features is not None and int(in_features) != size:
            raise ValueError(
                f"mlp: in_features={in_features} disagrees with input_shape {shape} ({size} values)"
            )
        in_features = size
    if in_features is None or isinstance(in_features, bool) or int(in_features) < 1:
        raise ValueError(
            "mlp: give the input size, as input_shape=(C, H, W) / (C, L) or in_features=<int>"
        )
    hidden = tuple(int(h) for h in hidden)
    if any(h < 1 for h in hidden):
        raise ValueError(f"mlp: hidden sizes must be positive, got {hidden}")
    if activation not in _ACTIVATIONS:
        raise ValueError(f"mlp: {unknown_name('activation', activation, sorted(_ACTIVATIONS))}")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"mlp: dropout must be in [0, 1), got {dropout}")
    return MLP(num_classes, int(in_features), hidden, activation, batch_norm, dropout)
