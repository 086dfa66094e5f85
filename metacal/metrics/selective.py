"""Selective prediction: the risk–coverage curve of the top-label confidence and its summaries
(docs/conventions.md#selective).

Confidence c_i = max_k p_ik, error a_i = 1[argmax_k p_ik ≠ y_i]. A threshold t accepts every sample with
c_i ≥ t, so samples of EQUAL confidence are accepted or rejected together (tie groups): the curve has one point
per distinct confidence. With the groups sorted by confidence descending, group j's cumulative count n_j and
cumulative errors e_j give

    coverage c_j = n_j / N,   selective risk r_j = e_j / n_j,   generalized risk g_j = e_j / N.

* AURC (Geifman & El-Yaniv 2017; Geifman, Uziel & El-Yaniv 2019, eq. 1): Σ_j (c_j − c_{j−1}) · r_j, c_0 = 0 — a
  right-endpoint step rule: each sample adds 1/N times the risk at the coverage where it is accepted. Without
  ties this is (1/N) Σ_i e_(i)/i, the mean risk of the i most confident samples.
* AUGRC (Traub et al., NeurIPS 2024, "Overcoming common flaws in the evaluation of selective classification
  systems", §4): the area under the curve through (0, 0) and the points (c_j, g_j) joined by straight lines, the
  trapezoid rule Σ_j (c_j − c_{j−1}) · (g_{j−1} + g_j) / 2, g_0 = 0, as the paper integrates it. Within a tie
  group accepted in a random order the expected g is linear in coverage, so this is AUGRC under random tie
  breaking. (The step rule of AURC would exceed it by ½ Σ_j Δc_j Δg_j, i.e. by error / (2N) without ties.)
* ``risk_at_coverage``: r_j at the SMALLEST achievable coverage c_j ≥ the requested one (c_J = 1 always exists).
* ``coverage_at_risk``: the LARGEST c_j with r_j ≤ the requested risk; 0 when no point qualifies.

:func:`curve_summaries` evaluates all of these for many count-weighted samples at once (the bootstrap's
resamples, :mod:`.weighted`) from per-group counts and errors in a fixed descending order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import torch

from .inputs import array_inputs, check_conf_correct, check_probs_labels, top_label

COVERAGE_LEVELS = (0.8, 0.9)  # risk_at_coverage in selective_summary
RISK_LEVELS = (0.01, 0.05)  # coverage_at_risk in selective_summary
SELECTIVE_KEYS = ("aurc", "augrc", "risk_at_coverage", "coverage_at_risk")
NESTED_KEYS = ("risk_at_coverage", "coverage_at_risk")
# the flat names of every number (bootstrap intervals, tables): "risk_at_coverage@0.8", …
FLAT_KEYS = ("aurc", "augrc", *(f"risk_at_coverage@{c:g}" for c in COVERAGE_LEVELS),
             *(f"coverage_at_risk@{r:g}" for r in RISK_LEVELS))  # fmt: skip


@dataclass
class RiskCoverageCurve:
    """One point per distinct confidence, most confident first (each (J,) float64): the ``threshold`` t_j
    (accept c ≥ t_j), ``coverage`` c_j, selective ``risk`` r_j and ``generalized_risk`` g_j."""

    threshold: torch.Tensor
    coverage: torch.Tensor
    risk: torch.Tensor
    generalized_risk: torch.Tensor


def tie_groups(conf: torch.Tensor, errors: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(distinct confidences descending, count per group, errors per group), the last two float64."""
    values, group = torch.unique(conf, sorted=True, return_inverse=True)
    u = int(values.shape[0])
    group = u - 1 - group  # 0 = most confident
    count = torch.zeros(u, dtype=torch.float64, device=conf.device).index_add_(
        0, group, torch.ones_like(errors, dtype=torch.float64))
    wrong = torch.zeros(u, dtype=torch.float64, device=conf.device).index_add_(0, group, errors.double())
    return values.flip(0), count, wrong


def risk_coverage_from_confidence(conf: torch.Tensor, correct: torch.Tensor) -> RiskCoverageCurve:
    """The tie-aware risk–coverage curve of confidences ``conf`` and 0/1 ``correct`` (module docstring)."""
    check_conf_correct(conf, correct)
    threshold, count, wrong = tie_groups(conf.detach(), 1.0 - correct.detach().double())
    n, e, total = count.cumsum(0), wrong.cumsum(0), float(conf.shape[0])
    return RiskCoverageCurve(threshold.double(), n / total, e / n, e / total)


@array_inputs("probs", "labels")
def risk_coverage_curve(probs: torch.Tensor, labels: torch.Tensor) -> RiskCoverageCurve:
    """The top-label risk–coverage curve (module docstring)."""
    check_probs_labels(probs, labels)
    conf, _, correct = top_label(probs.detach(), labels.to(probs.device))
    return risk_coverage_from_confidence(conf, correct)


