"""Cross-entropy and focal loss (Lin et al., 2017), with scalar, per-class or per-sample γ.

Also the pieces the other focal-family losses share: ``safe_pow`` (base^γ, finite at base = 0, γ
differentiable) and ``GammaLoss`` (constructor γ as float or per-class list with a per-class default,
call-time per-sample γ, reduction): a subclass gives only its per-sample formula.
"""

from __future__ import annotations

import math
import numbers
from typing import Sequence

import torch
import torch.nn.functional as F

from .base import Loss, reduce
from .registry import LOSSES


def safe_pow(base: torch.Tensor, gamma: torch.Tensor | float) -> torch.Tensor:
    """base^γ for base ≥ 0: exp(γ·log base) where base > 0, and 0^γ = 1[γ = 0] where base = 0.

    Differentiable in both arguments; the gradient at base = 0 is 0 (no inf·0 = NaN).
    """
    gamma = torch.as_tensor(gamma, dtype=base.dtype, device=base.device)
    tiny = torch.finfo(base.dtype).tiny
    return torch.where(
        base > 0,
        torch.exp(gamma * torch.log(base.clamp_min(tiny))),
        (gamma == 0).to(base.dtype),
    )


def log_pt(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log p_{i,y_i} from ``log_softmax`` (stable for |z| ≫ 1)."""
    return F.log_softmax(logits, dim=-1).gather(-1, targets.long().unsqueeze(-1)).squeeze(-1)


def focal_per_sample(
    logits: torch.Tensor, targets: torch.Tensor, gamma: torch.Tensor | float
) -> torch.Tensor:
    """ℓ_i = −(1 − p_{i,y})^{γ_i} log p_{i,y}, with p from ``log_softmax`` (stable for |z| ≫ 1).

    ``gamma`` is a float or a tensor broadcastable to the batch (one γ per sample).
    (1 − p)^γ is computed as exp(γ·log1p(−p)) where p < 1, and as 0^γ (1 for γ = 0) where p = 1.
    """
    lp = log_pt(logits, targets)
    if not torch.is_tensor(gamma) and gamma == 0:
        return -lp
    one_minus_p = -torch.expm1(lp)  # 1 − p_t, exact for p_t near 1
    return -safe_pow(one_minus_p, gamma) * lp


def _finite_gamma(value: object) -> float:
    """``value`` as a finite float (a NaN or infinite γ makes every loss NaN); ValueError otherwise."""
    try:
        gamma = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"gamma must be a number or a non-empty per-class list of numbers; got {value!r}") from None
    if not math.isfinite(gamma):
        raise ValueError(f"gamma must be finite; got {gamma}")
    return gamma


class GammaLoss(Loss):
    """Base of the focal family whose γ is a free parameter (and may be given per sample at call time).

    ``gamma``: a float, or a per-class sequence of length K (γ_{y_i} is used for sample i); None (the
    constructor default) takes the class's ``default_gamma``. At call time ``gamma=`` (a float, or a tensor
    with one γ per sample, shape (N,) or (N, 1)) overrides it; gradients flow to that tensor (the meta step
    differentiates w.r.t. γ). A subclass gives its formula ℓ_i(γ_i) as :meth:`per_sample`; ``forward``
    resolves γ and applies ``reduction``.
    """

    per_sample_gamma = True
    default_gamma: float = 1.0

    def __init__(self, gamma: float | Sequence[float] | None = None, reduction: str = "mean") -> None:
        super().__init__(reduction)
        if gamma is None:
            gamma = self.default_gamma
        if isinstance(gamma, numbers.Real):  # also numpy's scalars
            self.gamma: float | None = _finite_gamma(gamma)
            self.register_buffer("class_gamma", None)
        else:
            if isinstance(gamma, str):  # not a per-class list of its characters
                raise ValueError(f"gamma must be a number or a non-empty per-class list of numbers; got {gamma!r}")
            values = [_finite_gamma(g) for g in gamma]
            if not values:
                raise ValueError("gamma must be a number or a non-empty per-class list")
            self.gamma = None
            self.register_buffer("class_gamma", torch.tensor(values, dtype=torch.float32))

    def resolve_gamma(
        self, targets: torch.Tensor, gamma: torch.Tensor | float | None
    ) -> torch.Tensor | float:
        """The γ to use for each sample: the call-time value, else per-class, else the scalar."""
        if gamma is None:
            if self.class_gamma is None:
                return self.gamma
            if int(targets.max()) >= self.class_gamma.numel():
                raise ValueError(
                    f"per-class gamma has {self.class_gamma.numel()} entries but a target is "
                    f"{int(targets.max())}; give one γ per class"
                )
            return self.class_gamma.to(targets.device)[targets.long()]
        if torch.is_tensor(gamma) and gamma.dim() > 0:
            if gamma.numel() not in (1, targets.shape[0]):
                raise ValueError(
                    f"per-sample gamma must have one value per sample ({targets.shape[0]}), "
                    f"got shape {tuple(gamma.shape)}"
                )
            gamma = gamma.reshape(-1)
        return gamma

    def per_sample(
        self, logits: torch.Tensor, targets: torch.Tensor, gamma: torch.Tensor | float
    ) -> torch.Tensor:
        """ℓ_i for each sample, γ already resolved (a float or one value per sample)."""
        raise NotImplementedError

    def forward(
        self,
        logits: torch.Tensor,
        targets: torch.Tensor,
        gamma: torch.Tensor | float | None = None,
        **extra,
    ) -> torch.Tensor:
        """reduce(ℓ_i) with γ from :meth:`resolve_gamma` (call-time, else per-class, else scalar)."""
        return reduce(self.per_sample(logits, targets, self.resolve_gamma(targets, gamma)), self.reduction)


@LOSSES.register("ce")
class CrossEntropy(Loss):
    """ℓ = −log p_y (mean over the batch by default)."""

    def forward(self, logits: torch.Tensor, targets: torch.Tensor, **extra) -> torch.Tensor:
        return reduce(F.cross_entropy(logits, targets.long(), reduction="none"), self.reduction)


@LOSSES.register("focal")
class FocalLoss(GammaLoss):
    """Focal loss ℓ = −(1 − p_y)^γ log p_y (Lin et al., 2017; γ = 1 default as in Wang & Golebiowski 2024, Table 1).

    ``gamma`` is a float, or a per-class sequence of length K (γ_{y_i} is used for sample i).
    A per-sample γ tensor passed at call time (``loss(z, y, gamma=g)``) overrides it; that is how the
    γ-Net's output enters (Wang & Golebiowski 2024, eq. 5).
    """

    confidence_knob = "gamma"  # a larger γ down-weights confident samples: lower confidence (Mukhoti et al. 2020)
    knob_unit = 1.0  # the step of the usual γ grid {0, 1, …, 5}
    per_sample = staticmethod(focal_per_sample)
