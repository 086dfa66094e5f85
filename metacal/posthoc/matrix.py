"""Matrix scaling with ODIR (Guo et al. 2017, §4.2; Kull et al. 2019, §4 "MS-ODIR"): q = softmax(W z + b), a
full K×K matrix W and an intercept b on held-out LOGITS, fitted by minimum mean NLL plus

    λ/(K(K−1)) Σ_{i≠j} W_ij² + μ/K Σ_i b_i²

(:mod:`metacal.posthoc.affine`). ``reg_lambda="cv"`` (default) chooses λ = μ by 5-fold cross-validated NLL on
the fitting set (:mod:`metacal.posthoc.odir`); a number fixes λ, and μ = ``reg_mu`` (default: μ = λ).
Unregularised (λ = μ = 0) it is multinomial logistic regression on the logits; λ → ∞ leaves a diagonal W,
i.e. vector scaling.
"""

from __future__ import annotations

from typing import Sequence

import torch

from .affine import MAX_ITER, AffineCalibrator
from .odir import CV_FOLDS, ODIR_GRID, select_odir


class ODIRCalibrator(AffineCalibrator):
    """A full-matrix affine calibrator whose λ, μ are fixed or chosen by cross-validation (``odir_scores``:
    the held-out NLL per grid value after a CV fit)."""

    def __init__(self, reg_lambda: float | str = "cv", reg_mu: float | None = None,
                 grid: Sequence[float] = ODIR_GRID, folds: int = CV_FOLDS, seed: int = 0,
                 max_iter: int = MAX_ITER) -> None:
        super().__init__(max_iter)
        if isinstance(reg_lambda, str):
            if reg_lambda != "cv":
                raise ValueError(f"reg_lambda must be a number ≥ 0 or 'cv', got {reg_lambda!r}")
            if reg_mu is not None:
                raise ValueError("reg_mu needs a fixed reg_lambda; 'cv' chooses λ = μ together")
        elif not float(reg_lambda) >= 0 or (reg_mu is not None and not float(reg_mu) >= 0):
            raise ValueError(f"reg_lambda and reg_mu must be ≥ 0, got {reg_lambda}, {reg_mu}")
        self.reg_lambda = reg_lambda
        self.reg_mu = reg_mu
        self.grid = tuple(float(v) for v in grid)
        self.folds, self.seed = int(folds), int(seed)
        self.odir_scores: torch.Tensor | None = None

    def fitted_params(self) -> dict[str, float]:
        """λ and μ of the final fit."""
        return {"reg_lambda": self.reg_lambda_used, "reg_mu": self.reg_mu_used}

    def _regularisation(self, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
        if self.reg_lambda == "cv":
            strength, self.odir_scores = select_odir(x, y, self.diagonal, self.grid, self.folds, self.seed,
                                                     self.max_iter)
            return strength, strength
        lam = float(self.reg_lambda)
        return lam, lam if self.reg_mu is None else float(self.reg_mu)


class MatrixScaling(ODIRCalibrator):
    """softmax(W z + b) on logits, ODIR-regularised (module docstring)."""

    name = "matrix scaling"
