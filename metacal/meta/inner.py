"""Inner (training) losses whose meta-parameters a meta step learns by hypergradient.

Both adapters expose the same small interface used by every backend (their base, ``InnerLoss``):

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


class InnerLoss:
    """The interface of the module docstring: L(θ, φ) = (1/N) Σ_i ℓ_i(θ, φ), ℓ_i the per-sample values of
    ``loss(logits, targets, **loss_inputs(...))``; a subclass says in :meth:`loss_inputs` how φ enters."""

    logits_depend_on_meta: bool
    uses_head_params: bool
    loss: nn.Module

    def meta_parameters(self) -> list[nn.Parameter]:
        raise NotImplementedError

    def meta_inputs(self, features: torch.Tensor) -> Any:
        raise NotImplementedError

    def loss_inputs(self, logits: torch.Tensor, head_weight: torch.Tensor | None, head_bias: torch.Tensor | None,
                    meta: Any) -> dict[str, Any]:
        """The keyword arguments of ``loss`` that carry φ (and the head parameters when it needs them)."""
        raise NotImplementedError

    def total(
        self,
        logits: torch.Tensor,
        targets: torch.Tensor,
        head_weight: torch.Tensor | None,
        head_bias: torch.Tensor | None,
        meta: Any,
    ) -> torch.Tensor:
        """L(θ, φ) = mean over the batch of the per-sample loss."""
        return self.loss(logits, targets, **self.loss_inputs(logits, head_weight, head_bias, meta)).mean()


class GammaFocalInner(InnerLoss):
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

    def loss_inputs(self, logits: torch.Tensor, head_weight: torch.Tensor | None, head_bias: torch.Tensor | None,
                    meta: Any) -> dict[str, Any]:
        """γ_i = γ-Net(features_i) in the logits' dtype."""
        return {"gamma": meta.to(logits.dtype)}


class LearnableL2Inner(InnerLoss):
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

    def loss_inputs(self, logits: torch.Tensor, head_weight: torch.Tensor | None, head_bias: torch.Tensor | None,
                    meta: Any) -> dict[str, Any]:
        """θ_head = (weight, bias), which the loss penalises by Σ coeff ⊙ θ_head²."""
        return {"head_weight": head_weight, "head_bias": head_bias}


def make_inner(gamma_net: GammaNet | None = None, loss: nn.Module | None = None) -> InnerLoss:
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
