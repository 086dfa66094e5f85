"""Top-label calibration errors with hard bins: ECE, MCE, RMSCE, ACE, ECE-sweep, debiased L2, KS error, ECE vs
#bins; and the signed over-confidence mean(confidence) − accuracy.

Binned calibration error of order p (Karandikar et al. 2021, eq. 6; Guo et al. 2017 / Wang, Feng & Zhang 2021, §2 for p = 1)::

    CE_p = ( Σ_b (n_b / N) |A_b − C_b|^p )^(1/p),     CE_max = max_{b: n_b > 0} |A_b − C_b|

with C_b the mean top-label confidence and A_b the accuracy of bin b (empty bins contribute nothing and are
ignored by the max). ECE = CE_1 equal width, RMSCE = CE_2 equal width, MCE = CE_max equal width,
ACE = CE_1 equal mass (top-label adaptive ECE, Mukhoti et al. 2020; our bins hold the ranks [⌊bN/M⌋, ⌊(b+1)N/M⌋),
whereas focal_calibration's interpolated edges shift every bin up by one rank and leave the least confident
sample in no bin, see :mod:`.binning`; Wang & Golebiowski 2024, eq. 15 defines a class-wise variant, see
``classwise.classwise_ace``).
All values are fractions. Every function here is TOP-LABEL: it sees only the confidence max_k p_k and whether
the argmax is right (the class-wise errors are in :mod:`.classwise`).

Debiased L2 calibration error (Kumar, Liang & Ma 2019, "Verified uncertainty calibration", §5 and their
reference code ``unbiased_square_ce``): the plug-in Σ_b (n_b/N)(A_b − C_b)² over-estimates the binned L2² by
the variance of each bin's accuracy estimate, so that variance is subtracted per bin::

    Ê² = Σ_{b: n_b ≥ 2} (n_b / N) [ (A_b − C_b)² − A_b (1 − A_b) / (n_b − 1) ]

A_b(1 − A_b)/(n_b − 1) is the unbiased estimate of Var(A_b) = p_b(1 − p_b)/n_b for n_b Bernoulli(p_b) labels.
Ê² is exactly unbiased for Σ_b P(b)(E[a | b] − C_b)² when the confidence is constant within each bin (the
paper's binned-model setting); with confidences spread inside a bin, the remaining bias per bin is
(n_b/N)(Var(conf | b) − 2 Cov(c, conf | b))/n_b (c = probability that the top label is right), a within-bin
spread over n_b, against the plug-in's p_b(1 − p_b)/n_b. Bins with fewer than 2 samples contribute 0 (as the
reference code). ``debiased_l2_ce`` reports sqrt(max(Ê², 0)) — the reference's ``unbiased_l2_ce`` and the
units of RMSCE, its plug-in counterpart; Ê² itself (``squared=True``, NOT clipped, may be negative) is the
unbiased number to average over seeds or repetitions, since clipping and the root both bias the mean upwards.
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
    together with M − 1. ``max_bins`` caps the sweep (default N). When the accuracies of the tie groups
    (samples sharing one confidence), in confidence order, are already non-decreasing, every equal-mass binning is
    monotone (its bins are runs of consecutive groups), so the sweep goes straight to the cap — e.g. a set that
    is all correct, which would otherwise take N steps.
    """
    check_conf_correct(conf, correct)
    n = conf.shape[0]
    limit = n if max_bins is None else min(n, check_num_bins(max_bins))
    best = limit if _monotone_for_every_bin_count(conf, correct) else 1
    for m in range(best + 1, limit + 1):
        stats = bin_statistics(conf.double(), correct, m, "mass")  # float64 accuracies: exact ratio order
        acc = stats.accuracy[stats.nonempty]
        if bool((acc[1:] < acc[:-1]).any()):
            break
        best = m
    return calibration_error_from_confidence(conf, correct, best, "mass", norm), best


def _monotone_for_every_bin_count(conf: torch.Tensor, correct: torch.Tensor) -> bool:
    """True when the accuracy of each tie group, in confidence order, is non-decreasing."""
    values, group = torch.unique(conf, sorted=True, return_inverse=True)
    zeros = torch.zeros(values.shape[0], dtype=torch.float64, device=conf.device)
    count = zeros.index_add(0, group, torch.ones_like(conf, dtype=torch.float64))
    hits = zeros.index_add(0, group, correct.to(torch.float64))
    acc = hits / count
    return bool((acc[1:] >= acc[:-1]).all())


@array_inputs("probs", "labels")
def ece_sweep(probs: torch.Tensor, labels: torch.Tensor, norm: str = "l1") -> torch.Tensor:
    """Top-label ECE_sweep of N×K probabilities (equal mass, monotone sweep; Roelofs et al. 2022)."""
    check_probs_labels(probs, labels)
    conf, _, correct = top_label(probs, labels)
    return ece_sweep_from_confidence(conf, correct, norm)[0]


@array_inputs("conf", "correct")
def debiased_l2_ce_from_confidence(
    conf: torch.Tensor, correct: torch.Tensor, num_bins: int = 15, scheme: str = "width", squared: bool = False
) -> torch.Tensor:
    """Top-label debiased L2 calibration error (Kumar, Liang & Ma 2019; module docstring): sqrt(max(Ê², 0)), or
    Ê² unclipped with ``squared=True``; a 0-dim tensor."""
    stats = bin_statistics(conf, correct, num_bins, scheme)
    n_b = stats.count.to(conf.dtype)
    keep = stats.count >= 2
    acc, gap = stats.accuracy[keep], (stats.accuracy - stats.mean_confidence)[keep]
    per_bin = gap * gap - acc * (1.0 - acc) / (n_b[keep] - 1.0)
    estimate = (n_b[keep] / conf.shape[0] * per_bin).sum()
    return estimate if squared else estimate.clamp_min(0.0).sqrt()


@array_inputs("probs", "labels")
def debiased_l2_ce(
    probs: torch.Tensor, labels: torch.Tensor, num_bins: int = 15, scheme: str = "width", squared: bool = False
) -> torch.Tensor:
    """Top-label debiased L2 calibration error of N×K probabilities (Kumar, Liang & Ma 2019), equal-width bins by
    default."""
    check_probs_labels(probs, labels)
    conf, _, correct = top_label(probs, labels)
    return debiased_l2_ce_from_confidence(conf, correct, num_bins, scheme, squared)


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


@array_inputs("probs", "labels")
def overconfidence(probs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """mean_i (max_k p_ik − 1[argmax_k p_ik = y_i]) = mean confidence − accuracy: > 0 over-confident, < 0
    under-confident (the sign that ECE, CE_1 over bins, hides; this is the signed error of a single bin)."""
    check_probs_labels(probs, labels)
    conf, _, correct = top_label(probs, labels)
    return (conf - correct).mean()
