"""Hard binning of confidences and per-bin statistics (the tables behind ECE and reliability diagrams).

Conventions (docs/conventions.md#metrics; as gpleiss / focal_calibration): bins are (lower, upper]; a confidence of exactly 0
goes to the first bin and exactly 1.0 to the top bin (torchmetrics instead opens an extra bin for 1.0).

* ``scheme="width"``: M equal-width bins with edges 0, 1/M, ..., 1.
* ``scheme="mass"`` (equal mass, Nixon et al. 2019; Karandikar et al. 2021, eq. 6): confidences sorted ascending, bin b holds
  the ranks [⌊bN/M⌋, ⌊(b+1)N/M⌋). Tied confidences always share a bin — the bin of the tie group's lowest rank —
  so the result does not depend on input order (bins may then be unequal or empty). Edges: e_0 = 0, e_M = 1 and
  e_b = largest confidence of bins < b, so that every bin is again (e_b, e_{b+1}].
  focal_calibration's adaptive ECE differs (docs/conventions.md#ace): its edges interpolate the sorted
  confidences at positions bN/M (the last one clamped to the maximum) and its bins are (lower, upper], so with
  distinct confidences its bin b holds the ranks ⌊bN/M⌋ + 1 … ⌊(b+1)N/M⌋ (the last bin up to N − 1) — every
  bin shifted up by one rank from ours. The only sample in no bin is the global minimum (it equals the lowest
  edge), yet the weights still divide by N, so they sum to (N − 1)/N. We do not reproduce this.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .inputs import array_inputs, check_conf_correct, check_num_bins

SCHEMES = ("width", "mass")


def width_bin_index(conf: torch.Tensor, num_bins: int) -> torch.Tensor:
    """Index b ∈ [0, M) of the equal-width bin (b/M, (b+1)/M] holding each confidence (0 → bin 0, 1 → bin M−1)."""
    inner = torch.linspace(0.0, 1.0, num_bins + 1, dtype=conf.dtype, device=conf.device)[1:-1]
    # bucketize(right=False) returns i with inner[i-1] < c <= inner[i]: the (lower, upper] convention.
    return torch.bucketize(conf, inner, right=False).clamp_(0, num_bins - 1)


def mass_bin_index(conf: torch.Tensor, num_bins: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Equal-mass bin index of each confidence and the M+1 edges (see module docstring for ties)."""
    n = conf.shape[0]
    sorted_conf, order = torch.sort(conf, stable=True)
    # lowest rank of each value's tie group
    min_rank = torch.searchsorted(sorted_conf, sorted_conf, right=False)
    starts = (torch.arange(num_bins, device=conf.device) * n) // num_bins  # first rank of each bin
    sorted_bins = torch.searchsorted(starts, min_rank, right=True) - 1
    index = torch.empty_like(sorted_bins)
    index[order] = sorted_bins
    # edges: e_0 = 0, e_{b+1} = max confidence in bins <= b (carried over empty bins), e_M = 1
    upper = torch.full((num_bins,), float("-inf"), dtype=conf.dtype, device=conf.device)
    upper = upper.scatter_reduce(0, sorted_bins, sorted_conf, reduce="amax")
    upper = torch.cummax(upper, dim=0).values.clamp_min(0.0)
    edges = torch.cat([conf.new_zeros(1), upper[:-1], conf.new_ones(1)])
    return index, edges


def bin_index(conf: torch.Tensor, num_bins: int, scheme: str = "width") -> tuple[torch.Tensor, torch.Tensor]:
    """(bin index per sample, M+1 edges) for ``scheme`` ∈ {"width", "mass"}."""
    num_bins = check_num_bins(num_bins)
    if scheme == "width":
        edges = torch.linspace(0.0, 1.0, num_bins + 1, dtype=conf.dtype, device=conf.device)
        return width_bin_index(conf, num_bins), edges
    if scheme == "mass":
        return mass_bin_index(conf, num_bins)
    raise ValueError(f"unknown binning scheme {scheme!r}; choose one of {', '.join(SCHEMES)}")


def grouped_sums(
    index: torch.Tensor, num_groups: int, *values: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """(count, Σ values_1, Σ values_2, ...) per group for integer group ``index`` (scatter-add, no loops)."""
    dtype = values[0].dtype if values else torch.float64
    count = torch.zeros(num_groups, dtype=dtype, device=index.device).index_add_(
        0, index, torch.ones_like(index, dtype=dtype)
    )
    sums = tuple(torch.zeros(num_groups, dtype=v.dtype, device=v.device).index_add_(0, index, v) for v in values)
    return (count, *sums)


@dataclass
class BinStatistics:
    """Per-bin table: ``edges`` (M+1), ``count`` (M), ``mean_confidence`` and ``accuracy`` (M, NaN if empty)."""

    edges: torch.Tensor
    count: torch.Tensor
    mean_confidence: torch.Tensor
    accuracy: torch.Tensor

    @property
    def nonempty(self) -> torch.Tensor:
        return self.count > 0

    @property
    def gap(self) -> torch.Tensor:
        """|accuracy − mean confidence| per bin (NaN for empty bins)."""
        return (self.accuracy - self.mean_confidence).abs()

    @property
    def weight(self) -> torch.Tensor:
        """n_b / N per bin."""
        return self.count / self.count.sum()


@array_inputs("conf", "correct")
def bin_statistics(
    conf: torch.Tensor, correct: torch.Tensor, num_bins: int = 15, scheme: str = "width"
) -> BinStatistics:
    """Per-bin edges, counts, mean confidence C_b and accuracy A_b (Karandikar et al. 2021, eq. 3–5) of 1-D conf/correct."""
    check_conf_correct(conf, correct)
    correct = correct.to(dtype=conf.dtype, device=conf.device)
    index, edges = bin_index(conf, num_bins, scheme)
    count, sum_conf, sum_correct = grouped_sums(index, int(num_bins), conf, correct)
    safe = count.clamp_min(1)
    nan = torch.full_like(count, float("nan"))
    mean_conf = torch.where(count > 0, sum_conf / safe, nan)
    accuracy = torch.where(count > 0, sum_correct / safe, nan)
    return BinStatistics(edges=edges, count=count.long(), mean_confidence=mean_conf, accuracy=accuracy)
