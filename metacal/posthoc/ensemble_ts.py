"""Ensemble temperature scaling, ETS (Zhang, Kailkhura & Han, ICML 2020, "Mix-n-Match", §3.1), on held-out LOGITS:

    p = w₁·softmax(z/T) + w₂·softmax(z) + w₃·(1/K)·𝟙,   w ≥ 0, w₁ + w₂ + w₃ = 1

a convex mix of the temperature-scaled, the uncalibrated and the uniform prediction, so the rows are
probabilities and the arg-max is that of z whenever w₁ + w₂ > 0.

Fitting, in two stages as in the authors' reference code (``ets_calibrate``, zhang64-llnl/Mix-n-Match-Calibration),
both by the squared error MSE(p) = (1/(N·K)) Σ_n Σ_k (p_nk − 1[y_n = k])² (the Brier score divided by K):

1. T minimises MSE(softmax(z/T)) (``temperature_loss="nll"``: the NLL fit of
   :func:`metacal.posthoc.temperature.fit_temperature_nll` instead, the reference code's alternative);
2. with T fixed, w minimises MSE(p) over the simplex.

Stage 2 is a convex quadratic in w, MSE = wᵀGw − 2cᵀw + const with G_ij = mean(P_i ⊙ P_j) and
c_i = mean(P_i ⊙ Y) (P₁, P₂, P₃ the three N×K predictions); metacal minimises it exactly by comparing the
minimisers on the interior (a KKT solve), on each edge and at each vertex of the simplex, in float64.

Deliberate differences from the reference code: stage 1 scans ln T on a grid over [1e-2, 1e2] (metacal's
temperature range; the reference bounds T to [0.05, 5]) and refines the best grid point with a bounded
Brent search, instead of one L-BFGS-B run from T = 1, because the squared error need not be convex in T;
stage 2 is solved exactly instead of by SLSQP.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from metacal.metrics.inputs import array_inputs

from ._checks import refuse_probabilities
from .affine import check_finite_logits
from .base import Calibrator
from .temperature import T_MAX, T_MIN, fit_temperature_nll

TEMPERATURE_LOSSES = ("mse", "nll")
GRID_POINTS = 161  # ln T grid over [ln 1e-2, ln 1e2] for stage 1: steps of ×1.06
TIE = 1e-15  # a later candidate must beat the best by more than this to replace it


def squared_error(probs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """(1/(N·K)) Σ_n Σ_k (p_nk − 1[y_n = k])², the reference code's ``mse``."""
    onehot = torch.nn.functional.one_hot(labels.long(), probs.shape[1]).to(probs.dtype)
    return (probs - onehot).pow(2).mean()


def fit_temperature_mse(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """T ∈ [1e-2, 1e2] minimising squared_error(softmax(z/T), y): grid over ln T, then bounded Brent."""
    from scipy.optimize import minimize_scalar

    z, y = logits.detach().double(), labels.long()

    def loss(log_t: float) -> float:
        return float(squared_error(torch.softmax(z * math.exp(-log_t), dim=1), y))

    grid = torch.linspace(math.log(T_MIN), math.log(T_MAX), GRID_POINTS, dtype=torch.float64).tolist()
    values = [loss(s) for s in grid]
    best = min(range(GRID_POINTS), key=values.__getitem__)
    lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, GRID_POINTS - 1)]
    refined = minimize_scalar(loss, bounds=(lo, hi), method="bounded", options={"xatol": 1e-10})
    log_t = float(refined.x) if refined.success and refined.fun <= values[best] else grid[best]
    return float(min(max(math.exp(log_t), T_MIN), T_MAX))


def simplex_quadratic_min(gram: torch.Tensor, lin: torch.Tensor) -> torch.Tensor:
    """argmin of wᵀGw − 2cᵀw over the probability simplex in R³ (G symmetric positive semi-definite), by
    comparing the vertices, the minimiser on each edge and the interior KKT point; ties go to the earlier
    candidate (vertex 1 first, i.e. plain temperature scaling)."""
    g, c = gram.double(), lin.double()
    eye = torch.eye(3, dtype=torch.float64)

    def value(w: torch.Tensor) -> float:
        return float(w @ g @ w - 2.0 * c @ w)

    candidates = [eye[i] for i in range(3)]
    for i, j in ((0, 1), (0, 2), (1, 2)):  # w = t e_i + (1 − t) e_j
        d = eye[i] - eye[j]
        curvature = float(d @ g @ d)
        if curvature > 0:
            t = float((c @ d - d @ g @ eye[j]) / curvature)
            candidates.append(min(max(t, 0.0), 1.0) * eye[i] + (1.0 - min(max(t, 0.0), 1.0)) * eye[j])
    kkt = torch.zeros(4, 4, dtype=torch.float64)
    kkt[:3, :3], kkt[:3, 3], kkt[3, :3] = 2.0 * g, 1.0, 1.0
    rhs = torch.cat([2.0 * c, torch.ones(1, dtype=torch.float64)])
    if abs(float(torch.linalg.det(kkt))) > 1e-14:
        w = torch.linalg.solve(kkt, rhs)[:3]
        if bool((w >= 0).all()):
            candidates.append(w)
    best, best_value = candidates[0], value(candidates[0])
    for w in candidates[1:]:
        v = value(w)
        if v < best_value - TIE:
            best, best_value = w, v
    best = best.clamp_min(0.0)
    return best / best.sum()


