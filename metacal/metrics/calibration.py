"""Top-label calibration errors with hard bins: ECE, MCE, RMSCE, ACE, ECE-sweep, KS error, ECE vs #bins.

Binned calibration error of order p (Karandikar et al. 2021, eq. 6; Guo et al. 2017 / Wang, Feng & Zhang 2021, §2 for p = 1)::

    CE_p = ( Σ_b (n_b / N) |A_b − C_b|^p )^(1/p),     CE_max = max_{b: n_b > 0} |A_b − C_b|

with C_b the mean top-label confidence and A_b the accuracy of bin b (empty bins contribute nothing and are
ignored by the max). ECE = CE_1 equal width, RMSCE = CE_2 equal width, MCE = CE_max equal width,
ACE = CE_1 equal mass (top-label adaptive ECE, Mukhoti et al. 2020; our bins hold the ranks [⌊bN/M⌋, ⌊(b+1)N/M⌋),
whereas focal_calibration's interpolated edges shift every bin up by one rank and leave the least confident
sample in no bin, see :mod:`.binning`; Wang & Golebiowski 2024, eq. 15 defines a class-wise variant, see
``classwise.classwise_ace``).
All values are fractions.
"""

from __future__ import annotations

from typing import Sequence

import torch

from .binning import bin_statistics
from .inputs import array_inputs, check_conf_correct, check_num_bins, check_probs_labels, top_label

NORMS = ("l1", "l2", "max")


@array_inputs("conf", "correct")
def calibration_error_from_confidence(
    conf: torch.Tensor, correct: torch.Tensor, num_bins: int = 15, scheme: str = "width", norm: str = "l1"
) -> torch.Tensor:
    """CE_p of 1-D confidences and 0/1 correctness (module docstring); a 0-dim tensor on conf's device."""
    if norm not in NORMS:
        raise ValueError(f"unknown norm {norm!r}; choose one of {', '.join(NORMS)}")
    stats = bin_statistics(conf, correct, num_bins, scheme)
    keep = stats.nonempty
    gap = stats.gap[keep]
    if norm == "max":
        return gap.max()
    weight = stats.count[keep].to(gap.dtype) / conf.shape[0]
    if norm == "l1":
        return (weight * gap).sum()
    return (weight * gap * gap).sum().sqrt()


@array_inputs("probs", "labels")
def calibration_error(
    probs: torch.Tensor, labels: torch.Tensor, num_bins: int = 15, scheme: str = "width", norm: str = "l1"
) -> torch.Tensor:
    """Top-label CE of N×K probabilities against labels; see module docstring."""
    check_probs_labels(probs, labels)
    conf, _, correct = top_label(probs, labels)
    return calibration_error_from_confidence(conf, correct, num_bins, scheme, norm)


@array_inputs("probs", "labels")
def ece(probs: torch.Tensor, labels: torch.Tensor, num_bins: int = 15) -> torch.Tensor:
    """Expected calibration error, equal width, ℓ1 (Guo et al. 2017; Wang, Feng & Zhang 2021, §2)."""
    return calibration_error(probs, labels, num_bins, "width", "l1")


@array_inputs("probs", "labels")
def mce(probs: torch.Tensor, labels: torch.Tensor, num_bins: int = 15) -> torch.Tensor:
    """Maximum calibration error over non-empty equal-width bins."""
    return calibration_error(probs, labels, num_bins, "width", "max")


@array_inputs("probs", "labels")
def rmsce(probs: torch.Tensor, labels: torch.Tensor, num_bins: int = 15) -> torch.Tensor:
    """Root-mean-square calibration error, equal width, ℓ2 (Karandikar et al. 2021, eq. 6 with p = 2)."""
    return calibration_error(probs, labels, num_bins, "width", "l2")


