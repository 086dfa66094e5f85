"""Affine maps before a softmax, fitted by minimum NLL: the engine shared by vector scaling, matrix scaling and
Dirichlet calibration (docs/conventions.md#posthoc).

    q = softmax(W x + b),   x = logits z (vector and matrix scaling, Guo et al. 2017, §4.2)
                            x = ln p = log_softmax(z) (Dirichlet calibration, Kull et al. 2019, §3)

with W ∈ R^{K×K} (diagonal for vector scaling) and b ∈ R^K. Row i of W·x is the new logit of class i, so
W_ij (i ≠ j) moves evidence for class j into class i. The fit minimises, over the fitting (validation) set,

    L(W, b) = −(1/N) Σ_n ln q_{n, y_n} + λ/(K(K−1)) Σ_{i≠j} W_ij² + μ/K Σ_i b_i²

(the second and third terms are ODIR, Kull et al. 2019, §4: off-diagonal and intercept regularisation;
:mod:`metacal.posthoc.odir` chooses λ, μ). L is convex in (W, b); it is minimised by L-BFGS with a strong-Wolfe
line search in float64 (torch), started at the uncalibrated model W = I, b = 0, until every partial derivative
of L is below 1e-7 in size; the start is kept if the end point is not lower (a failed line search), as for
temperature scaling. Softmax ignores a shift shared by all classes, so (W + 1vᵀ, b + c1) is the same map
as (W, b); the NLL cannot tell them apart and the penalty is smallest for Σ_{i≠j} W_ij = 0 in every column j
and Σ_i b_i = 0. The fit therefore runs in those coordinates (:func:`gauge_fixed`), which also removes the
flat directions that slow L-BFGS when λ, μ are small; with λ = μ = 0 it returns that representative.

Difference from the reference code (dirichletcal/dirichlet_python): it fixes the shift by subtracting the last
row of [W | b] from every row and applies the penalty to the result, so its penalty measures the map relative
to the last class; metacal applies the paper's penalty to the representative with the smallest penalty, which
does not depend on the order of the classes. Its fitting engine is Newton's method (K ≤ 36) or scipy's
L-BFGS-B; for a given penalty both reach the minimum of a convex L, as L-BFGS does here.
"""

from __future__ import annotations

from typing import Any

import torch

from metacal.metrics.inputs import array_inputs
from metacal.objectives._inputs import check_logits_targets

TOLERANCE_GRAD = 1e-7  # L-BFGS stops when every |∂L/∂θ| is below this


