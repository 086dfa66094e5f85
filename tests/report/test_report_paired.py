"""Paired differences over seeds: mean, t-interval, paired t-test, resolution and seeds needed, against scipy.stats
and hand-computed numbers; pairing only on shared seeds; verdicts combining several checks."""

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from metacal.report.paired import (PairedDiff, interval_text, judge, paired_diff, seeds_needed, verdict_phrase)

# method and reference values of one metric on seeds 0..3 (fractions)
METHOD = {0: 0.050, 1: 0.062, 2: 0.041, 3: 0.058}
REFERENCE = {0: 0.045, 1: 0.050, 2: 0.040, 3: 0.049}


def test_interval_and_p_value_by_hand_and_against_scipy():
    d = paired_diff(METHOD, REFERENCE)
    # d = (0.005, 0.012, 0.001, 0.009): mean 0.027/4; squared deviations sum to 6.875e-5 over n − 1 = 3
    assert d.keys == (0, 1, 2, 3) and d.n == 4
    assert d.mean == pytest.approx(0.00675, abs=1e-15)
    assert d.sd == pytest.approx(math.sqrt(6.875e-5 / 3), rel=1e-12)
    # t_{0.975, 3} = 3.182446 (printed t tables: 3.182); half-width = t · s / √4
    assert d.half_width == pytest.approx(3.182446305 * 0.0047871355 / 2, rel=1e-8)
    low, high = d.interval
    assert low == pytest.approx(-0.000867401, abs=1e-9) and high == pytest.approx(0.014367401, abs=1e-9)
    # t = d̄ / (s/√n) = 2.8200580; p = 2·P(T_3 > t) = 0.066735
    ref = stats.ttest_rel([METHOD[k] for k in range(4)], [REFERENCE[k] for k in range(4)])
    assert d.p_value == pytest.approx(float(ref.pvalue), rel=1e-10) and d.p_value == pytest.approx(0.0667352, abs=1e-6)
    ci = ref.confidence_interval(0.95)
    assert (low, high) == pytest.approx((float(ci.low), float(ci.high)), rel=1e-10)
    assert not d.resolved  # the interval straddles 0, p > 0.05
    assert interval_text(d) == "+0.68 [-0.09, +1.44]"  # points


def test_a_resolved_difference_and_its_sign():
    d = paired_diff(REFERENCE, {k: v + 0.01 + 0.001 * k for k, v in REFERENCE.items()})  # d = −0.010 − 0.001·k
    assert d.mean == pytest.approx(-0.0115) and d.sd == pytest.approx(0.001 * math.sqrt(5 / 3))
    assert d.resolved and d.interval[1] < 0 and d.met is True
    assert d.p_value == pytest.approx(float(stats.ttest_rel(list(REFERENCE.values()),
                                                            [v + 0.01 + 0.001 * k for k, v in REFERENCE.items()]).pvalue))
    assert d.p_value < 0.05


def test_seeds_needed_by_hand():
    # smallest n with t_{0.975,n−1}/√n < |d̄|/s; printed t table: t_5 = 2.571, t_6 = 2.447, t_16 = 2.120, t_17 = 2.110
    assert seeds_needed(1.0, 1.0) == 7    # n = 6: 2.571/√6 = 1.050 ≥ 1;  n = 7: 2.447/√7 = 0.925 < 1
    assert seeds_needed(-1.0, 1.0) == 7   # the sign does not matter
    assert seeds_needed(0.5, 1.0) == 18   # n = 17: 2.120/√17 = 0.514;  n = 18: 2.110/√18 = 0.497
    assert seeds_needed(2.0, 0.0) == 2    # no spread: two seeds already give a zero-width interval
    assert seeds_needed(0.0, 1.0) is None and seeds_needed(0.0, 0.0) is None  # nothing to resolve
    assert seeds_needed(1.0, math.nan) is None
    # the example table: |d̄|/s = 1.4100; n = 4: 3.182/2 = 1.591; n = 5: 2.776/√5 = 1.242
    d = paired_diff(METHOD, REFERENCE)
    assert d.seeds_needed == 5 and not d.resolved  # needs one more seed than the 4 it has
    # large n: close to (1.96 s/d̄)² = 38,416, and the search returns the boundary exactly
    n = seeds_needed(0.01, 1.0)
    assert 38_416 <= n <= 38_425
    assert stats.t.ppf(0.975, n - 1) / math.sqrt(n) < 0.01 <= stats.t.ppf(0.975, n - 2) / math.sqrt(n - 1)


