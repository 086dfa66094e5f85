"""Isotonic regression, one-vs-rest and renormalised (Zadrozny & Elkan 2002; the multiclass form of Guo et al.
2017, §4.1), fitted on held-out PROBABILITIES.

For every class c, f_c is the non-decreasing function minimising Σ_n (f_c(p_nc) − 1[y_n = c])², computed by
pool-adjacent-violators (PAV, Ayer et al. 1955) in metacal's own code: samples with equal p_nc are first
pooled into one point weighted by their count, then adjacent blocks whose means decrease are merged until the
block means are non-decreasing. Between the distinct fitted inputs f_c is interpolated linearly, outside
them it is constant (the conventions of scikit-learn's ``IsotonicRegression(out_of_bounds="clip")``, used by
netcal and by Guo et al.), so f_c is continuous, non-decreasing and within [0, 1].

The calibrated vector is q_c = f_c(p_c) / Σ_j f_j(p_j); a row whose scores are all 0 keeps its input
probabilities (as histogram binning's one-vs-rest mode does; netcal divides by zero there). A class without
fitting samples gets f_c = 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from metacal.metrics.inputs import array_inputs, check_probs_labels

from .base import Calibrator


def pav(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct x ascending, fitted non-decreasing values there): the least-squares isotonic fit of y on x."""
    xs, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse.reshape(-1), weights=y, minlength=xs.shape[0])
    block_sum, block_weight, block_len = [], [], []
    for s, w in zip(sums.tolist(), counts.tolist()):
        length = 1
        # merge while the previous block's mean exceeds the new one's: s_prev/w_prev > s/w
        while block_sum and block_sum[-1] * w > s * block_weight[-1]:
            s += block_sum.pop()
            w += block_weight.pop()
            length += block_len.pop()
        block_sum.append(s)
        block_weight.append(w)
        block_len.append(length)
    means = np.asarray(block_sum) / np.asarray(block_weight, dtype=np.float64)
    return xs, np.repeat(means, block_len)


class IsotonicCalibration(Calibrator):
    """Fitted one-vs-rest isotonic regression: ``fit(probs, labels)`` → self, ``transform(probs)`` → probs (a
    tensor); inputs may be tensors, numpy arrays or lists. ``scores(probs)`` gives the f_c(p_c) before the
    renormalisation. State: the knots (x, f) of every class. A lookup (numpy interpolation): ``forward`` is the
    logarithm of ``transform``, not exported."""

    name = "isotonic regression"

    def __init__(self) -> None:
        super().__init__()
        self.knots: list[tuple[torch.Tensor, torch.Tensor]] | None = None

    @staticmethod
    def min_samples(num_classes: int) -> int:
        """K: on average one sample per class, i.e. per one-vs-rest fit."""
        return num_classes

    @property
    def num_classes(self) -> int | None:
        return None if self.knots is None else len(self.knots)

    @array_inputs("probs", "labels")
    def fit(self, probs: torch.Tensor, labels: torch.Tensor) -> "IsotonicCalibration":
        check_probs_labels(probs, labels)
        n, k = probs.shape
        if n < self.min_samples(k):
            raise ValueError(f"{self.name} needs at least {self.min_samples(k)} fitting samples for K = {k}, "
                             f"got N = {n}")
        p = probs.detach().double().cpu().numpy()
        y = labels.detach().cpu().numpy()
        knots = []
        for c in range(k):
            xs, fitted = pav(p[:, c], (y == c).astype(np.float64))
            knots.append((torch.from_numpy(xs), torch.from_numpy(fitted)))
        self.knots = knots
        return self

    @array_inputs("probs")
    def scores(self, probs: torch.Tensor) -> torch.Tensor:
        """f_c(p_c) per entry (float64, N×K), before renormalisation."""
        if self.knots is None:
            raise RuntimeError("IsotonicCalibration.transform() called before fit() or load_state_dict()")
        if probs.dim() != 2 or probs.shape[1] != len(self.knots):
            raise ValueError(f"{self.name} was fitted for K = {len(self.knots)} classes, got probs of shape "
                             f"{tuple(probs.shape)}")
        if not bool(torch.isfinite(probs).all()):
            raise ValueError("probs contain NaN or inf; remove or fix those rows")
        p = probs.detach().double().cpu().numpy()
        out = np.empty_like(p)
        for c, (xs, fitted) in enumerate(self.knots):
            out[:, c] = np.interp(p[:, c], xs.numpy(), fitted.numpy())
        return torch.from_numpy(out).to(probs.device)

    @array_inputs("probs")
    def transform(self, probs: torch.Tensor) -> torch.Tensor:
        """q_c = f_c(p_c) / Σ_j f_j(p_j) (float64); rows with Σ_j f_j = 0 keep their input probabilities."""
        s = self.scores(probs)
        total = s.sum(dim=1, keepdim=True)
        return torch.where(total > 0, s / total.clamp_min(torch.finfo(s.dtype).tiny), probs.detach().double())

    def fitted_state(self) -> dict[str, Any]:
        return {"kind": self.name, "x": [x for x, _ in self.knots or []], "f": [f for _, f in self.knots or []]}

    def load_fitted_state(self, state: dict[str, Any]) -> None:
        if "x" not in state or "f" not in state or len(state["x"]) != len(state["f"]) or len(state["x"]) < 2:
            raise ValueError("state_dict needs equally long 'x' and 'f' lists of knots, one per class (K ≥ 2)")
        knots = []
        for x, f in zip(state["x"], state["f"]):
            x, f = torch.as_tensor(x, dtype=torch.float64).cpu(), torch.as_tensor(f, dtype=torch.float64).cpu()
            if x.dim() != 1 or x.shape != f.shape or x.numel() == 0 or bool((x[1:] <= x[:-1]).any()) \
                    or bool((f[1:] < f[:-1]).any()):
                raise ValueError("each class needs increasing knots x and non-decreasing values f of equal length")
            knots.append((x, f))
        self.knots = knots

    def __repr__(self) -> str:
        return f"IsotonicCalibration(K={self.num_classes})"
