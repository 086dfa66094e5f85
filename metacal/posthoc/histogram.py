"""Histogram binning (Zadrozny & Elkan 2001; Wang, Feng & Zhang 2021, §2, markus93/NN_calibration): equal-width bins, each
bin maps to the accuracy observed in it on the fitting (validation) set.

* ``mode="top"`` (Wang, Feng & Zhang 2021: "equal size binning on the top-1 prediction", 15 bins): the top-label
  confidence c ∈ bin b becomes η_b = accuracy of the fitting samples in b. The calibrated vector puts η_b on
  the predicted class and spreads 1 − η_b over the other classes in proportion to their probabilities;
  where that would lift another class above η_b (or the others are all 0) the split is uniform instead,
  so the predicted class is kept whenever η_b > 1/K (ties at exactly 1/K; below 1/K no probability vector
  can keep it, and the first maximal class — usually another one — becomes the prediction).
* ``mode="ovr"`` (one-vs-rest): every class c has its own bins on p_c with η_bc = fraction of fitting
  samples in the bin whose label is c; the calibrated scores are renormalised to sum to 1 (a row whose
  scores are all 0 keeps its input probabilities).

Bins are (lower, upper] with 0 in the first and 1.0 in the top bin. A bin with no fitting samples has no
estimate (stored as NaN) and leaves the input value unchanged.
"""

from __future__ import annotations

from typing import Any

import torch

from metacal.metrics.binning import grouped_sums, width_bin_index
from metacal.metrics.inputs import array_inputs, check_num_bins, check_probs_labels

from .base import Calibrator

MODES = ("top", "ovr")


class HistogramBinning(Calibrator):
    """Fitted histogram binning: ``fit(probs, labels)`` → self, ``transform(probs)`` → probs (a tensor); inputs
    may be tensors, numpy arrays or lists. A lookup: ``forward`` is the logarithm of ``transform``, not exported."""

    def __init__(self, num_bins: int = 15, mode: str = "top") -> None:
        super().__init__()
        if mode not in MODES:
            raise ValueError(f"unknown histogram-binning mode {mode!r}; choose one of {', '.join(MODES)}")
        self.num_bins = check_num_bins(num_bins)
        self.mode = mode
        self.bin_values: torch.Tensor | None = None  # (M,) for "top", (K, M) for "ovr"; NaN = empty bin

    @array_inputs("probs", "labels")
    def fit(self, probs: torch.Tensor, labels: torch.Tensor) -> "HistogramBinning":
        check_probs_labels(probs, labels)
        p = probs.detach().double()
        y = labels.to(p.device).long()
        m = self.num_bins
        if self.mode == "top":
            conf, pred = p.max(dim=1)
            count, hits = grouped_sums(width_bin_index(conf, m), m, (pred == y).double())
            values = hits / count.clamp_min(1)
        else:
            k = p.shape[1]
            hit = torch.nn.functional.one_hot(y, k).double()
            group = width_bin_index(p, m) + m * torch.arange(k, device=p.device)
            count, hits = grouped_sums(group.reshape(-1), k * m, hit.reshape(-1))
            values = (hits / count.clamp_min(1)).reshape(k, m)
            count = count.reshape(k, m)
        self.bin_values = torch.where(count > 0, values, torch.full_like(values, float("nan"))).cpu()
        return self

    def _check_fitted(self, probs: torch.Tensor) -> torch.Tensor:
        if self.bin_values is None:
            raise RuntimeError("HistogramBinning.transform() called before fit() or load_state_dict()")
        if probs.dim() != 2:
            raise ValueError(f"probs must be N×K, got {tuple(probs.shape)}")
        if self.mode == "ovr" and probs.shape[1] != self.bin_values.shape[0]:
            raise ValueError(f"fitted for {self.bin_values.shape[0]} classes, got probs with {probs.shape[1]}")
        return self.bin_values.to(device=probs.device, dtype=probs.dtype)

    @array_inputs("conf")
    def calibrate_confidence(self, conf: torch.Tensor) -> torch.Tensor:
        """η_b of each top-label confidence ("top" mode); the input where the bin was empty."""
        if self.mode != "top":
            raise ValueError("calibrate_confidence() needs mode='top'; use transform() for one-vs-rest")
        values = self._check_fitted(conf.unsqueeze(1))
        eta = values[width_bin_index(conf, self.num_bins)]
        return torch.where(torch.isnan(eta), conf, eta)

    @array_inputs("probs")
    def transform(self, probs: torch.Tensor) -> torch.Tensor:
        values = self._check_fitted(probs)
        if self.mode == "top":
            conf, pred = probs.max(dim=1)
            eta = self.calibrate_confidence(conf)
            top = torch.nn.functional.one_hot(pred, probs.shape[1]).bool()
            rest = probs.masked_fill(top, 0.0)
            rest_sum = rest.sum(dim=1, keepdim=True)
            uniform = (~top).to(probs.dtype) / max(probs.shape[1] - 1, 1)
            share = torch.where(rest_sum > 0, rest / rest_sum.clamp_min(torch.finfo(probs.dtype).tiny), uniform)
            others = (1.0 - eta).unsqueeze(1) * share
            overtakes = (others > eta.unsqueeze(1)).any(dim=1, keepdim=True)
            others = torch.where(overtakes, (1.0 - eta).unsqueeze(1) * uniform, others)
            return torch.where(top, eta.unsqueeze(1), others)
        k = probs.shape[1]
        idx = width_bin_index(probs, self.num_bins)  # (N, K)
        eta = values[torch.arange(k, device=probs.device).expand_as(idx), idx]
        scores = torch.where(torch.isnan(eta), probs, eta)
        total = scores.sum(dim=1, keepdim=True)
        return torch.where(total > 0, scores / total.clamp_min(torch.finfo(probs.dtype).tiny), probs)

    def fitted_state(self) -> dict[str, Any]:
        return {"mode": self.mode, "num_bins": self.num_bins, "bin_values": self.bin_values}

    def load_fitted_state(self, state: dict[str, Any]) -> None:
        for key in ("mode", "num_bins", "bin_values"):
            if key not in state:
                raise ValueError(f"state_dict has no {key!r} entry")
        if state["mode"] not in MODES:
            raise ValueError(f"unknown histogram-binning mode {state['mode']!r}")
        self.mode = state["mode"]
        self.num_bins = check_num_bins(state["num_bins"])
        self.bin_values = torch.as_tensor(state["bin_values"], dtype=torch.float64).cpu()

    def __repr__(self) -> str:
        return f"HistogramBinning(num_bins={self.num_bins}, mode={self.mode!r})"
