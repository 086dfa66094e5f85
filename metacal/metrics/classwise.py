"""Class-wise calibration errors: every class c binned on its own probability p_c (Nixon et al. 2019).

Classwise ECE (Wang & Golebiowski 2024, eq. 14), equal-width bins per class::

    CECE = Σ_c Σ_m |b_mc| / (N K) · |acc(b_mc) − conf(b_mc)|

acc(b_mc) = fraction of samples in bin b_mc whose label is c; conf(b_mc) = mean p_c there. K is the width of
``probs`` (never max(label) + 1). Bins (lower, upper], 0 in the first and 1.0 in the top bin, empty bins skipped.

Classwise ACE (Wang & Golebiowski 2024, eq. 15): R equal-mass ranges per class, each range weighted 1/(RK) (empty ranges,
possible only with N < R or ties, are skipped).
"""

from __future__ import annotations

import torch

from .binning import grouped_sums, mass_bin_index, width_bin_index
from .inputs import array_inputs, check_num_bins, check_probs_labels


def _onehot(probs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.one_hot(labels.to(probs.device).long(), probs.shape[1]).to(probs.dtype)


@array_inputs("probs", "labels")
def classwise_ece(probs: torch.Tensor, labels: torch.Tensor, num_bins: int = 15) -> torch.Tensor:
    """Classwise ECE (Wang & Golebiowski 2024, eq. 14), a fraction."""
    check_probs_labels(probs, labels)
    num_bins = check_num_bins(num_bins)
    n, k = probs.shape
    hit = _onehot(probs, labels)
    group = width_bin_index(probs, num_bins) + num_bins * torch.arange(k, device=probs.device)  # (N, K)
    count, sum_p, sum_hit = grouped_sums(group.reshape(-1), k * num_bins, probs.reshape(-1), hit.reshape(-1))
    gap = (sum_hit - sum_p).abs()  # = count · |acc − conf|, 0 for empty bins
    return gap.sum() / (n * k)


@array_inputs("probs", "labels")
def classwise_ace(probs: torch.Tensor, labels: torch.Tensor, num_ranges: int = 15) -> torch.Tensor:
    """Classwise adaptive ECE (Wang & Golebiowski 2024, eq. 15): Σ_c Σ_r |acc(b_rc) − conf(b_rc)| / (R K) over
    equal-mass ranges."""
    check_probs_labels(probs, labels)
    num_ranges = check_num_bins(num_ranges)
    k = probs.shape[1]
    hit = _onehot(probs, labels)
    total = probs.new_zeros(())
    for c in range(k):  # loop over classes (not samples): each class has its own quantile ranges
        index, _ = mass_bin_index(probs[:, c], num_ranges)
        count, sum_p, sum_hit = grouped_sums(index, num_ranges, probs[:, c], hit[:, c])
        keep = count > 0
        total = total + ((sum_hit[keep] - sum_p[keep]).abs() / count[keep]).sum()
    return total / (num_ranges * k)
