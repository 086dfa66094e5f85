"""True top-label calibration error when the data distribution's posteriors are known (gaussian_mixture).

Definitions (top-label, Kumar et al. 2019; Wang & Golebiowski 2024, §3). A model gives conf(x) = max_k p̂_k(x) and
ŷ(x) = argmax_k p̂_k(x). With the true posterior P(y | x) known, the probability that the prediction at x is
correct is c(x) = P(y = ŷ(x) | x) = posterior[ŷ(x)](x). The model is calibrated when
P(Y = ŷ(X) | conf(X) = q) = q for every q, and

    TCE = E_X | E[ 1{Y = ŷ(X)} | conf(X) ] − conf(X) |  =  E_X | E[ c(X) | conf(X) ] − conf(X) |,

the second form because E[1{Y = ŷ} | conf] = E[ E[1{Y = ŷ} | X] | conf ] = E[c(X) | conf] (tower property;
conf is a function of X). The conditioning is on the confidence LEVEL, not on x: two inputs with the same
confidence but different c pool. The per-input gap E|c(X) − conf(X)| is an upper bound (Jensen:
|E[c − conf | conf]| ≤ E[|c − conf| | conf]); it equals TCE only when c is a function of conf.

Estimating E[c | conf] needs no labels (c is known per x), so on a large fresh sample it is far less noisy
than label-based estimators. Here: equal-mass bins over conf (sorted), ties never split across bins (a
confidence value that occurs many times — e.g. a constant-confidence model — is one bin), per bin
|mean c − mean conf|, weighted by the bin's mass. Two error sources, both reported small on a big sample:
- coarsening (bins wider than the variation of E[c|conf] − conf): can only LOWER the value (Jensen);
- noise of the bin means of c: can only RAISE it, by at most ``noise_floor`` = Σ_b w_b √(2/π)·sd_b(c)/√n_b
  (the mean absolute value of the bin-mean noise if the true gap were 0).
With N samples the default is ⌈N^(1/3)⌉ bins (1e6 samples → 100 bins of 10 000).

The L2 version (the target of RMSCE and the debiased L2 CE; Kumar, Liang & Ma 2019) uses the same bins:
TCE_2 = sqrt(E[(E[c | conf] − conf)²]) ≈ sqrt(Σ_b w_b (mean_b c − mean_b conf)²); its noise raises TCE_2² by about
Σ_b w_b var_b(c − conf)/n_b (``noise_floor_l2``, in TCE_2 units: sqrt(TCE_2² + that) − TCE_2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass
class TrueCalibration:
    tce: float  # E | E[c | conf] − conf |  (equal-mass-binned estimate on the sample)
    tce_l2: float  # sqrt E ( E[c | conf] − conf )²  (same bins)
    noise_floor_l2: float  # bound on the upward bias of ``tce_l2`` from the noise of the bin means
    per_sample_bound: float  # E | c − conf |  (≥ tce)
    noise_floor: float  # bound on the upward bias of ``tce`` from the noise of the bin means
    accuracy: float  # E[c] = P(Y = ŷ)
    mean_conf: float
    num_bins: int
    n: int


def correct_probability(probs: torch.Tensor, posteriors: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(conf, c): the model's top confidence and the true probability that its top label is correct."""
    conf, pred = probs.max(dim=1)
    c = posteriors.to(probs.dtype).gather(1, pred.unsqueeze(1)).squeeze(1)
    return conf, c


def tie_aware_mass_bins(conf_sorted: torch.Tensor, num_bins: int) -> torch.Tensor:
    """Bin index of each sorted confidence: equal mass by rank, but all copies of one value in one bin."""
    n = conf_sorted.shape[0]
    rank_bin = torch.arange(n, device=conf_sorted.device) * num_bins // n
    _, inverse, counts = torch.unique_consecutive(conf_sorted, return_inverse=True, return_counts=True)
    first = torch.cumsum(counts, 0) - counts  # sorted position of each distinct value's first copy
    return rank_bin[first][inverse]


def binned_conditional_gap(conf: torch.Tensor, c: torch.Tensor, num_bins: int | None = None,
                           norm: str = "l1") -> tuple[float, float, int]:
    """(Σ_b w_b |mean_b c − mean_b conf|, noise floor, number of non-empty bins); with ``norm="l2"``
    (sqrt Σ_b w_b (mean_b c − mean_b conf)², its noise floor, bins)."""
    conf, c = conf.double().reshape(-1), c.double().reshape(-1).to(conf.device)
    n = conf.shape[0]
    if n == 0 or c.shape[0] != n:
        raise ValueError(f"conf and c must be non-empty and of equal length, got {n} and {c.shape[0]}")
    m = num_bins or max(1, math.ceil(n ** (1.0 / 3.0)))
    order = torch.argsort(conf, stable=True)
    conf, c = conf[order], c[order]
    idx = tie_aware_mass_bins(conf, m)
    z = conf.new_zeros(m)
    count = z.index_add(0, idx, torch.ones_like(conf))
    s_conf, s_c, s_c2 = z.index_add(0, idx, conf), z.index_add(0, idx, c), z.index_add(0, idx, c * c)
    used = count > 0
    count, s_conf, s_c, s_c2 = count[used], s_conf[used], s_c[used], s_c2[used]
    var = (s_c2 / count - (s_c / count) ** 2).clamp_min(0)
    if norm == "l2":
        d = c - conf
        s_d2 = z.index_add(0, idx, d * d)[used]
        var_d = (s_d2 / count - ((s_c - s_conf) / count) ** 2).clamp_min(0)
        squared = float(((s_c - s_conf) ** 2 / count).sum() / n)
        noise = float((var_d / n).sum())  # Σ_b w_b var_b(c − conf) / n_b
        return math.sqrt(squared), math.sqrt(squared + noise) - math.sqrt(squared), int(used.sum())
    gap = float((s_c - s_conf).abs().sum() / n)
    floor = float(((count / n) * math.sqrt(2 / math.pi) * var.sqrt() / count.sqrt()).sum())
    return gap, floor, int(used.sum())


def true_calibration_error(probs: torch.Tensor, posteriors: torch.Tensor, num_bins: int | None = None) -> TrueCalibration:
    """TCE of a model's probabilities (N×K) given the true posteriors (N×K) of the same inputs (module doc)."""
    if probs.shape != posteriors.shape:
        raise ValueError(f"probs {tuple(probs.shape)} and posteriors {tuple(posteriors.shape)} differ in shape")
    conf, c = correct_probability(probs.double(), posteriors.double())
    gap, floor, used = binned_conditional_gap(conf, c, num_bins)
    gap_l2, floor_l2, _ = binned_conditional_gap(conf, c, num_bins, "l2")
    return TrueCalibration(tce=gap, tce_l2=gap_l2, noise_floor_l2=floor_l2,
                           per_sample_bound=float((c - conf).abs().mean()), noise_floor=floor,
                           accuracy=float(c.mean()), mean_conf=float(conf.mean()), num_bins=used, n=int(len(conf)))
