"""Paired comparisons of two methods over seeds: mean difference, t-interval, paired t-test, seeds needed.

Pairing. Seed S of every method in a sweep (``<stem>/seed<S>``, ``run.seed = S``) trains on the same split
(``data.seed``, shared by the whole sweep), from the same initial backbone weights (the trainer calls
``set_seed(run.seed)`` before it builds the data and the model, the same for every method of a sweep) and draws
its mini-batches in the same order (loaders seeded by ``run.seed``), and every run is tested on the same test set. What a seed changes is therefore shared by
the two runs of a pair, and the per-seed difference d_S = m_A(S) − m_B(S) removes it:
Var(d) = Var(A) + Var(B) − 2 Cov(A, B). Only seeds present in both methods (with a finite value) are paired.

Statistics on the n paired differences d_1…d_n (Student 1908; any statistics text, e.g. Wasserman 2004, §10):

    d̄ = (1/n) Σ d_S,   s = sqrt(Σ (d_S − d̄)² / (n − 1)),   se = s / √n
    interval (level 1 − α):  d̄ ± t_{1−α/2, n−1} · se
    paired t-test of H0: E[d] = θ:  t = (d̄ − θ) / se,  p = 2 · P(T_{n−1} > |t|)   (= scipy.stats.ttest_rel)
    resolved:  the interval excludes θ  ⇔  p < α
    seeds needed:  the smallest n ≥ 2 with t_{1−α/2, n−1} · s / √n < |d̄ − θ|

θ = 0 for "is there a difference"; a margin for bars such as "error at most 1 point above CE's". Why a t-interval
and not a bootstrap over seeds: with 5 seeds a bootstrap has 126 distinct resamples and its percentile interval
is too narrow at such n (it ignores that s itself is estimated: a nominal 95% percentile interval of the mean of
5 normal draws covers about 85% of the time, measured in tests/report/test_report_paired.py); the t-interval
is exact for normal differences. The seeds needed assume the true difference and spread equal the
observed ones: at that n the observed difference would just be resolved — about a 50 % chance for a new study
of that size, not a guarantee. It is undefined ("—") with fewer than 2 pairs (no spread) or when d̄ = θ (nothing
to resolve); with s = 0 and d̄ ≠ θ it is 2 (the interval has zero width). The intervals are over seeds on the
one test set: they do not include the test-set sampling noise the seeds share. Each comparison is tested on its
own (no correction for the many comparisons of a page: of twenty true-zero differences about one shows as
resolved by chance).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Hashable, Mapping, Sequence

import numpy as np
from scipy import stats

LEVEL = 0.95
TIE = 1e-12  # |d̄ − θ| at most this (fractions) is a tie: 0.055 − 0.050 is 0.005000…04 in floating point


def t_quantile(level: float, df: int) -> float:
    """t_{(1+level)/2, df}: the two-sided critical value of Student's t."""
    return float(stats.t.ppf(0.5 + level / 2.0, df))


def seeds_needed(effect: float, sd: float, level: float = LEVEL) -> int | None:
    """Smallest n ≥ 2 with t_{(1+level)/2, n−1} · sd / √n < |effect|, by doubling then bisection (the left side
    decreases in n). None when |effect| ≤ TIE or sd is not finite; 2 when sd = 0."""
    effect = abs(effect)
    if not (math.isfinite(effect) and math.isfinite(sd)) or effect <= TIE:
        return None
    if sd == 0:
        return 2

    def resolves(n: int) -> bool:
        return t_quantile(level, n - 1) * sd / math.sqrt(n) < effect

    lo, hi = 1, 2  # invariant: resolves(hi) is the question; lo never resolves (n = 1 has no interval)
    while not resolves(hi):
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if resolves(mid) else (mid, hi)
    return hi


@dataclass(frozen=True)
class PairedDiff:
    """Differences method − reference over the shared seeds (``keys``), tested against ``null`` (θ)."""

    keys: tuple
    diffs: tuple[float, ...]
    level: float = LEVEL
    null: float = 0.0

    @property
    def n(self) -> int:
        return len(self.diffs)

    @property
    def mean(self) -> float:
        return float(np.mean(self.diffs)) if self.diffs else math.nan

    @property
    def sd(self) -> float:
        """Sample standard deviation of the differences (ddof = 1); NaN for n < 2."""
        return float(np.std(self.diffs, ddof=1)) if self.n > 1 else math.nan

    @property
    def half_width(self) -> float:
        return t_quantile(self.level, self.n - 1) * self.sd / math.sqrt(self.n) if self.n > 1 else math.nan

    @property
    def interval(self) -> tuple[float, float]:
        return self.mean - self.half_width, self.mean + self.half_width

    @property
    def p_value(self) -> float:
        """Two-sided paired t-test of E[d] = θ (scipy.stats.ttest_rel for θ = 0): 0 when s = 0 and d̄ ≠ θ,
        NaN when n < 2 or when every difference equals θ."""
        if self.n < 2:
            return math.nan
        gap, se = self.mean - self.null, self.sd / math.sqrt(self.n)
        if se == 0:
            return 0.0 if abs(gap) > TIE else math.nan
        return float(2.0 * stats.t.sf(abs(gap) / se, self.n - 1))

    @property
    def resolved(self) -> bool:
        """The interval excludes θ: half-width < |d̄ − θ| (needs n ≥ 2; never for a tie |d̄ − θ| ≤ TIE).
        The same inequality as :func:`seeds_needed` at this n, and as p < 1 − level."""
        gap = abs(self.mean - self.null)
        return self.n > 1 and gap > TIE and self.half_width < gap

    @property
    def met(self) -> bool | None:
        """d̄ ≤ θ (a tie counts as met); None without a shared seed."""
        return None if self.n == 0 else self.mean <= self.null + TIE

    @property
    def seeds_needed(self) -> int | None:
        return seeds_needed(self.mean - self.null, self.sd, self.level) if self.n > 1 else None


