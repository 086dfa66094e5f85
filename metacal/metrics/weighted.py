"""The summary metrics of count-weighted samples, for many weight rows at once (the bootstrap's engine).

A weight row w ∈ ℕ^N with Σ_i w_i = N stands for the sample in which example i occurs w_i times: the bootstrap
resample with indices idx has w_i = #{j : idx_j = i}. For every row, each metric here equals the one
``metacal.metrics.summary`` computes on that resample (same bins, same tie rules; tested against a loop of
``summary`` calls), for a (B, N) weight matrix at once:

* Linear in w — the means over samples (error, NLL, Brier) and the sums inside fixed bins: equal-width top-label
  bins (ECE, MCE, RMSCE, debiased L2) and the class-wise bins (classwise ECE, Wang & Golebiowski 2024, eq. 14):
  one sparse (rows × N) matrix, built once, times wᵀ.
* Equal-mass bins (ACE, ECE-sweep) depend on the resample's ranks. The distinct confidences are sorted once
  (tie groups u = 0 … U−1); row w gives group counts W_u and the lowest rank of group u in the resample,
  R_u = Σ_{v<u} W_v. Bin m of M holds the groups with ⌊mN/M⌋ ≤ R_u < ⌊(m+1)N/M⌋ — ``binning.mass_bin_index``'s
  rule, a tie group goes to the bin of its lowest rank — so its sums are differences of prefix sums at
  e_m = first u with R_u ≥ ⌊mN/M⌋ (a batched searchsorted): O(B·M) per bin count, no sort per resample.
* The selective-prediction numbers (AURC, AUGRC, risk at coverage, coverage at risk; metrics.selective) need
  only the same tie groups' weighted counts and errors, most confident first: cumulative sums give every
  resample's risk–coverage curve at once (a group of weight 0 adds no point to that resample's curve).

All arithmetic in float64; bin indices are computed in the input's dtype, as ``summary`` does.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch

from .binning import width_bin_index
from .inputs import check_num_bins, check_probs_labels, top_label
from .scores import NLL_EPS
from .selective import FLAT_KEYS as SELECTIVE_FLAT_KEYS
from .selective import curve_summaries

# metrics computed here, in metacal.metrics.summary's key order (the selective ones flat: "risk_at_coverage@0.8")
WEIGHTED_KEYS = ("error", "nll", "brier", "ece", "mce", "ace", "rmsce", "ece_sweep", "debiased_l2_ce",
                 "classwise_ece", *SELECTIVE_FLAT_KEYS)  # fmt: skip
SQUARED_L2_KEY = "debiased_l2_ce_squared"  # also computed: Ê² unclipped (the basic interval's pivot, .bootstrap)


@dataclass
class BinSums:
    """Per-row, per-bin count, Σ confidence and Σ correct (each (B, M), float64)."""

    count: torch.Tensor
    conf: torch.Tensor
    correct: torch.Tensor

    @property
    def accuracy(self) -> torch.Tensor:
        """Bin accuracy, NaN for an empty bin."""
        return torch.where(self.count > 0, self.correct / self.count.clamp_min(1), float("nan"))


class WeightedSample:
    """The examples of one (probs, labels) set, prepared once for any number of weight rows."""

    def __init__(self, probs: torch.Tensor, labels: torch.Tensor, num_bins: int = 15) -> None:
        check_probs_labels(probs, labels)
        self.num_bins = m = check_num_bins(num_bins)
        probs = probs.detach().cpu()
        labels = labels.detach().cpu().long()
        self.n, self.k = n, k = probs.shape
        conf, _, correct = top_label(probs, labels)
        width_bin = width_bin_index(conf, m)  # in the input's dtype, as summary()
        class_bin = width_bin_index(probs, m) + m * torch.arange(k)  # (N, K)
        probs64, conf, correct = probs.double(), conf.double(), correct.double()
        hit = torch.nn.functional.one_hot(labels, k).double()
        p_true = probs64.gather(1, labels.unsqueeze(1)).squeeze(1)
        per_sample = torch.stack([1.0 - correct, -p_true.clamp_min(NLL_EPS).log(),
                                  (probs64 - hit).pow(2).sum(dim=1)])  # (3, N)
        cols = torch.arange(n)
        width = ([width_bin, m + width_bin, 2 * m + width_bin], [cols] * 3,
                 [torch.ones(n, dtype=torch.float64), conf, correct])
        self._width = _csr(*width, (3 * m, n))  # rows: count, Σ conf, Σ correct per top-label bin
        # rows: error, NLL, Brier per sample | the three width blocks | Σ (hit − p_c) per (class, bin)
        self._linear = _csr([torch.arange(3).repeat_interleave(n), *(3 + r for r in width[0]),
                             (3 + 3 * m + class_bin).reshape(-1)],
                            [cols.repeat(3), *width[1], cols.repeat_interleave(k)],
                            [per_sample.reshape(-1), *width[2], (hit - probs64).reshape(-1)], (3 + 3 * m + k * m, n))
        # equal-mass bins: tie groups of the sorted confidences
        values_sorted, group = torch.unique(conf, sorted=True, return_inverse=True)
        self._group, self._group_conf, self._correct = group, values_sorted, correct
        self.num_groups = int(values_sorted.shape[0])

    def counts(self, index: torch.Tensor) -> torch.Tensor:
        """(B, N) float64 weights of the resamples given by a (B, N) index matrix: w_bi = #{j : index_bj = i}."""
        w = torch.zeros(index.shape[0], self.n, dtype=torch.float64)
        return w.scatter_add_(1, index, torch.ones_like(w))

    def metrics(self, weights: torch.Tensor) -> dict[str, torch.Tensor]:
        """Every ``WEIGHTED_KEYS`` metric per weight row, and ``SQUARED_L2_KEY``: {key: (B,) float64}."""
        m, n = self.num_bins, self.n
        linear = (self._linear @ weights.T.contiguous()).T  # (B, rows)
        top = BinSums(*linear[:, 3:3 + 3 * m].reshape(-1, 3, m).unbind(1))
        out = {"error": linear[:, 0] / n, "nll": linear[:, 1] / n, "brier": linear[:, 2] / n}
        out.update(top_label_width_metrics(top, n))
        out["classwise_ece"] = linear[:, 3 + 3 * m:].abs().sum(dim=1) / (n * self.k)
        mass = _MassBins(self, weights)
        out["ace"] = mass.l1(torch.full((weights.shape[0],), m))
        out["ece_sweep"] = mass.l1(mass.sweep())
        # selective prediction: the same tie groups, most confident first (metrics.selective.curve_summaries)
        out.update(curve_summaries(mass.group_w.flip(1), (mass.group_w - mass.group_hits).flip(1), n))
        return {key: out[key] for key in (*WEIGHTED_KEYS, SQUARED_L2_KEY)}

    def own_metrics(self) -> dict[str, torch.Tensor]:
        """The metrics of the sample itself (one row of all-ones weights), as 0-dim tensors."""
        return {key: value[0] for key, value in self.metrics(torch.ones(1, self.n, dtype=torch.float64)).items()}

    def width_bins(self, weights: torch.Tensor) -> BinSums:
        """Equal-width top-label bin sums per weight row (the reliability diagram's bars)."""
        sums = (self._width @ weights.T.contiguous()).T
        return BinSums(*sums.reshape(-1, 3, self.num_bins).unbind(1))


