"""Affine maps before a softmax, fitted by minimum NLL: the engine shared by vector scaling, matrix scaling and
Dirichlet calibration (docs/conventions.md#posthoc).

    q = softmax(W x + b),   x = logits z (vector and matrix scaling, Guo et al. 2017, §4.2)
                            x = ln p = log_softmax(z) (Dirichlet calibration, Kull et al. 2019, §3)

with W ∈ R^{K×K} (diagonal for vector scaling) and b ∈ R^K. Row i of W·x is the new logit of class i, so
W_ij (i ≠ j) moves evidence for class j into class i. The fit minimises, over the fitting (validation) set,

    L(W, b) = −(1/N) Σ_n ln q_{n, y_n} + λ/(K(K−1)) Σ_{i≠j} W_ij² + μ/K Σ_i b_i²

(the second and third terms are ODIR, Kull et al. 2019, §4: off-diagonal and intercept regularisation;
:mod:`metacal.posthoc.odir` chooses λ, μ). L is convex in (W, b); it is minimised in float64, started at the
uncalibrated model W = I, b = 0, until every partial derivative of L is below 1e-7 in size; the start is kept
if the end point is not lower, as for temperature scaling. For K ≤ 20 the engine is damped Newton's method
(:mod:`metacal.posthoc.newton`: exact Hessian, 5–11 steps; 6–9× faster than L-BFGS for the cross-validated
fits on an over-confident model's logits, K = 10); for larger K, whose Hessian grows as K⁴, scipy's L-BFGS-B
without bounds with the hand-derived gradient of
:func:`_value_and_gradient`. The torch definition :func:`affine_objective` is the reference the tests
differentiate. Both engines are numpy with the BLAS thread pool held to one thread during the fit
(threadpoolctl), because OpenBLAS threads on these small matrices spin against each other — on a busy 2-core
machine that made one L-BFGS-B step take milliseconds instead of microseconds.

Softmax ignores a shift shared by all classes, so (W + 1vᵀ, b + c1) is the same map as (W, b); the NLL
cannot tell them apart and the penalty is smallest for Σ_{i≠j} W_ij = 0 in every column j and Σ_i b_i = 0.
The fit therefore runs in those coordinates (:func:`gauge_fixed`), which also removes the flat directions
that slow L-BFGS when λ, μ are small (the Newton system stays singular along them and is solved by least
squares); with λ = μ = 0 it returns that representative.

Difference from the reference code (dirichletcal/dirichlet_python): it fixes the shift by subtracting the last
row of [W | b] from every row and applies the penalty to the result, so its penalty measures the map relative
to the last class; metacal applies the paper's penalty to the representative with the smallest penalty, which
does not depend on the order of the classes. Its fitting engine is Newton's method (K ≤ 36) or scipy's
L-BFGS-B, the same split as here; for a given penalty all reach the minimum of a convex L.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from metacal.metrics.inputs import array_inputs
from metacal.objectives._inputs import check_logits_targets

from ._checks import refuse_probabilities
from .base import Calibrator
from .newton import NEWTON_MAX_CLASSES, fit_newton

TOLERANCE_GRAD = 1e-7  # the fit stops when every |∂L/∂θ| is below this
MAX_ITER = 5000  # Newton or L-BFGS iterations at most; the fits end on the gradient tolerance long before


def affine_logits(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """W x + b per row: ``x * w + b`` for a diagonal (1-D) weight, ``x @ Wᵀ + b`` for a full one."""
    return x * weight + bias if weight.dim() == 1 else x @ weight.T + bias


def odir_penalty(weight: torch.Tensor, bias: torch.Tensor, reg_lambda: float, reg_mu: float) -> torch.Tensor:
    """λ/(K(K−1)) Σ_{i≠j} W_ij² + μ/K Σ_i b_i² (Kull et al. 2019, §4); a diagonal W has no off-diagonal term."""
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


def _value_and_gradient(theta: np.ndarray, x: np.ndarray, y: np.ndarray, diagonal: bool, reg_lambda: float,
                        reg_mu: float) -> tuple[float, np.ndarray]:
    """L at gauge_fixed(θ) and its gradient with respect to θ = (W, b) flattened (hand-derived):
    ∂L/∂W = Rᵀ X + 2λ/(K(K−1))·offdiag(W) (diagonal W: Σ_n R_nk x_nk), ∂L/∂b = Σ_n R_n + 2μ/K·b,
    R = (Q − Y)/N; then through the gauge map, which is linear: ∂/∂b_raw = ∂/∂b − mean(∂/∂b) and
    ∂/∂W_raw,ij = ∂/∂W_ij − [i ≠ j]/(K−1) Σ_a ∂/∂W_aj."""
    n, k = x.shape
    split = k if diagonal else k * k
    w_raw, b_raw = theta[:split], theta[split:]
    w = w_raw if diagonal else w_raw.reshape(k, k)
    b = b_raw - b_raw.mean()
    offdiag = None
    if not diagonal:
        offdiag = 1.0 - np.eye(k)
        w = w - ((w * offdiag).sum(axis=0) / (k - 1))[None, :]
    logits = x * w + b if diagonal else x @ w.T + b
    logits = logits - logits.max(axis=1, keepdims=True)
    log_q = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    rows = np.arange(n)
    value = -log_q[rows, y].mean() + reg_mu * (b @ b) / k
    resid = np.exp(log_q)
    resid[rows, y] -= 1.0
    resid /= n
    grad_b = resid.sum(axis=0) + 2.0 * reg_mu / k * b
    grad_b = grad_b - grad_b.mean()
    if diagonal:
        grad_w = (resid * x).sum(axis=0)
    else:
        off = w * offdiag
        value += reg_lambda * float((off * off).sum()) / (k * (k - 1))
        grad_w = resid.T @ x + 2.0 * reg_lambda / (k * (k - 1)) * off
        grad_w = grad_w - offdiag * (grad_w.sum(axis=0) / (k - 1))[None, :]
    return float(value), np.concatenate([grad_w.reshape(-1), grad_b])


def fit_affine(x: torch.Tensor, y: torch.Tensor, diagonal: bool, reg_lambda: float = 0.0, reg_mu: float = 0.0,
               max_iter: int = MAX_ITER, init: tuple[torch.Tensor, torch.Tensor] | None = None,
               tolerance_grad: float = TOLERANCE_GRAD, engine: str = "auto") -> tuple[torch.Tensor, torch.Tensor]:
    """(W, b) minimising :func:`affine_objective` on features ``x`` (N×K float64) and labels ``y``, written as
    :func:`gauge_fixed` does; W is a K-vector when ``diagonal``. Newton's method (K ≤ NEWTON_MAX_CLASSES) or
    L-BFGS-B over (W, b) with L evaluated at gauge_fixed(W, b), from ``init`` (default W = I, b = 0) until the
    largest partial derivative is below ``tolerance_grad``; the start is returned if the fit does not lower L.
    ``engine`` "newton" or "lbfgs" overrides the choice by K (benchmarks and tests compare the two)."""
    from scipy.optimize import minimize
    from threadpoolctl import threadpool_limits

    k = x.shape[1]
    if engine not in ("auto", "newton", "lbfgs"):
        raise ValueError(f"engine must be 'auto', 'newton' or 'lbfgs', got {engine!r}")
    use_newton = engine == "newton" or (engine == "auto" and k <= NEWTON_MAX_CLASSES)
    if init is None:
        init = (torch.ones(k, dtype=torch.float64) if diagonal else torch.eye(k, dtype=torch.float64),
                torch.zeros(k, dtype=torch.float64))
    start_w, start_b = gauge_fixed(init[0].detach().double().cpu(), init[1].detach().double().cpu())
    theta0 = np.concatenate([start_w.numpy().reshape(-1), start_b.numpy()])
    xs, ys = x.detach().double().cpu().numpy(), y.detach().cpu().numpy()
    args = (xs, ys, diagonal, float(reg_lambda), float(reg_mu))
    at_start = _value_and_gradient(theta0, *args)[0]
    with threadpool_limits(limits=1, user_api="blas"):  # see the module docstring
        if use_newton:
            start = np.concatenate([start_w.numpy().reshape(k, -1), start_b.numpy()[:, None]], axis=1)
            theta, end = fit_newton(xs, ys, diagonal, float(reg_lambda), float(reg_mu), start, tolerance_grad,
                                    max_iter)
            weight_np, bias_np = (theta[:, 0] if diagonal else theta[:, :k]), theta[:, -1]
        else:
            result = minimize(_value_and_gradient, theta0, args=args, jac=True, method="L-BFGS-B",
                              options={"maxiter": max_iter, "gtol": tolerance_grad, "ftol": 1e-15, "maxcor": 20})
            split = k if diagonal else k * k
            weight_np, bias_np, end = result.x[:split].reshape(start_w.shape), result.x[split:], result.fun
    if not np.isfinite(end) or end > at_start:
        return start_w, start_b
    return gauge_fixed(torch.from_numpy(np.ascontiguousarray(weight_np)),
                       torch.from_numpy(np.ascontiguousarray(bias_np)))


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


class AffineCalibrator(Calibrator):
    """softmax(W x + b) fitted on logits. Subclasses set ``diagonal`` (vector vs matrix) and ``log_probs``
    (x = log_softmax(z) instead of z) and how λ, μ are chosen (:meth:`_regularisation`).

    ``fit(logits, labels)`` → self; ``transform(logits)`` → probabilities (a tensor); inputs may be tensors,
    numpy arrays or lists. With probabilities only, pass ln p as logits: Dirichlet calibration then fits the
    same map as on the logits; vector and matrix scaling fit their map on ln p, a different input.
    """

    diagonal = False
    log_probs = False
    name = "affine"

    def __init__(self, max_iter: int = MAX_ITER) -> None:
        super().__init__()
        self.max_iter = int(max_iter)
        self.register_buffer("weight", None)  # W (a K-vector when diagonal); None until fitted
        self.register_buffer("bias", None)
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
        refuse_probabilities(logits, self.name)
        n, k = logits.shape
        if k < 2:
            raise ValueError(f"{self.name} needs K ≥ 2 classes, got K = {k}")
        if n < self.min_samples(k):
            raise ValueError(f"{self.name} needs at least {self.min_samples(k)} fitting samples for K = {k}, "
                             f"got N = {n}")
        x, y = self.features(logits).cpu(), labels.long().cpu()
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

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        """log softmax(W x + b), unchecked."""
        return torch.log_softmax(affine_logits(self.features(logits), self.weight, self.bias), dim=1)

    def fitted_state(self) -> dict[str, Any]:
        return {"kind": self.name, "weight": self.weight, "bias": self.bias,
                "reg_lambda": self.reg_lambda_used, "reg_mu": self.reg_mu_used}

    def load_fitted_state(self, state: dict[str, Any]) -> None:
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