def curve_summaries(count: torch.Tensor, wrong: torch.Tensor, n: float) -> dict[str, torch.Tensor]:
    """Every ``FLAT_KEYS`` number per row of (B, U) group counts and errors (groups most confident first, a
    zero-count group allowed: it adds no curve point) for samples of N = ``n``: {key: (B,) float64}."""
    count, wrong = count.double(), wrong.double()
    cum_n, cum_e = count.cumsum(1), wrong.cumsum(1)
    risk = torch.where(cum_n > 0, cum_e / cum_n.clamp_min(1), 0.0)
    coverage = cum_n / n
    out = {"aurc": (count / n * risk).sum(1), "augrc": (count / n * (cum_e - wrong / 2) / n).sum(1)}
    for level in COVERAGE_LEVELS:  # the first point with c_j ≥ level has a non-empty group
        first = (coverage < level).sum(1, keepdim=True).clamp_max(count.shape[1] - 1)
        out[f"risk_at_coverage@{level:g}"] = risk.gather(1, first).squeeze(1)
    for level in RISK_LEVELS:
        ok = (count > 0) & (risk <= level)
        out[f"coverage_at_risk@{level:g}"] = torch.where(ok, coverage, 0.0).amax(1)
    return out


def nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    """``FLAT_KEYS`` numbers → the ``SELECTIVE_KEYS`` dict (``"risk_at_coverage": {"0.8": …}``), as floats."""
    out: dict[str, Any] = {"aurc": float(flat["aurc"]), "augrc": float(flat["augrc"])}
    for key in NESTED_KEYS:
        out[key] = {k.split("@", 1)[1]: float(v) for k, v in flat.items() if k.startswith(key + "@")}
    return out


def flatten(values: Mapping[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`nest` for any dict holding the ``SELECTIVE_KEYS`` (others are left out)."""
    out = {key: values[key] for key in ("aurc", "augrc") if key in values}
    for key in NESTED_KEYS:
        if isinstance(values.get(key), Mapping):
            out.update({f"{key}@{level}": value for level, value in values[key].items()})
    return out


def selective_from_confidence(conf: torch.Tensor, correct: torch.Tensor) -> dict[str, Any]:
    """:func:`selective_summary` from confidences and 0/1 correctness."""
    check_conf_correct(conf, correct)
    _, count, wrong = tie_groups(conf.detach(), 1.0 - correct.detach().double())
    return nest({k: v[0] for k, v in curve_summaries(count[None].cpu(), wrong[None].cpu(), conf.shape[0]).items()})


@array_inputs("probs", "labels")
def selective_summary(probs: torch.Tensor, labels: torch.Tensor) -> dict[str, Any]:
    """``{"aurc", "augrc", "risk_at_coverage": {"0.8", "0.9"}, "coverage_at_risk": {"0.01", "0.05"}}`` (floats;
    module docstring)."""
    check_probs_labels(probs, labels)
    conf, _, correct = top_label(probs.detach(), labels.to(probs.device))
    return selective_from_confidence(conf, correct)


@array_inputs("probs", "labels")
def aurc(probs: torch.Tensor, labels: torch.Tensor) -> float:
    """Σ_j (c_j − c_{j−1}) r_j, c_0 = 0 (Geifman & El-Yaniv 2017; module docstring)."""
    curve = risk_coverage_curve(probs, labels)
    return float((torch.diff(curve.coverage, prepend=curve.coverage.new_zeros(1)) * curve.risk).sum())


@array_inputs("probs", "labels")
def augrc(probs: torch.Tensor, labels: torch.Tensor) -> float:
    """Σ_j (c_j − c_{j−1}) (g_{j−1} + g_j) / 2, c_0 = g_0 = 0 (Traub et al. 2024, trapezoid; module docstring)."""
    curve = risk_coverage_curve(probs, labels)
    g = torch.cat([curve.generalized_risk.new_zeros(1), curve.generalized_risk])
    return float((torch.diff(curve.coverage, prepend=curve.coverage.new_zeros(1)) * (g[1:] + g[:-1]) / 2).sum())


@array_inputs("probs", "labels")
def risk_at_coverage(probs: torch.Tensor, labels: torch.Tensor, coverage: float) -> float:
    """Selective risk r_j at the smallest achievable coverage c_j ≥ ``coverage`` ∈ (0, 1]."""
    coverage = _level(coverage, "coverage", open_low=True)
    curve = risk_coverage_curve(probs, labels)
    first = min(int((curve.coverage < coverage).sum()), curve.coverage.shape[0] - 1)
    return float(curve.risk[first])


@array_inputs("probs", "labels")
def coverage_at_risk(probs: torch.Tensor, labels: torch.Tensor, risk: float) -> float:
    """The largest coverage c_j whose selective risk r_j ≤ ``risk`` ∈ [0, 1]; 0 when there is none."""
    risk = _level(risk, "risk", open_low=False)
    curve = risk_coverage_curve(probs, labels)
    ok = curve.risk <= risk
    return float(curve.coverage[ok].max()) if bool(ok.any()) else 0.0


def _level(value: Any, name: str, open_low: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        raise ValueError(f"{name} must be a number in {'(0, 1]' if open_low else '[0, 1]'}, got {value!r}")
    value = float(value)
    if value > 1.0 or value < 0.0 or (open_low and value == 0.0):
        raise ValueError(f"{name} must lie in {'(0, 1]' if open_low else '[0, 1]'}, got {value:g}")
    return value