@array_inputs("probs", "labels")
def ace(probs: torch.Tensor, labels: torch.Tensor, num_bins: int = 15) -> torch.Tensor:
    """Adaptive (equal-mass) top-label ECE, ℓ1."""
    return calibration_error(probs, labels, num_bins, "mass", "l1")


@array_inputs("probs", "labels")
def ece_vs_bins(
    probs: torch.Tensor, labels: torch.Tensor, bins: Sequence[int] = (10, 20, 50, 100, 200, 500, 1000)
) -> dict[str, list]:
    """Equal-width ECE and MCE for each bin count (Wang & Golebiowski 2024, §5, Fig. 5: 10…1000 bins).

    Returns ``{"bins": [...], "ece": [...], "mce": [...]}`` (floats, fractions).
    """
    check_probs_labels(probs, labels)
    conf, _, correct = top_label(probs, labels)
    out: dict[str, list] = {"bins": [], "ece": [], "mce": []}
    for m in bins:
        m = check_num_bins(m)
        out["bins"].append(m)
        out["ece"].append(float(calibration_error_from_confidence(conf, correct, m, "width", "l1")))
        out["mce"].append(float(calibration_error_from_confidence(conf, correct, m, "width", "max")))
    return out


@array_inputs("conf", "correct")
def ece_sweep_from_confidence(
    conf: torch.Tensor, correct: torch.Tensor, norm: str = "l1", max_bins: int | None = None
) -> tuple[torch.Tensor, int]:
    """ECE_sweep (Roelofs et al. 2022): equal-mass CE at the largest bin count whose bin accuracies are monotone.

    Bin counts M = 1, 2, ... are tried in turn; the sweep stops at the first M whose accuracies over the
    non-empty bins (ordered by confidence) are not non-decreasing, and the CE at M − 1 bins is returned
    together with M − 1. ``max_bins`` caps the sweep (default N).
    """
    check_conf_correct(conf, correct)
    n = conf.shape[0]
    limit = n if max_bins is None else min(n, check_num_bins(max_bins))
    best = 1
    for m in range(2, limit + 1):
        stats = bin_statistics(conf, correct, m, "mass")
        acc = stats.accuracy[stats.nonempty]
        if bool((acc[1:] < acc[:-1]).any()):
            break
        best = m
    return calibration_error_from_confidence(conf, correct, best, "mass", norm), best


@array_inputs("probs", "labels")
def ece_sweep(probs: torch.Tensor, labels: torch.Tensor, norm: str = "l1") -> torch.Tensor:
    """ECE_sweep of N×K probabilities (equal mass, monotone sweep; Roelofs et al. 2022)."""
    check_probs_labels(probs, labels)
    conf, _, correct = top_label(probs, labels)
    return ece_sweep_from_confidence(conf, correct, norm)[0]


@array_inputs("conf", "correct")
def ks_error_from_confidence(conf: torch.Tensor, correct: torch.Tensor) -> torch.Tensor:
    """KS calibration error (Gupta et al. 2021, binning-free).

    Sort by confidence; KS = max_i |(1/N) Σ_{j≤i} (c_j − a_j)|. The maximum is taken only at the last index of
    each group of tied confidences (and 0 at the start), so the value does not depend on the order of ties.
    """
    check_conf_correct(conf, correct)
    correct = correct.to(dtype=conf.dtype, device=conf.device)
    sorted_conf, order = torch.sort(conf)
    cum = torch.cumsum(sorted_conf - correct[order], dim=0) / conf.shape[0]
    group_end = torch.ones_like(sorted_conf, dtype=torch.bool)
    group_end[:-1] = sorted_conf[1:] != sorted_conf[:-1]
    return cum[group_end].abs().max().clamp_min(0.0)


@array_inputs("probs", "labels")
def ks_error(probs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """KS calibration error of the top-label confidence of N×K probabilities."""
    check_probs_labels(probs, labels)
    conf, _, correct = top_label(probs, labels)
    return ks_error_from_confidence(conf, correct)
