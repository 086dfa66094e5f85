"""Label-based estimators of the top-label calibration error compared against the truth in ``ground_truth``.

Of the L1 error E|E[c | conf] − conf|: ECE-15 / ECE-100 (equal width), ACE-15 (equal mass), ECE-sweep (equal mass at
the largest monotone bin count, Roelofs et al. 2022), SECE (Wang & Golebiowski 2024, eq. 8, Gaussian kernel
h = 0.01, hard accuracy), KDE-ECE (Zhang et al. 2020, triweight kernel) and smECE (Błasiok & Nakkiran 2023,
relplot). Of the L2 error sqrt E(E[c | conf] − conf)² (``TARGETS``): RMSCE-15, the plug-in, and L2-debiased-15
(Kumar, Liang & Ma 2019: the plug-in minus each bin's label variance, sqrt(max(·, 0))), both equal width —
all from metacal.metrics, except that SECE on more than ``EXACT_SECE_MAX`` samples uses ``sece_grid``
(the same formula with the kernel sums evaluated on a fine grid: O(N + G log G) instead of O(N²); tested
against the exact metric).
"""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F

from metacal import metrics

EXACT_SECE_MAX = 2048
GRID_SIZE = 8193  # grid spacing 1.2e-4 = h/80 at h = 0.01


def sece_grid(conf: torch.Tensor, correct: torch.Tensor, bandwidth: float = 0.01, grid_size: int = GRID_SIZE) -> float:
    """SECE = (1/N) Σ_i |Σ_j K(c_i−c_j) a_j / Σ_j K(c_i−c_j) − c_i| with Gaussian K (Wang & Golebiowski 2024,
    eq. 8), the sums Σ_j K(g − c_j)·{a_j, 1} computed on a uniform grid over [0, 1] (linear binning + discrete convolution)
    and linearly interpolated at each c_i."""
    conf = conf.double().clamp(0, 1).reshape(-1)
    a = correct.double().reshape(-1).to(conf.device)
    spacing = 1.0 / (grid_size - 1)
    pos = conf / spacing
    lo = pos.floor().long().clamp(max=grid_size - 2)
    w = pos - lo
    sums = conf.new_zeros(2, grid_size)
    for row, values in enumerate((a, torch.ones_like(a))):
        sums[row].index_add_(0, lo, (1 - w) * values)
        sums[row].index_add_(0, lo + 1, w * values)
    half = math.ceil(8 * bandwidth / spacing)
    offsets = torch.arange(-half, half + 1, dtype=conf.dtype, device=conf.device) * spacing
    kernel = torch.exp(-offsets.square() / (2 * bandwidth * bandwidth))
    smoothed = F.conv1d(sums.unsqueeze(1), kernel.view(1, 1, -1), padding=half).squeeze(1)  # symmetric kernel
    at = (1 - w) * smoothed[:, lo] + w * smoothed[:, lo + 1]
    return float((at[0] / at[1] - conf).abs().mean())


def sece_estimate(probs: torch.Tensor, labels: torch.Tensor, bandwidth: float = 0.01) -> float:
    if probs.shape[0] <= EXACT_SECE_MAX:
        return float(metrics.sece_metric(probs, labels, bandwidth))
    conf, pred = probs.max(dim=1)
    return sece_grid(conf, (pred == labels).double(), bandwidth)


ESTIMATORS: dict[str, Callable[[torch.Tensor, torch.Tensor], float]] = {
    "ECE-15": lambda p, y: float(metrics.ece(p, y, 15)),
    "ECE-100": lambda p, y: float(metrics.ece(p, y, 100)),
    "ACE-15": lambda p, y: float(metrics.ace(p, y, 15)),
    "SECE": sece_estimate,
    "KDE-ECE": lambda p, y: float(metrics.kde_ece(p, y)),
    "smECE": lambda p, y: float(metrics.smece(p, y)),
    "ECE-sweep": lambda p, y: float(metrics.ece_sweep(p, y)),
    "RMSCE-15": lambda p, y: float(metrics.rmsce(p, y, 15)),
    "L2-debiased-15": lambda p, y: float(metrics.debiased_l2_ce(p, y, 15)),
}
# which true calibration error each estimator is compared with: "l1" (TCE) unless listed here
TARGETS: dict[str, str] = {"RMSCE-15": "l2", "L2-debiased-15": "l2"}
