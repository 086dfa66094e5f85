"""Temperature scaling (Guo et al. 2017): probs = softmax(z / T) with one scalar T > 0 fitted on held-out LOGITS.

Fitting criteria (docs/conventions.md#posthoc):

* ``"nll"``: minimise the mean cross-entropy over s with T = exp(s) (keeps T > 0), LBFGS with strong-Wolfe
  line search, in float64, started at T = 1 (gpleiss/temperature_scaling). NLL is convex in 1/T, so
  the fitted T never has a higher fitting-set NLL than T = 1 (checked, and T = 1 kept if LBFGS fails).
  T is kept within [1e-2, 1e2].
* ``"ece_grid"``: T ∈ {0.1, 0.2, …, 10.0} (focal_calibration, Lin et al. 2025) minimising equal-width ECE with
  ``num_bins`` bins; ``grid=`` gives another grid (Wang, Feng & Zhang 2021 search 0.01…10). The first minimiser wins ties.
  Correctness does not change with T (argmax is invariant), only the confidences do.
* ``"sbece"`` (Karandikar et al. 2021, §5.2, "TS-SB-ECE"): the same grid search minimising the soft-binned ECE of
  softmax(z/T), computed by ``metacal.objectives.sbece``.

Always fit on logits, never on probabilities (torch-uncertainty #179, netcal #55); ``fit`` refuses input whose
every row lies in [0, 1] and sums to 1 (:mod:`metacal.posthoc._checks`). With probabilities only, pass
log-probabilities as logits (softmax(log p / T) ∝ p^(1/T)).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from metacal.metrics.calibration import calibration_error_from_confidence
from metacal.metrics.inputs import array_inputs
from metacal.objectives._inputs import check_logits_targets

from ._checks import refuse_probabilities
from .base import Calibrator

METHODS = ("nll", "ece_grid", "sbece")
T_MIN, T_MAX = 1e-2, 1e2


def default_grid() -> torch.Tensor:
    """0.1, 0.2, …, 10.0 (100 values, float64, exact decimals up to rounding)."""
    return torch.arange(1, 101, dtype=torch.float64) / 10.0


@array_inputs("logits", "labels")
def fit_temperature_nll(logits: torch.Tensor, labels: torch.Tensor, max_iter: int = 100) -> float:
    """T = exp(s*) with s* = argmin_s mean CE(z e^(−s), y) by LBFGS (float64); see module docstring."""
    z = logits.detach().double()
    y = labels.to(z.device).long()
    log_t = torch.zeros((), dtype=z.dtype, device=z.device, requires_grad=True)
    opt = torch.optim.LBFGS([log_t], lr=1.0, max_iter=max_iter, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(z * torch.exp(-log_t), y)
        loss.backward()
        return loss

    opt.step(closure)
    t = float(torch.exp(log_t.detach()).clamp(T_MIN, T_MAX))
    if not torch.isfinite(torch.tensor(t)):
        return 1.0
    with torch.no_grad():
        at_one = torch.nn.functional.cross_entropy(z, y)
        at_t = torch.nn.functional.cross_entropy(z / t, y)
    return t if at_t <= at_one else 1.0


def grid_search(values: torch.Tensor, objective) -> tuple[float, torch.Tensor]:
    """(first argmin T, objective per grid value) of ``objective(T) -> float tensor`` over ``values``."""
    scores = torch.stack([torch.as_tensor(objective(float(t)), dtype=torch.float64).cpu() for t in values])
    return float(values[int(torch.argmin(scores))]), scores


class TemperatureScaling(Calibrator):
    """Fitted temperature scaling. ``fit(logits, labels)`` → self; ``transform(logits)`` → probabilities
    (a tensor), ``forward`` their logarithm. Inputs may be tensors, numpy arrays or lists (e.g. the arrays of a
    run's predictions .npz).

    Args:
        method: ``"nll"`` | ``"ece_grid"`` | ``"sbece"`` (module docstring).
        num_bins: bins of the ECE used by ``"ece_grid"`` (15).
        grid: temperatures searched by the grid methods (default 0.1…10.0 step 0.1).
        sbece_params: keyword arguments for ``metacal.objectives.sbece`` (``"sbece"`` only).
    """

    def __init__(
        self,
        method: str = "nll",
        num_bins: int = 15,
        grid: Sequence[float] | torch.Tensor | None = None,
        sbece_params: dict[str, Any] | None = None,
        max_iter: int = 100,
    ) -> None:
        super().__init__()
        if method not in METHODS:
            raise ValueError(f"unknown temperature-scaling method {method!r}; choose one of {', '.join(METHODS)}")
        self.method = method
        self.num_bins = int(num_bins)
        self.grid = default_grid() if grid is None else torch.as_tensor(grid, dtype=torch.float64).flatten()
        if self.grid.numel() == 0 or bool((self.grid <= 0).any()):
            raise ValueError("grid must hold at least one temperature, all > 0")
        self.sbece_params = dict(sbece_params or {})
        self.max_iter = max_iter
        self.temperature = 1.0
        self.grid_scores: torch.Tensor | None = None
        self.fitted = False

    @array_inputs("logits", "labels")
    def fit(self, logits: torch.Tensor, labels: torch.Tensor) -> "TemperatureScaling":
        check_logits_targets(logits, labels)
        if not bool(torch.isfinite(logits).all()):
            raise ValueError("logits contain NaN or inf; remove or fix those rows")
        refuse_probabilities(logits, "temperature scaling")
        z = logits.detach().double()
        y = labels.to(z.device).long()
        if self.method == "nll":
            self.temperature = fit_temperature_nll(z, y, self.max_iter)
        elif self.method == "ece_grid":
            correct = (z.argmax(dim=1) == y).double()

            def ece_at(t: float) -> torch.Tensor:
                conf = torch.softmax(z / t, dim=1).max(dim=1).values
                return calibration_error_from_confidence(conf, correct, self.num_bins, "width", "l1")

            self.temperature, self.grid_scores = grid_search(self.grid, ece_at)
        else:
            from metacal.objectives import sbece  # the differentiable SB-ECE of the objectives package

            self.temperature, self.grid_scores = grid_search(
                self.grid, lambda t: sbece(z / t, y, **self.sbece_params).detach()
            )
        self.fitted = True
        return self

    @array_inputs("logits")
    def scale(self, logits: torch.Tensor) -> torch.Tensor:
        """z / T in the logits' dtype and device."""
        return logits / self.temperature

    @array_inputs("logits")
    def transform(self, logits: torch.Tensor) -> torch.Tensor:
        """softmax(z / T) (rows sum to 1)."""
        return torch.softmax(self.scale(logits), dim=1)

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        """log softmax(z / T)."""
        return torch.log_softmax(logits / self.temperature, dim=1)

    def fitted_params(self) -> dict[str, float]:
        return {"temperature": float(self.temperature)}

    def fitted_state(self) -> dict[str, Any]:
        return {"method": self.method, "temperature": torch.tensor(self.temperature, dtype=torch.float64)}

    def load_fitted_state(self, state: dict[str, Any]) -> None:
        if "temperature" not in state:
            raise ValueError("state_dict has no 'temperature' entry")
        t = float(state["temperature"])
        if not t > 0:
            raise ValueError(f"temperature must be > 0, got {t}")
        self.temperature = t
        self.method = state.get("method", self.method)
        self.fitted = True

    def __repr__(self) -> str:
        return f"TemperatureScaling(method={self.method!r}, temperature={self.temperature:.4g})"