def ensemble_components(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """The three predictions (3×N×K, float64): softmax(z/T), softmax(z), uniform 1/K."""
    z = logits.detach().double()
    return torch.stack([torch.softmax(z / temperature, dim=1), torch.softmax(z, dim=1),
                        torch.full_like(z, 1.0 / z.shape[1])])


class EnsembleTemperatureScaling(Calibrator):
    """Fitted ETS (module docstring): ``fit(logits, labels)`` → self, ``transform(logits)`` → probabilities
    (float64), ``forward`` their logarithm. ``temperature`` is T, ``weights`` the tensor (w₁, w₂, w₃) of the
    temperature-scaled, the uncalibrated and the uniform prediction.

    Args:
        temperature_loss: ``"mse"`` (reference default) or ``"nll"``: the loss fitting T in stage 1.
    """

    name = "ensemble temperature scaling"

    def __init__(self, temperature_loss: str = "mse") -> None:
        super().__init__()
        if temperature_loss not in TEMPERATURE_LOSSES:
            raise ValueError(f"unknown temperature_loss {temperature_loss!r}; choose one of "
                             f"{', '.join(TEMPERATURE_LOSSES)}")
        self.temperature_loss = temperature_loss
        self.temperature = 1.0
        self.register_buffer("weights", torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64))
        self.fitted = False

    @array_inputs("logits", "labels")
    def fit(self, logits: torch.Tensor, labels: torch.Tensor) -> "EnsembleTemperatureScaling":
        check_finite_logits(logits, labels)
        refuse_probabilities(logits, self.name)
        z, y = logits.detach().double().cpu(), labels.long().cpu()
        if self.temperature_loss == "mse":
            self.temperature = fit_temperature_mse(z, y)
        else:
            self.temperature = fit_temperature_nll(z, y)
        parts = ensemble_components(z, self.temperature).reshape(3, -1)
        onehot = torch.nn.functional.one_hot(y, z.shape[1]).double().reshape(-1)
        gram = parts @ parts.T / parts.shape[1]
        lin = parts @ onehot / parts.shape[1]
        self.weights = simplex_quadratic_min(gram, lin)
        self.fitted = True
        return self

    @array_inputs("logits")
    def transform(self, logits: torch.Tensor) -> torch.Tensor:
        """w₁·softmax(z/T) + w₂·softmax(z) + w₃/K (float64, rows sum to 1)."""
        check_finite_logits(logits)
        return self.mixed(logits)

    def mixed(self, logits: torch.Tensor) -> torch.Tensor:
        """w₁·softmax(z/T) + w₂·softmax(z) + w₃/K, unchecked."""
        parts = ensemble_components(logits, self.temperature)
        return torch.einsum("j,jnk->nk", self.weights.to(parts.device), parts)

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        """The logarithm of the mixture."""
        return torch.log(self.mixed(logits))

    def fitted_params(self) -> dict[str, float]:
        """T and the weights w_ts, w_raw, w_uniform."""
        w = [float(v) for v in self.weights]
        return {"temperature": float(self.temperature), "w_ts": w[0], "w_raw": w[1], "w_uniform": w[2]}

    def fitted_state(self) -> dict[str, Any]:
        return {"kind": self.name, "temperature_loss": self.temperature_loss,
                "temperature": torch.tensor(self.temperature, dtype=torch.float64), "weights": self.weights.clone()}

    def load_fitted_state(self, state: dict[str, Any]) -> None:
        for key in ("temperature", "weights"):
            if key not in state:
                raise ValueError(f"state_dict has no {key!r} entry")
        t = float(state["temperature"])
        w = torch.as_tensor(state["weights"], dtype=torch.float64).cpu().flatten()
        if not t > 0 or not math.isfinite(t):
            raise ValueError(f"temperature must be a finite number > 0, got {t}")
        if w.shape != (3,) or bool((w < 0).any()) or abs(float(w.sum()) - 1.0) > 1e-9:
            raise ValueError(f"weights must be 3 numbers ≥ 0 summing to 1, got {w.tolist()}")
        self.temperature, self.weights = t, w
        self.temperature_loss = state.get("temperature_loss", self.temperature_loss)
        self.fitted = True

    def __repr__(self) -> str:
        w = ", ".join(f"{v:.3g}" for v in self.weights.tolist())
        return f"EnsembleTemperatureScaling(temperature={self.temperature:.4g}, weights=({w}))"