def test_resolved_iff_p_below_alpha_iff_enough_seeds():
    rng = np.random.default_rng(0)
    agree = 0
    for _ in range(300):
        n = int(rng.integers(2, 9))
        a = rng.normal(0.05, 0.01, n)
        b = a + rng.normal(rng.normal(0, 0.01), rng.uniform(0.001, 0.02), n)
        d = paired_diff(dict(enumerate(b)), dict(enumerate(a)))
        ref = stats.ttest_rel(b, a)
        assert d.p_value == pytest.approx(float(ref.pvalue), rel=1e-9, abs=1e-300)
        assert d.resolved == (ref.pvalue < 0.05) == (d.seeds_needed <= n)
        agree += d.resolved
    assert 30 < agree < 270  # both outcomes occur, so the equivalence was exercised both ways


def test_pairs_only_the_seeds_both_methods_have():
    method = {0: 0.10, 1: 0.12, 2: 0.50, 3: math.nan, "extra": 0.3}
    reference = {0: 0.08, 1: 0.09, 3: 0.07, 4: 0.06, "extra": 0.2}
    d = paired_diff(method, reference)
    assert d.keys == (0, 1, "extra")  # seed 2 and 4 are unpaired, seed 3 has no method value
    assert d.diffs == pytest.approx((0.02, 0.03, 0.1))
    # the paired mean differs from the difference of the two means over all their seeds
    mean_gap = np.nanmean([0.10, 0.12, 0.50, 0.3]) - np.mean([0.08, 0.09, 0.07, 0.06, 0.2])
    assert d.mean == pytest.approx(0.05) and abs(mean_gap - 0.05) > 0.05
    one = paired_diff({0: 0.1, 1: 0.2}, {1: 0.1, 2: 0.3})
    assert one.n == 1 and math.isnan(one.sd) and math.isnan(one.p_value) and not one.resolved
    assert one.seeds_needed is None and interval_text(one) == "+10.00"
    none = paired_diff({0: 0.1}, {1: 0.1})
    assert none.n == 0 and none.met is None and interval_text(none) == "–"


def test_zero_spread_and_zero_difference_match_scipy():
    a, b = [0.3, 0.4, 0.5], [0.2, 0.3, 0.4]  # every difference 0.1 (up to rounding)
    d = paired_diff(dict(enumerate(a)), dict(enumerate(b)))
    assert d.resolved and d.seeds_needed == 2 and d.p_value == pytest.approx(0.0, abs=1e-12)
    same = paired_diff(dict(enumerate(a)), dict(enumerate(a)))
    assert same.sd == 0 and math.isnan(same.p_value) and not same.resolved and same.seeds_needed is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # scipy warns about the zero variance (some versions)
        assert math.isnan(float(stats.ttest_rel(a, a).pvalue))  # scipy: NaN too
        assert float(stats.ttest_rel(a, b).pvalue) < 1e-12


def test_a_margin_moves_the_bar_not_the_interval():
    d0 = paired_diff(METHOD, REFERENCE)
    d = paired_diff(METHOD, REFERENCE, null=0.02)  # "at most 2 points above the reference"
    assert d.interval == d0.interval and d.met is True and d.resolved  # 1.44 points < 2: resolved below the bar
    # p of the one-sample t-test of d − 0.02 = 0
    assert d.p_value == pytest.approx(float(stats.ttest_1samp(np.asarray(d.diffs) - 0.02, 0.0).pvalue), rel=1e-10)
    # the needed seeds use the distance to the bar: |0.00675 − 0.02| / s = 2.768 → n = 3 (2.484 < 2.768 < 8.98)
    assert d.seeds_needed == 3
    tie = paired_diff({0: 0.055, 1: 0.065}, {0: 0.050, 1: 0.060}, null=0.005)  # 0.055 − 0.050 = 0.005000…04
    assert tie.met is True and not tie.resolved and tie.seeds_needed is None