def _csr(rows: list[torch.Tensor], cols: list[torch.Tensor], values: list[torch.Tensor],
         shape: tuple[int, int]) -> torch.Tensor:
    """Sparse CSR matrix with the given (row, column, value) entries (duplicates summed)."""
    index = torch.stack([torch.cat(rows), torch.cat(cols)])
    coo = torch.sparse_coo_tensor(index, torch.cat(values), shape, check_invariants=False).coalesce()
    with warnings.catch_warnings():  # "sparse CSR support is in beta": the product used here is stable
        warnings.simplefilter("ignore", UserWarning)
        return coo.to_sparse_csr()


def top_label_width_metrics(bins: BinSums, n: int) -> dict[str, torch.Tensor]:
    """ECE, MCE, RMSCE and the debiased L2 CE (metrics.calibration) from equal-width bin sums of N samples."""
    nonempty = bins.count > 0
    safe = bins.count.clamp_min(1)
    acc, gap = bins.correct / safe, (bins.correct - bins.conf) / safe
    weight = bins.count / n
    sq = weight * gap * gap
    keep = bins.count >= 2
    debiased = torch.where(keep, sq - weight * acc * (1 - acc) / (bins.count - 1).clamp_min(1), 0.0).sum(dim=1)
    return {"ece": (weight * gap.abs()).sum(dim=1),
            "mce": torch.where(nonempty, gap.abs(), float("-inf")).amax(dim=1),
            "rmsce": sq.sum(dim=1).sqrt(),
            "debiased_l2_ce": debiased.clamp_min(0.0).sqrt(),
            SQUARED_L2_KEY: debiased}


