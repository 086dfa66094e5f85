"""γ-Net: per-sample focal-loss γ from the backbone's penultimate features (Wang & Golebiowski 2024,
§4.1, eq. 4–5; docs/conventions.md#gamma-net).

With x ∈ R^{N×d} the features (detached here: the γ-Net never changes the backbone's features),
A ∈ R^{d×k} (k heads, the paper uses k = number of classes) and W ∈ R^{d×1}::

    a = x A            (N×k)        p = softmax_k(a)                      (eq. 4)
    x̃ = p Aᵀ           (N×d)        r = (x̃ W + b) / τ,  γ = map(r)         (eq. 5, map = |·|)

τ = 0.01 is fixed (not learned). The output maps (§4.1 "Practical considerations", for the ablation):
``"abs"`` |r| (the paper's choice, default), ``"softplus"`` log(1+eʳ), ``"relu"`` max(r, 0),
``"sigmoid"`` γ_max·σ(r). All are ≥ 0.

Initialisation (γ ≈ ``init_gamma`` when training starts, paper: γ initialised to 1.0). Eq. 5 has no bias;
we add a scalar bias b so the start value does not depend on the data:

* A ~ N(0, 1/d): the head logits a have O(1) scale for features of O(1) per-unit magnitude, and every
  column of A has norm ≈ 1, so x̃ — a convex combination of A's columns — has norm ≤ ≈ 1 whatever the
  scale of the features.
* W ~ N(0, (0.02·τ)²): x̃W then has standard deviation ≤ 0.02·τ, i.e. r = r₀ ± 0.02 (also when the
  softmax saturates and every sample picks the same column of A).
* b = τ·r₀ with r₀ = map⁻¹(init_gamma): abs/relu r₀ = γ₀; softplus r₀ = log(expm1(γ₀));
  sigmoid r₀ = logit(γ₀/γ_max).

So every sample starts with γ within ≈ ±0.05 (abs/relu; less for softplus/sigmoid near the flat parts) of
``init_gamma`` (tests: mean γ at init on ResNet-like features = 1 ± 0.05), and W ≠ 0 lets both A and W
receive gradients from the first meta step.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from einops import einsum
from torch import nn

OUTPUT_MAPS = ("abs", "softplus", "sigmoid", "relu")


def _inverse_map(output: str, gamma: float, gamma_max: float) -> float:
    """r₀ with map(r₀) = γ₀ for the chosen output map."""
    if output in ("abs", "relu"):
        return gamma
    if output == "softplus":
        return math.log(math.expm1(gamma))
    ratio = gamma / gamma_max
    return math.log(ratio / (1.0 - ratio))


class GammaNet(nn.Module):
    """Per-sample γ = map((softmax(xA) Aᵀ W + b)/τ) (Wang & Golebiowski 2024, eq. 4–5); ``gamma_net(features) -> (N,)``."""

    def __init__(
        self,
        feature_dim: int,
        num_heads: int,
        output: str = "abs",
        tau: float = 0.01,
        init_gamma: float = 1.0,
        gamma_max: float = 5.0,
    ) -> None:
        super().__init__()
        for label, value in (("feature_dim", feature_dim), ("num_heads", num_heads)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"GammaNet: {label} must be a positive int, got {value!r}")
        if output not in OUTPUT_MAPS:
            raise ValueError(f"GammaNet: output must be one of {', '.join(OUTPUT_MAPS)}, got {output!r}")
        if not tau > 0:
            raise ValueError(f"GammaNet: tau must be > 0, got {tau!r}")
        if output == "sigmoid" and not 0 < init_gamma < gamma_max:
            raise ValueError(
                f"GammaNet: output='sigmoid' needs 0 < init_gamma < gamma_max, got {init_gamma} and {gamma_max}"
            )
        if output == "softplus" and not init_gamma > 0:
            raise ValueError(f"GammaNet: output='softplus' needs init_gamma > 0, got {init_gamma}")
        if output in ("abs", "relu") and init_gamma < 0:
            raise ValueError(f"GammaNet: init_gamma must be >= 0, got {init_gamma}")
        self.feature_dim = feature_dim
        self.num_heads = num_heads
        self.output = output
        self.tau = float(tau)
        self.gamma_max = float(gamma_max)
        self.init_gamma = float(init_gamma)
        self.attention = nn.Parameter(torch.randn(feature_dim, num_heads) / math.sqrt(feature_dim))  # A
        self.weight = nn.Parameter(torch.randn(feature_dim) * (0.02 * self.tau))  # W (d×1, stored flat)
        self.bias = nn.Parameter(
            torch.tensor(self.tau * _inverse_map(output, self.init_gamma, self.gamma_max))
        )

    def pre_activation(self, features: torch.Tensor) -> torch.Tensor:
        """r = (softmax(xA) Aᵀ W + b)/τ, shape (N,); the features are detached."""
        x = features.detach()
        if x.dim() != 2 or x.shape[1] != self.feature_dim:
            raise ValueError(
                f"GammaNet: expected features of shape (N, {self.feature_dim}), got {tuple(x.shape)}"
            )
        x = x.to(self.attention.dtype)
        attn = torch.softmax(einsum(x, self.attention, "n d, d k -> n k"), dim=-1)  # p (eq. 4)
        mixed = einsum(attn, self.attention, "n k, d k -> n d")  # x̃ = p Aᵀ (eq. 5)
        return (einsum(mixed, self.weight, "n d, d -> n") + self.bias) / self.tau

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        r = self.pre_activation(features)
        if self.output == "abs":
            return r.abs()
        if self.output == "softplus":
            return F.softplus(r)
        if self.output == "relu":
            return F.relu(r)
        return self.gamma_max * torch.sigmoid(r)

    def extra_repr(self) -> str:
        return (
            f"feature_dim={self.feature_dim}, num_heads={self.num_heads}, output={self.output!r}, "
            f"tau={self.tau}, init_gamma={self.init_gamma}"
        )