def affine_logits(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """W x + b per row: ``x * w + b`` for a diagonal (1-D) weight, ``x @ Wᵀ + b`` for a full one."""
    return x * weight + bias if weight.dim() == 1 else x @ weight.T + bias


def odir_penalty(weight: torch.Tensor, bias: torch.Tensor, reg_lambda: float, reg_mu: float) -> torch.Tensor:
    """λ/(K(K−1)) Σ_{i≠j} W_ij² + μ/K Σ_i b_i² (Kull et al. 2019, §4); a diagonal weight has no off-diagonal term."""
    k = bias.shape[0]
    penalty = reg_mu * bias.pow(2).sum() / k
    if weight.dim() == 2 and k > 1:
        off = weight - torch.diag(torch.diagonal(weight))
        penalty = penalty + reg_lambda * off.pow(2).sum() / (k * (k - 1))
    return penalty


def affine_objective(x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                     reg_lambda: float, reg_mu: float) -> torch.Tensor:
    """L(W, b) of the module docstring: mean NLL of softmax(W x + b) plus the ODIR penalty."""
    nll = torch.nn.functional.cross_entropy(affine_logits(x, weight, bias), y)
    return nll + odir_penalty(weight, bias, reg_lambda, reg_mu)


def gauge_fixed(weight: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The map softmax(W x + b) written with Σ_i b_i = 0 and, for a full W, Σ_{i≠j} W_ij = 0 in every column j
    (W → W − 1vᵀ with v_j the mean off-diagonal entry of column j; b → b − mean(b)). The probabilities are
    unchanged, and of all the ways to write the map this one has the smallest ODIR penalty."""
    bias = bias - bias.mean()
    if weight.dim() == 2:
        k = weight.shape[0]
        off = weight - torch.diag(torch.diagonal(weight))
        weight = weight - (off.sum(dim=0) / max(k - 1, 1)).unsqueeze(0)
    return weight, bias


def fit_affine(x: torch.Tensor, y: torch.Tensor, diagonal: bool, reg_lambda: float = 0.0, reg_mu: float = 0.0,
               max_iter: int = 500, init: tuple[torch.Tensor, torch.Tensor] | None = None,
               tolerance_grad: float = TOLERANCE_GRAD) -> tuple[torch.Tensor, torch.Tensor]:
    """(W, b) minimising :func:`affine_objective` on features ``x`` (N×K float64) and labels ``y``, written as
    :func:`gauge_fixed` does; W is a K-vector when ``diagonal``. L-BFGS over (W, b) with L evaluated at
    gauge_fixed(W, b), from ``init`` (default W = I, b = 0) until the largest partial derivative is below
    ``tolerance_grad``; the start is returned if the fit does not lower L."""
    k = x.shape[1]
    if init is None:
        init = (torch.ones(k, dtype=x.dtype) if diagonal else torch.eye(k, dtype=x.dtype), torch.zeros(k, dtype=x.dtype))
    start_w, start_b = gauge_fixed(init[0].detach(), init[1].detach())
    weight = start_w.clone().requires_grad_(True)
    bias = start_b.clone().requires_grad_(True)
    opt = torch.optim.LBFGS([weight, bias], lr=1.0, max_iter=max_iter, history_size=50,
                            tolerance_grad=tolerance_grad, tolerance_change=1e-12, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = affine_objective(x, y, *gauge_fixed(weight, bias), reg_lambda, reg_mu)
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        weight, bias = gauge_fixed(weight, bias)
        at_start = affine_objective(x, y, start_w, start_b, reg_lambda, reg_mu)
        at_end = affine_objective(x, y, weight, bias, reg_lambda, reg_mu)
    if not bool(torch.isfinite(at_end)) or at_end > at_start:
        return start_w, start_b
    return weight.detach(), bias.detach()


def check_finite_logits(logits: torch.Tensor, labels: torch.Tensor | None = None) -> None:
    """One-line ValueErrors: logits N×K floating point (with labels: N integers in [0, K)), all finite."""
    if labels is not None:
        check_logits_targets(logits, labels)
    elif not isinstance(logits, torch.Tensor) or logits.dim() != 2 or not logits.is_floating_point():
        shape = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ValueError(f"logits must be a 2-D floating-point tensor (N, K), got {shape}")
    if not bool(torch.isfinite(logits).all()):
        bad = int((~torch.isfinite(logits)).any(dim=1).sum())
        raise ValueError(f"logits contain NaN or inf in {bad} row(s); remove or fix those rows")


class AffineCalibrator:
    """softmax(W x + b) fitted on logits. Subclasses set ``diagonal`` (vector vs matrix) and ``log_probs``
    (x = log_softmax(z) instead of z) and how λ, μ are chosen (:meth:`_regularisation`).

    ``fit(logits, labels)`` → self; ``transform(logits)`` → probabilities (a tensor); inputs may be tensors,
    numpy arrays or lists. With probabilities only, pass ln p as logits (softmax(W ln p + b) is then the
    same map as on the logits for Dirichlet calibration; for vector/matrix scaling it is the map on ln p).
    """

    diagonal = False
    log_probs = False
    name = "affine"

    def __init__(self, max_iter: int = 500) -> None:
        self.max_iter = int(max_iter)
        self.weight: torch.Tensor | None = None
        self.bias: torch.Tensor | None = None
        self.reg_lambda_used = 0.0
        self.reg_mu_used = 0.0

    @staticmethod
    def min_samples(num_classes: int) -> int:
        """Fewest fitting samples accepted: the number of parameters (K² + K for a full W)."""
        return num_classes * (num_classes + 1)

    def features(self, logits: torch.Tensor) -> torch.Tensor:
        """x of the module docstring, in float64."""
        z = logits.detach().double()
        return torch.log_softmax(z, dim=1) if self.log_probs else z

    def _regularisation(self, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
        """(λ, μ) used for the final fit."""
        return 0.0, 0.0

    @array_inputs("logits", "labels")
    def fit(self, logits: torch.Tensor, labels: torch.Tensor) -> "AffineCalibrator":
        check_finite_logits(logits, labels)
        n, k = logits.shape
        if k < 2:
            raise ValueError(f"{self.name} needs K ≥ 2 classes, got K = {k}")
        if n < self.min_samples(k):
            raise ValueError(f"{self.name} needs at least {self.min_samples(k)} fitting samples for K = {k}, got N = {n}")
        x, y = self.features(logits), labels.to(logits.device).long().cpu()
        x = x.cpu()
        self.reg_lambda_used, self.reg_mu_used = self._regularisation(x, y)
        self.weight, self.bias = fit_affine(x, y, self.diagonal, self.reg_lambda_used, self.reg_mu_used,
                                            self.max_iter)
        return self

    @property
    def num_classes(self) -> int | None:
        return None if self.bias is None else int(self.bias.shape[0])

    @array_inputs("logits")
    def scale(self, logits: torch.Tensor) -> torch.Tensor:
        """The calibrated logits W x + b (float64, on the input's device)."""
        if self.weight is None or self.bias is None:
            raise RuntimeError(f"{type(self).__name__}.transform() called before fit() or load_state_dict()")
        check_finite_logits(logits)
        if logits.shape[1] != self.num_classes:
            raise ValueError(f"{self.name} was fitted for K = {self.num_classes} classes, got logits with "
                             f"K = {logits.shape[1]}")
        x = self.features(logits)
        return affine_logits(x, self.weight.to(x.device), self.bias.to(x.device))

    @array_inputs("logits")
    def transform(self, logits: torch.Tensor) -> torch.Tensor:
        """softmax(W x + b): rows sum to 1 (float64)."""
        return torch.softmax(self.scale(logits), dim=1)

    __call__ = transform

    def state_dict(self) -> dict[str, Any]:
        return {"kind": self.name, "weight": self.weight, "bias": self.bias,
                "reg_lambda": self.reg_lambda_used, "reg_mu": self.reg_mu_used}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key in ("weight", "bias"):
            if state.get(key) is None:
                raise ValueError(f"state_dict has no {key!r} entry")
        if state.get("kind", self.name) != self.name:
            raise ValueError(f"state_dict is of a {state['kind']!r} calibrator, not {self.name!r}")
        weight = torch.as_tensor(state["weight"], dtype=torch.float64).cpu()
        bias = torch.as_tensor(state["bias"], dtype=torch.float64).cpu()
        k = bias.shape[0] if bias.dim() == 1 else -1
        want = (k,) if self.diagonal else (k, k)
        if bias.dim() != 1 or tuple(weight.shape) != want:
            raise ValueError(f"state_dict weight {tuple(weight.shape)} and bias {tuple(bias.shape)} do not fit a "
                             f"{self.name} map (weight {want} for bias ({k},))")
        self.weight, self.bias = weight, bias
        self.reg_lambda_used = float(state.get("reg_lambda", 0.0))
        self.reg_mu_used = float(state.get("reg_mu", 0.0))

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(K={self.num_classes}, λ={self.reg_lambda_used:.3g}, "
                f"μ={self.reg_mu_used:.3g})")
