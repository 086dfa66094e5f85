"""Inner (training) losses whose meta-parameters a meta step learns by hypergradient.

Both adapters expose the same small interface used by every backend:

* ``meta_parameters()`` — the parameters φ the meta optimizer updates;
* ``meta_inputs(features)`` — what the loss needs from φ for this batch (the γ-Net's per-sample γ, graph
  to φ attached; ``None`` for the learnable-L2 loss whose coefficients enter directly);
* ``total(logits, targets, head_weight, head_bias, meta)`` — the mean inner loss L(θ, φ) as a scalar;
* ``logits_depend_on_meta`` — whether ∂L/∂logits depends on φ (γ-Net: yes; learnable L2: no, its φ only
  multiplies θ_head², so the hypergradient needs no JVP through the network);
* ``uses_head_params`` — whether L depends on the classifier head's weight/bias directly.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .gamma_net import GammaNet


class GammaFocalInner:
    """Focal loss with per-sample γ_i = γ-Net(features_i) (Wang & Golebiowski 2024, Alg. 1, lines 3–4)."""

    logits_depend_on_meta = True
    uses_head_params = False

    def __init__(self, gamma_net: GammaNet, loss: nn.Module | None = None) -> None:
        if loss is None:
            from metacal.losses import build

            loss = build("focal", reduction="none")
        if not getattr(loss, "per_sample_gamma", False):
            raise ValueError(f"a γ-Net needs a loss that takes a per-sample gamma= (the focal family); "
                             f"{type(loss).__name__} does not, so the γ-Net would get no hypergradient")
        self.gamma_net = gamma_net
        self.loss = loss

    def meta_parameters(self) -> list[nn.Parameter]:
        return list(self.gamma_net.parameters())

    def meta_inputs(self, features: torch.Tensor) -> torch.Tensor:
        return self.gamma_net(features)

    def total(
        self,
        logits: torch.Tensor,
        targets: torch.Tensor,
        head_weight: torch.Tensor | None,
        head_bias: torch.Tensor | None,
        meta: Any,
    ) -> torch.Tensor:
        return self.loss(logits, targets, gamma=meta.to(logits.dtype)).mean()


class LearnableL2Inner:
    """CE + Σ coeff ⊙ θ_head² (Bohdal et al. CE-DECE / CE-SECE baselines), meta-parameters = coefficients.

    ``loss`` is ``metacal.losses.build("ce_learnable_l2", weight_shape=(K, d), ...)``; its
    ``forward(logits, targets, head_weight, head_bias)`` and ``meta_parameters()`` are used as is.
    """

    logits_depend_on_meta = False
    uses_head_params = True

    def __init__(self, loss: nn.Module) -> None:
        if not getattr(loss, "needs_head_params", False) or not loss.meta_parameters():
            raise ValueError("LearnableL2Inner needs the 'ce_learnable_l2' loss (with penalty and coefficients)")
        self.loss = loss

    def meta_parameters(self) -> list[nn.Parameter]:
        return list(self.loss.meta_parameters())

    def meta_inputs(self, features: torch.Tensor) -> None:
        return None

    def total(
        self,
        logits: torch.Tensor,
        targets: torch.Tensor,
        head_weight: torch.Tensor | None,
        head_bias: torch.Tensor | None,
        meta: Any,
    ) -> torch.Tensor:
        return self.loss(logits, targets, head_weight=head_weight, head_bias=head_bias).mean()


def make_inner(gamma_net: GammaNet | None = None, loss: nn.Module | None = None):
    """γ-Net + focal (``gamma_net`` given; ``loss`` defaults to focal with reduction="none"), or the
    learnable-L2 baseline (``loss`` is a ``ce_learnable_l2`` module, no γ-Net)."""
    if gamma_net is not None:
        return GammaFocalInner(gamma_net, loss)
    if loss is not None and loss.meta_parameters():
        return LearnableL2Inner(loss)
    raise ValueError(
        "a meta step needs meta-parameters: pass gamma_net=GammaNet(...) (FLγ) or "
        "loss=metacal.losses.build('ce_learnable_l2', weight_shape=(K, d)) (CE + learnable L2)"
    )