class _MassBins:
    """Equal-mass bins of the tie groups for a block of weight rows (module docstring)."""

    def __init__(self, sample: WeightedSample, weights: torch.Tensor) -> None:
        b, u = weights.shape[0], sample.num_groups
        group_w = torch.zeros(b, u, dtype=torch.float64).index_add_(1, sample._group, weights)
        group_hits = torch.zeros(b, u, dtype=torch.float64).index_add_(1, sample._group, weights * sample._correct)
        zero = torch.zeros(b, 1, dtype=torch.float64)
        self.prefix = [torch.cat([zero, s.cumsum(dim=1)], dim=1)
                       for s in (group_w, group_w * sample._group_conf, group_hits)]  # (B, U+1) each
        self.start_rank = self.prefix[0][:, :-1].contiguous()  # R_u
        self.group_w, self.group_hits, self.n, self.u = group_w, group_hits, sample.n, u

    def sums(self, num_bins: int) -> BinSums:
        """Bin sums of ``num_bins`` equal-mass bins for every weight row."""
        starts = (torch.arange(num_bins + 1) * self.n) // num_bins
        starts = starts.to(torch.float64).expand(self.start_rank.shape[0], -1).contiguous()
        edge = torch.searchsorted(self.start_rank, starts)  # first group with R_u ≥ ⌊mN/M⌋
        edge[:, -1] = self.u
        lo, hi = edge[:, :-1], edge[:, 1:]
        return BinSums(*(p.gather(1, hi) - p.gather(1, lo) for p in self.prefix))

    def l1(self, bins_per_row: torch.Tensor) -> torch.Tensor:
        """CE_1 = Σ_m |Σ correct − Σ conf| / N with each row's own number of equal-mass bins."""
        out = torch.empty(bins_per_row.shape[0], dtype=torch.float64)
        for m in bins_per_row.unique().tolist():
            rows = bins_per_row == m
            s = self.sums(int(m))
            out[rows] = ((s.correct - s.conf).abs().sum(dim=1) / self.n)[rows]
        return out

    def sweep(self) -> torch.Tensor:
        """Per row, the ECE-sweep bin count (``calibration.ece_sweep_from_confidence``): the largest M before the
        first M whose non-empty equal-mass bin accuracies decrease somewhere; N when the tie groups' accuracies
        are already non-decreasing (then every binning is monotone)."""
        b = self.group_w.shape[0]
        group_acc = torch.where(self.group_w > 0, self.group_hits / self.group_w.clamp_min(1), float("-inf"))
        best = torch.ones(b, dtype=torch.long)
        done = _non_decreasing(group_acc)
        best[done] = self.n
        active = ~done
        m = 2
        while m <= self.n and bool(active.any()):
            s = self.sums(m)  # every row: O(B·M), cheaper than copying the active rows' (B, U) prefixes
            acc = torch.where(s.count > 0, s.correct / s.count.clamp_min(1), float("-inf"))
            ok = _non_decreasing(acc)
            best[active & ok] = m
            active &= ok
            m += 1
        return best


def _non_decreasing(values: torch.Tensor) -> torch.Tensor:
    """Per row: are the entries other than −inf (empty) non-decreasing? (each ≥ the running max before it)"""
    if values.shape[1] < 2:
        return torch.ones(values.shape[0], dtype=torch.bool)
    before = values.cummax(dim=1).values[:, :-1]
    tail = values[:, 1:]
    return ~((tail < before) & (tail > float("-inf"))).any(dim=1)