def test_ref_scale_pairs_against_a_multiple_of_the_reference():
    d = paired_diff({0: 0.03, 1: 0.05}, {0: 0.10, 1: 0.08}, ref_scale=0.5)
    assert d.diffs == pytest.approx((-0.02, 0.01))


def _diff(mean: float, sd: float, n: int = 4, null: float = 0.0) -> PairedDiff:
    """Differences with exactly this mean and sample std (z = (−1.5, −0.5, 0.5, 1.5) standardised)."""
    z = np.arange(n) - (n - 1) / 2
    z = z / z.std(ddof=1)
    return PairedDiff(tuple(range(n)), tuple(mean + sd * z), null=null)


def test_verdict_combines_checks_and_words_the_three_cases():
    resolved_low, unresolved_low = _diff(-0.01, 0.001), _diff(-0.005, 0.01)  # needs: 2 (t_3·0.1/2 < 1); 18
    assert unresolved_low.seeds_needed == 18 and resolved_low.resolved
    v = judge({"a": resolved_low, "b": unresolved_low})
    assert (v.met, v.resolved, v.seeds_needed, v.binding) == (True, False, 18, "b")
    assert verdict_phrase(v) == "met on the mean but unresolved (needs ≈ 18 seeds)"
    assert verdict_phrase(judge({"a": resolved_low})) == "met and resolved"
    # not met: one failing check suffices; resolved when a failing check is resolved
    failing_resolved, failing_open = _diff(0.02, 0.001), _diff(0.005, 0.01)
    v = judge({"a": resolved_low, "b": failing_open, "c": failing_resolved})
    assert (v.met, v.resolved, v.binding) == (False, True, "c") and verdict_phrase(v) == "not met (resolved)"
    v = judge({"a": resolved_low, "b": failing_open})
    assert verdict_phrase(v, "supported", "not supported") == \
        "not supported on the mean, unresolved (needs ≈ 18 seeds)"
    tie = judge({"t": _diff(0.0, 0.01)})
    assert verdict_phrase(tie) == "met on the mean but unresolved (Δ equals the bar: no number of seeds resolves it)"
    few = judge({"x": PairedDiff((0,), (-0.01,))})
    assert verdict_phrase(few) == "met on the mean but unresolved (fewer than 2 shared seeds, no spread to judge by)"
    assert verdict_phrase(judge({"CE": PairedDiff((), ())})) == "not checkable (no seed shared: CE)"


def test_t_interval_covers_at_its_level_where_a_bootstrap_over_five_seeds_does_not():
    """Why the pages use the t-interval: 1,000 tables of 5 normal differences with true mean 0.3."""
    rng = np.random.default_rng(1)
    diffs = rng.normal(0.3, 1.0, size=(1000, 5))
    intervals = [paired_diff(dict(enumerate(d)), dict.fromkeys(range(5), 0.0)).interval for d in diffs]
    t_cover = np.mean([low < 0.3 < high for low, high in intervals])
    boot = np.take_along_axis(diffs[:, None, :], rng.integers(0, 5, size=(1000, 1000, 5)), axis=2).mean(axis=2)
    low, high = np.percentile(boot, [2.5, 97.5], axis=1)
    boot_cover = np.mean((low < 0.3) & (0.3 < high))
    assert 0.93 <= t_cover <= 0.97  # nominal 95% (0.963 here): binomial sd 0.007 at 1,000 tables
    assert 0.78 <= boot_cover <= 0.90  # the percentile bootstrap over 5 seeds: 0.854 here
