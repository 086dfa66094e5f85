"""Bootstrap confidence intervals for the summary metrics (Efron & Tibshirani 1993, ch. 13; Davison & Hinkley
1997, §5.2).

B resamples of the N examples, drawn with replacement: a (B, N) index matrix from a CPU ``torch.Generator``
seeded with ``seed`` (``torch.randint``, drawn in blocks of rows; the blocks give the same matrix as one draw,
so the result depends only on N, B and the seed). For a metric with estimate θ̂ and replicates θ*_1 … θ*_B, and
q_{α/2}, q_{1−α/2} their quantiles (``torch.quantile``: linear interpolation between order statistics, numpy's
default), the interval at level 1 − α is

* ``basic`` (default): [θ̂ − (q_{1−α/2} − θ(F̂)), θ̂ − (q_{α/2} − θ(F̂))], clipped to the metric's range. The spread
  of θ* around θ(F̂), the metric's value on the bootstrap's population (the N examples themselves), stands in for
  the spread of θ̂ around the truth, bias included. θ(F̂) = θ̂ for every plug-in metric; for the debiased L2 CE
  the pivot is its square Ê² (unclipped), whose θ(F̂) is the plug-in RMSCE², and the endpoints are square-rooted.
* ``percentile``: [q_{α/2}, q_{1−α/2}]. It inherits the estimator's bias twice over (once in θ̂, once more in the
  resamples), which for binned calibration errors of a well-calibrated model is larger than the spread.

Coverage on known-posterior data (docs/ablations/ci_coverage.md, ``python scripts/ablate.py ci_coverage``): where a
model is clearly miscalibrated both cover near the nominal rate; near calibration the percentile interval of ECE
almost never covers the truth and the basic one does; at a true calibration error of exactly 0 no interval of the
binned ECE covers (every resample's ECE is > 0), while the basic interval of the debiased L2 CE does.

The estimate can lie outside its own interval: where the replicates sit mostly above θ̂ (a binned calibration
error near calibration: every resample's gaps add noise, so its ECE is larger), the basic interval, which
subtracts that bias, lies below θ̂ (often clipped at 0); the percentile interval then lies above θ̂.
:func:`outside_note` says so in one line (the evaluate table's footnote; docs/conventions.md#intervals).

Which metrics: every one of ``summary`` except the binning-free estimators, i.e. error, NLL, Brier, ECE, MCE,
ACE, RMSCE, ECE-sweep, debiased L2 CE, classwise ECE and the selective-prediction numbers (AURC, AUGRC and, keyed
flat, ``risk_at_coverage@0.8``, ``risk_at_coverage@0.9``, ``coverage_at_risk@0.01``, ``coverage_at_risk@0.05``;
:mod:`.selective`) — all B resamples, batched (:mod:`.weighted`: the
resamples as count weights, a block of rows at a time), exactly the values ``summary`` gives on each resample.
Skipped (listed under ``"skipped"``): SECE, O(N²) per resample; KDE-ECE, N kernels on a 2049-point grid with the
bandwidth refitted per resample (≈ 1 s each per resample at N = 10,000); smECE, one relplot bandwidth search per
resample (≈ 15 ms whatever N, i.e. 15 s at B = 1000).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

import torch

from .inputs import array_inputs, check_num_bins, check_probs_labels
from .selective import flatten as flatten_selective
from .weighted import SQUARED_L2_KEY, WEIGHTED_KEYS, WeightedSample

SKIPPED_KEYS = ("sece", "kde_ece", "smece")  # summary's binning-free estimators (module docstring)
METHODS = ("basic", "percentile")
UPPER = {"nll": math.inf, "brier": 2.0}  # the largest possible value, for clipping; 1 for every other metric
DOCS = "docs/conventions.md#intervals"  # where the interval rules, and an estimate outside its interval, are explained
BLOCK_ELEMENTS = 2_000_000  # rows per block = this // N: bounds the (rows, N) float64 work arrays (~16 MB each)


@dataclass(frozen=True)
class BootstrapSpec:
    """How to bootstrap: ``bootstrap`` resamples (B ≥ 1), interval ``level`` in (0, 1), generator ``seed``,
    interval ``method`` (``METHODS``)."""

    bootstrap: int = 1000
    level: float = 0.9
    seed: int = 0
    method: str = "basic"

    def __post_init__(self) -> None:
        check_bootstrap(self.bootstrap, self.level, self.seed, self.method)


def check_bootstrap(bootstrap: Any, level: Any, seed: Any = 0, method: Any = "basic") -> None:
    """One-line ValueError unless B is an integer ≥ 1, the level a number strictly between 0 and 1, the seed an
    integer and the method one of ``METHODS``."""
    if isinstance(bootstrap, bool) or not isinstance(bootstrap, int) or bootstrap < 1:
        raise ValueError(f"the number of bootstrap resamples must be an integer >= 1, got {bootstrap!r}")
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0.0 < float(level) < 1.0:
        raise ValueError(f"the confidence level must lie strictly between 0 and 1 (e.g. 0.9), got {level!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"the bootstrap seed must be an integer, got {seed!r}")
    if method not in METHODS:
        raise ValueError(f"the interval method must be one of {', '.join(METHODS)}, got {method!r}")


def resample_indices(n: int, bootstrap: int, seed: int, rows: int | None = None) -> Iterator[torch.Tensor]:
    """The (B, N) resampling indices in blocks of ``rows`` rows (default ``BLOCK_ELEMENTS // N``)."""
    gen = torch.Generator().manual_seed(int(seed))
    rows = rows or max(1, BLOCK_ELEMENTS // n)
    for start in range(0, bootstrap, rows):
        yield torch.randint(0, n, (min(rows, bootstrap - start), n), generator=gen)


def percentile_interval(replicates: torch.Tensor, level: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(q_{α/2}, q_{1−α/2}) over dim 0 of the replicates, α = 1 − level; NaN replicates are ignored."""
    alpha = 1.0 - float(level)
    q = torch.tensor([alpha / 2, 1.0 - alpha / 2], dtype=torch.float64)
    lo, hi = torch.nanquantile(replicates.double(), q, dim=0)
    return lo, hi


def basic_interval(replicates: torch.Tensor, estimate: torch.Tensor, world: torch.Tensor,
                   level: float) -> tuple[torch.Tensor, torch.Tensor]:
    """[θ̂ − (q_{1−α/2} − θ(F̂)), θ̂ − (q_{α/2} − θ(F̂))] (module docstring), unclipped."""
    lo, hi = percentile_interval(replicates, level)
    return estimate - (hi - world), estimate - (lo - world)


def weighted_replicates(sample: WeightedSample, spec: BootstrapSpec) -> dict[str, torch.Tensor]:
    """{metric: (B,) replicates} of a prepared sample (``bootstrap_replicates`` without the preparation)."""
    parts: dict[str, list[torch.Tensor]] = {}
    for index in resample_indices(sample.n, spec.bootstrap, spec.seed):
        for key, values in sample.metrics(sample.counts(index)).items():
            parts.setdefault(key, []).append(values)
    return {key: torch.cat(values) for key, values in parts.items()}


@array_inputs("probs", "labels")
def bootstrap_replicates(probs: torch.Tensor, labels: torch.Tensor, num_bins: int = 15,
                         spec: BootstrapSpec = BootstrapSpec()) -> dict[str, torch.Tensor]:
    """{metric: (B,) float64 replicates} for every ``WEIGHTED_KEYS`` metric and ``SQUARED_L2_KEY``."""
    return weighted_replicates(WeightedSample(probs, labels, num_bins), spec)


def intervals_from_replicates(replicates: dict[str, torch.Tensor], estimates: dict[str, torch.Tensor],
                              level: float, method: str = "basic") -> dict[str, tuple[float, float]]:
    """{metric: (low, high)} for every ``WEIGHTED_KEYS`` metric, from its replicates and its estimate on the
    data (``WeightedSample.own_metrics``) by ``method`` (module docstring)."""
    out = {}
    for key in WEIGHTED_KEYS:
        if method == "percentile":
            lo, hi = percentile_interval(replicates[key], level)
        elif key == "debiased_l2_ce":  # pivot Ê², whose value on the N examples is the plug-in RMSCE²
            lo, hi = basic_interval(replicates[SQUARED_L2_KEY], estimates[SQUARED_L2_KEY],
                                    estimates["rmsce"] ** 2, level)
            lo, hi = lo.clamp_min(0.0).sqrt(), hi.clamp_min(0.0).sqrt()
        else:
            lo, hi = basic_interval(replicates[key], estimates[key], estimates[key], level)
        top = UPPER.get(key, 1.0)
        out[key] = (min(max(_finite(lo), 0.0), top), min(max(_finite(hi), 0.0), top))
    return out


@array_inputs("probs", "labels")
def bootstrap_intervals(probs: torch.Tensor, labels: torch.Tensor, num_bins: int = 15,
                        spec: BootstrapSpec = BootstrapSpec(), binning_free: bool = True) -> dict[str, Any]:
    """The JSON-ready ``"ci"`` object: ``method``, ``level``, ``bootstrap``, ``seed``, ``[low, high]`` per metric
    (``summary``'s key order) and ``skipped``, the metrics of ``summary(..., binning_free=binning_free)`` without
    an interval."""
    check_probs_labels(probs, labels)
    num_bins = check_num_bins(num_bins)
    sample = WeightedSample(probs, labels, num_bins)
    estimates = sample.own_metrics()
    out: dict[str, Any] = {"method": spec.method, "level": float(spec.level), "bootstrap": spec.bootstrap,
                           "seed": spec.seed}
    for key, (lo, hi) in intervals_from_replicates(weighted_replicates(sample, spec), estimates, spec.level,
                                                   spec.method).items():
        out[key] = [lo, hi]
    out["skipped"] = list(SKIPPED_KEYS) if binning_free else []
    return out


def estimates_outside(ci: Mapping[str, Any], estimates: Mapping[str, float]) -> dict[str, str]:
    """{metric: ``"above"`` or ``"below"``} for every metric of a ``"ci"`` object (:func:`bootstrap_intervals`)
    whose estimate (``summary``'s value; its nested selective dicts are read by the flat keys) lies outside its own
    interval, in ``WEIGHTED_KEYS`` order."""
    out = {}
    estimates = {**estimates, **flatten_selective(estimates)}
    for key in WEIGHTED_KEYS:
        if key in ci and key in estimates:
            (low, high), value = ci[key], float(estimates[key])
            if value > high + 1e-12 * (1 + abs(value)):
                out[key] = "above"
            elif value < low - 1e-12 * (1 + abs(value)):
                out[key] = "below"
    return out


def outside_note(ci: Mapping[str, Any], estimates: Mapping[str, float],
                 names: Mapping[str, str] | None = None) -> str | None:
    """One line naming the metrics whose estimate lies outside its interval and why (module docstring), or
    None when every estimate is inside; ``names`` maps a metric key to how the caller labels it."""
    outside = estimates_outside(ci, estimates)
    if not outside:
        return None

    def label(keys: list[str]) -> str:
        return ", ".join((names or {}).get(key, key) for key in keys)

    method = ci.get("method", "basic")
    basic, parts = method == "basic", []
    for side, other in (("above", "below"), ("below", "above")):
        keys = [key for key, where in outside.items() if where == side]
        if keys:  # basic reflects the resamples' offset from θ̂ to the other side; percentile follows them
            parts.append(f"{label(keys)}: the estimate lies {side} its {method} interval because the resampled "
                         f"values run {side if basic else other} it (the estimator's bias, which the {method} "
                         f"interval {'subtracts' if basic else 'keeps'})")
    low = [key for key in outside if 0.0 in ci[key]]
    high = [key for key in outside if UPPER.get(key, 1.0) in ci[key]]
    parts += [f"{label(keys)}: clipped at {where}" for keys, where in
              ((low, "0, the metric's lower bound"), (high, "the metric's upper bound")) if keys]
    return "; ".join(parts) + f"; see {DOCS}"


@array_inputs("probs", "labels")
def bin_accuracy_bands(probs: torch.Tensor, labels: torch.Tensor, num_bins: int = 15,
                       spec: BootstrapSpec = BootstrapSpec()) -> tuple[torch.Tensor, torch.Tensor]:
    """Percentile interval of each equal-width top-label bin's accuracy over the resamples (the reliability
    diagram's bands; a bin's accuracy is a mean, unbiased, so the percentile and basic intervals agree closely):
    (lower, upper), each (num_bins,); a resample in which a bin is empty does not count for
    it, and a bin empty in the data gets NaN."""
    sample = WeightedSample(probs, labels, num_bins)
    acc = torch.cat([sample.width_bins(sample.counts(index)).accuracy
                     for index in resample_indices(sample.n, spec.bootstrap, spec.seed)])
    return percentile_interval(acc, spec.level)


def _finite(value: torch.Tensor) -> float:
    value = float(value)
    if not math.isfinite(value):  # cannot happen for these metrics; JSON has no NaN
        raise ValueError(f"bootstrap interval endpoint is {value}")
    return value