def paired_diff(method: Mapping[Hashable, float], reference: Mapping[Hashable, float], *, ref_scale: float = 1.0,
                null: float = 0.0, level: float = LEVEL) -> PairedDiff:
    """d_S = method[S] − ref_scale · reference[S] over the keys (seeds) both have with finite values."""
    keys = [k for k in method if k in reference and _finite(method[k]) and _finite(reference[k])]
    keys.sort(key=lambda k: (not isinstance(k, int), str(k) if not isinstance(k, int) else k))
    diffs = tuple(float(method[k]) - ref_scale * float(reference[k]) for k in keys)
    return PairedDiff(tuple(keys), diffs, level, null)


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def per_seed(row, metric: str) -> dict[Hashable, float]:
    """{seed: value} of one metric from a MethodRow's per-run numbers."""
    return {k: v.get(metric, math.nan) for k, v in row.per_run.items()}


def compare(method, reference, metric: str, *, ref_scale: float = 1.0, null: float = 0.0,
            level: float = LEVEL) -> PairedDiff:
    """Paired difference of two MethodRows on ``metric`` (method − ref_scale · reference)."""
    return paired_diff(per_seed(method, metric), per_seed(reference, metric), ref_scale=ref_scale, null=null,
                       level=level)


@dataclass(frozen=True)
class Verdict:
    """A bar made of ≤-checks (each d̄ ≤ θ), judged on paired differences.

    met: every check met on the paired mean (None: some check has no shared seed). resolved: when met, every
    check's interval lies below its θ; when not met, some failing check's interval lies above its θ.
    seeds_needed: for met, the largest of the checks' (all must resolve); for not met, the smallest among the
    failing checks (one resolved failure suffices); None when undefined. ``binding`` names that check."""

    met: bool | None
    resolved: bool
    seeds_needed: int | None
    binding: str | None
    n_min: int


def judge(checks: Mapping[str, PairedDiff]) -> Verdict:
    """Combine named ≤-checks into one Verdict (see :class:`Verdict`)."""
    n_min = min((c.n for c in checks.values()), default=0)
    if not checks or any(c.met is None for c in checks.values()):
        missing = next((name for name, c in checks.items() if c.met is None), None)
        return Verdict(None, False, None, missing, n_min)
    failing = {name: c for name, c in checks.items() if not c.met}
    if not failing:
        name, worst = max(checks.items(), key=lambda kv: _need_key(kv[1]))
        resolved = all(c.resolved for c in checks.values())
        return Verdict(True, resolved, worst.seeds_needed, name, n_min)
    name, best = min(failing.items(), key=lambda kv: _need_key(kv[1]))
    return Verdict(False, any(c.resolved for c in failing.values()), best.seeds_needed, name, n_min)


def _need_key(c: PairedDiff) -> float:
    return math.inf if c.seeds_needed is None else float(c.seeds_needed)


def needs_phrase(seeds: int | None, n: int) -> str:
    """``"needs ≈ 12 seeds"``, or why no number can be given."""
    if n < 2:
        return "fewer than 2 shared seeds, no spread to judge by"
    if seeds is None:
        return "Δ equals the bar: no number of seeds resolves it"
    return f"needs ≈ {seeds:,} seeds"


def verdict_phrase(v: Verdict, yes: str = "met", no: str = "not met") -> str:
    """``"met and resolved"``, ``"met on the mean but unresolved (needs ≈ N seeds)"``, ``"not met (resolved)"``,
    ``"not met on the mean, unresolved (needs ≈ N seeds)"``, or ``"not checkable (…)"``."""
    if v.met is None:
        return f"not checkable (no seed shared: {v.binding})"
    needs = needs_phrase(v.seeds_needed, v.n_min)
    if v.met:
        return f"{yes} and resolved" if v.resolved else f"{yes} on the mean but unresolved ({needs})"
    return f"{no} (resolved)" if v.resolved else f"{no} on the mean, unresolved ({needs})"


def interval_text(d: PairedDiff, scale: float = 100.0, digits: int = 2) -> str:
    """``"+1.23 [-0.50, +2.96]"`` (points for scale 100); just the mean for one pair; ``"–"`` for none."""
    if d.n == 0:
        return "–"
    if d.n == 1:
        return f"{scale * d.mean:+.{digits}f}"
    low, high = d.interval
    return f"{scale * d.mean:+.{digits}f} [{scale * low:+.{digits}f}, {scale * high:+.{digits}f}]"


def p_text(p: float) -> str:
    if not math.isfinite(p):
        return "—"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def needed_text(d: PairedDiff) -> str:
    seeds = d.seeds_needed
    return "—" if seeds is None else f"{seeds:,}"


def resolved_text(d: PairedDiff) -> str:
    return "—" if d.n < 2 else ("yes" if d.resolved else "no")


def table_rows(rows: Sequence, reference, metrics: Sequence[str], level: float = LEVEL) -> list[tuple]:
    """(method row, {metric: PairedDiff}) for every row other than ``reference``."""
    return [(r, {m: compare(r, reference, m, level=level) for m in metrics}) for r in rows if r is not reference]
