"""The generated claim check (Wang & Golebiowski 2024: lowest ECE with error within 0.5 points of CE) and the
direction table."""

import math

import numpy as np
import pytest

from metacal.report.aggregate import MethodRow, aggregate, mean_std
from metacal.report.claim import check_claim, claim_markdown, direction_markdown
from metacal.run.layout import find_runs
from grid_specs import grid_spec


def row(method: str, label: str, error: float, ece: float, over: float = math.nan, t: float = math.nan,
        errors: list[float] | None = None, eces: list[float] | None = None) -> MethodRow:
    """A row with per-seed numbers (default: seeds 0, 1 at mean ∓ 0.001/√2 error, ∓ 0.002/√2 ECE — the same offsets
    for every row, so paired differences have no spread) and its stats computed from them."""
    errors = errors or [error - 0.001 / math.sqrt(2), error + 0.001 / math.sqrt(2)]
    eces = eces or [ece - 0.002 / math.sqrt(2), ece + 0.002 / math.sqrt(2)]
    r = MethodRow(method=method, label=label, seeds=list(range(len(eces))), missing_seeds=[], spec=grid_spec(method))
    r.per_run = {s: {"error": e, "ece": c} for s, (e, c) in enumerate(zip(errors, eces))}
    r.stats = {"error": mean_std(errors), "ece": mean_std(eces), "overconfidence": (over, 0.0, 2),
               "t_nll": (t, 0.0, 2)}
    return r


def table(fl_error: float, fl_ece: float, focal_ece: float = 0.02) -> list[MethodRow]:
    return [row("ce", "CE", 0.050, 0.030, +0.025, 1.4), row("focal", "Focal", 0.060, focal_ece, -0.015, 0.8),
            row("flgamma_sece", "FLγ-SECE", fl_error, fl_ece, -0.004, 0.95)]


def test_supported_when_lowest_ece_and_error_within_half_a_point():
    result = check_claim(table(fl_error=0.054, fl_ece=0.010))
    assert result["supported"] and result["rank"] == 1 and result["n_methods"] == 3
    assert result["error_check"].mean == pytest.approx(0.004) and result["better"] == []
    assert result["verdict"].resolved  # the same offsets on both seeds: no spread, resolved
    text = "\n".join(claim_markdown(table(0.054, 0.010)))
    assert "paired Δ +0.40 [+0.40, +0.40] points over 2 shared seeds, bar +0.5: within and resolved." in text
    assert "rank 1 of 3" in text
    assert "**Verdict on this data (2 seeds per method; paired by seed, 95% t-intervals): supported and resolved.**" \
        in text


@pytest.mark.parametrize("fl_error, fl_ece, focal_ece, lowest, within, better", [
    (0.056, 0.010, 0.020, True, False, []),          # error 0.6 points above CE
    (0.055, 0.010, 0.020, True, True, []),           # exactly 0.5 points: within (not lost to rounding)
    (0.045, 0.025, 0.020, False, True, ["Focal"]),   # better error, but Focal has the lower ECE
    (0.070, 0.040, 0.020, False, False, ["Focal", "CE"]),
])  # fmt: skip
def test_each_half_of_the_claim(fl_error, fl_ece, focal_ece, lowest, within, better):
    result = check_claim(table(fl_error, fl_ece, focal_ece))
    assert result["lowest_ece"] is lowest and result["error_within"] is within
    assert result["supported"] is (lowest and within)
    assert [r.label for r in result["better"]] == better
    text = "\n".join(claim_markdown(table(fl_error, fl_ece, focal_ece)))
    assert "**Verdict on this data (" in text and (": supported" in text) is (lowest and within)
    assert ("NOT within" in text) is (not within)
    # every difference here has zero spread: resolved unless it sits exactly on its bar (the 0.5-point tie)
    tie = fl_error == 0.055
    assert result["within"].resolved is (not tie)
    if tie:
        assert "bar +0.5: within on the mean but unresolved (Δ equals the bar: no number of seeds resolves it)" in text


def test_missing_rows_are_not_checkable():
    assert check_claim(table(0.05, 0.01)[:2]) is None
    assert check_claim(table(0.05, 0.01)[1:]) is None
    assert "Not checkable" in "\n".join(claim_markdown(table(0.05, 0.01)[:2]))


def test_direction_table_signs_and_temperatures():
    lines = direction_markdown(table(0.054, 0.010))
    body = [ln for ln in lines if ln.startswith("| ") and not ln.startswith("| Method")]
    assert body[0] == "| CE | 3.00 | +2.50 | over-confident | 1.400 |"
    assert body[1] == "| Focal | 2.00 | -1.50 | under-confident | 0.800 |"
    assert len(body) == 3


def test_overconfidence_is_mean_confidence_minus_accuracy(tmp_path, run_writer):
    for seed in (0, 1):
        run_writer(tmp_path / "ce" / f"seed{seed}", seed, n=300, k=4, sharpness=3.0)  # sharpened: over-confident
    [ce] = aggregate(find_runs(tmp_path))
    expected = []
    for seed in (0, 1):
        with np.load(tmp_path / "ce" / f"seed{seed}" / "predictions" / "test.npz") as f:
            z, y = f["logits"].astype(np.float64), f["labels"]
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        expected.append(p.max(1).mean() - (p.argmax(1) == y).mean())
    mean, std, n = ce.stats["overconfidence"]
    assert n == 2 and mean == pytest.approx(np.mean(expected), abs=1e-6) and mean > 0.05
    assert ce.stats["t_nll"][0] > 1.0  # TS agrees: an over-confident model is cooled by T > 1


def with_val(r: MethodRow, ece_val: float) -> MethodRow:
    r.stats["ece_val"] = (ece_val, 0.0, 2)
    return r


def oracle_table(fl_error: float, fl_ece: float) -> list[MethodRow]:
    """CE over-confident (T = 1.8, ECE 14%); focal γ = 3 has the lower VALIDATION ECE though γ = 1 tests better."""
    return [with_val(row("ce", "CE", 0.300, 0.140, +0.12, 1.8), 0.13),
            with_val(row("focal", "Focal", 0.310, 0.045), 0.060),
            with_val(row("focal3", "Focal γ = 3", 0.340, 0.050), 0.040),
            with_val(row("flgamma_sece", "FLγ-SECE", fl_error, fl_ece), 0.05)]


TIED = "met on the mean but unresolved (Δ equals the bar: no number of seeds resolves it)"


@pytest.mark.parametrize("fl_error, fl_ece, checks, verdict", [
    (0.305, 0.050, (True, True, True), TIED),  # ties the chosen fixed γ's 5.0%: met, but nothing to resolve
    (0.305, 0.048, (True, True, True), "met and resolved"),
    (0.311, 0.048, (True, True, False), "not met (resolved)"),   # 1.1 points above CE
    (0.310, 0.050, (True, True, True), TIED),    # exactly 1 point: within
    (0.305, 0.060, (False, True, True), "not met (resolved)"),   # 6% > focal γ = 3's 5% (Focal γ = 1's 4.5% is not
    (0.305, 0.0701, (False, False, True), "not met (resolved)"),  # the bar: chosen on val); above half of CE's 14%
])  # fmt: skip
def test_oracle_bar_uses_the_fixed_gamma_chosen_on_validation(fl_error, fl_ece, checks, verdict):
    from metacal.report.claim import check_oracle

    result = check_oracle(oracle_table(fl_error, fl_ece))
    assert result["fixed"].method == "focal3"
    assert (result["ece_vs_fixed"], result["ece_vs_half_ce"], result["error_vs_ce"]) == checks
    assert result["met"] == all(checks)
    text = "\n".join(claim_markdown(oracle_table(fl_error, fl_ece)))
    assert "Regime: CE is OVER-confident on this data (temperature fitted by TS-NLL on validation T = 1.800" in text
    assert f"**Bar for FLγ-SECE: {verdict}** (paired by seed, 95% t-intervals; per seed below)." in text


def test_oracle_bar_is_checked_for_the_trajectory_variant_too():
    from metacal.report.claim import check_oracle

    rows = oracle_table(0.330, 0.080) + [with_val(row("flgamma_sece_trajectory", "FLγ-SECE, trajectory level",
                                                      0.305, 0.040), 0.03)]
    assert check_oracle(rows, "flgamma_sece_trajectory")["met"] and not check_oracle(rows)["met"]
    text = "\n".join(claim_markdown(rows))
    assert "**Bar for FLγ-SECE: not met (resolved)**" in text
    assert "**Bar for FLγ-SECE, trajectory level: met and resolved**" in text
    assert text.count("chosen on mean validation ECE: Focal γ = 3") == 1  # one bar, stated once


def test_per_seed_table_pairs_each_seed_with_the_fixed_gamma():
    from metacal.report.claim import per_seed_markdown

    fixed = row("focal3", "Focal γ = 3", 0.34, 0.05)
    meta = row("flgamma_sece_trajectory", "Trajectory", 0.33, 0.04)
    fixed.per_run = {0: {"ece": 0.050, "error": 0.34}, 1: {"ece": 0.040, "error": 0.35}}
    meta.per_run = {0: {"ece": 0.030, "error": 0.33}, 1: {"ece": 0.045, "error": 0.32}, 2: {"ece": 0.01, "error": 0.3}}
    text = "\n".join(per_seed_markdown(fixed, [meta]))
    assert "| 0 | 5.00 / 34.00 | 3.00 / 33.00 |" in text and "| 2 | – | 1.00 / 30.00 |" in text
    assert "Trajectory: test ECE ≤ Focal γ = 3's on 1 of 2 seeds." in text  # seed 2 has no fixed-γ run


def test_regime_sentence_under_confident_and_unknown():
    from metacal.report.claim import regime_sentence

    assert "OVER-confident" in regime_sentence(table(0.05, 0.01))  # CE fits T = 1.4
    rows = [row("ce", "CE", 0.05, 0.03, -0.02, 0.87)]
    assert regime_sentence(rows).startswith("Regime: CE is UNDER-confident on this data (") and "T = 0.870" in \
        regime_sentence(rows)
    assert regime_sentence([row("ce", "CE", 0.05, 0.03)]) == "Regime: unknown (no temperature fitted for the CE runs)."


def test_the_verdict_says_what_it_rests_on():
    from metacal.report.claim import basis

    def rows(*n_runs):
        out = []
        for i, n in enumerate(n_runs):
            r = row(f"m{i}", f"M{i}", 0.1, 0.05)
            r.per_run = {s: {"ece": 0.05, "error": 0.1} for s in range(n)}
            out.append(r)
        return out

    assert basis(rows(5, 5), "30-epoch schedule") == "5 seeds per method, 30-epoch schedule; paired by seed, 95% " \
        "t-intervals"
    assert basis(rows(3, 2)) == "2–3 seeds per method; paired by seed, 95% t-intervals"
    assert basis(rows(1, 1), "6-epoch schedule of at most 100 steps per epoch (shortened)") == (
        "1 seed per method, 6-epoch schedule of at most 100 steps per epoch (shortened); paired by seed, 95% "
        "t-intervals; a single seed: no spread, not a result; shortened schedule: a smoke test of the pipeline more "
        "than a result")


Z = [-1.5 / math.sqrt(5 / 3), -0.5 / math.sqrt(5 / 3), 0.5 / math.sqrt(5 / 3), 1.5 / math.sqrt(5 / 3)]  # mean 0, sd 1


def noisy(base: float, mean: float, sd: float) -> list[float]:
    """Four seeds base + mean + sd·z: paired against a constant ``base`` the differences have this mean and sd."""
    return [base + mean + sd * z for z in Z]


def claim_table(d_mean: float, d_sd: float) -> list[MethodRow]:
    """Four seeds. CE: ECE 3%, error 5%; Focal: ECE 2%, error 6%; FLγ-SECE: ECE 2% + d (d with mean d_mean, sd
    d_sd), error 5.2% on every seed (+0.2 points, resolved within 0.5)."""
    return [row("ce", "CE", 0.05, 0.03, errors=[0.05] * 4, eces=[0.03] * 4),
            row("focal", "Focal", 0.06, 0.02, errors=[0.06] * 4, eces=[0.02] * 4),
            row("flgamma_sece", "FLγ-SECE", 0.052, 0.02 + d_mean, errors=[0.052] * 4, eces=noisy(0.02, d_mean, d_sd))]


@pytest.mark.parametrize("d_mean, d_sd, verdict, ece_part", [
    (-0.010, 0.001, "supported and resolved", "met and resolved"),
    # ECE − Focal's: |d̄|/s = 0.5 → 18 seeds (t_16/√17 = 0.514, t_17/√18 = 0.497); − CE's: 1.5 → 5; error: resolved
    (-0.005, 0.010, "supported on the mean but unresolved (needs ≈ 18 seeds)",
     "met on the mean but unresolved (needs ≈ 18 seeds); deciding comparison: vs Focal"),
    (+0.005, 0.010, "not supported on the mean, unresolved (needs ≈ 18 seeds)",
     "not met on the mean, unresolved (needs ≈ 18 seeds); deciding comparison: vs Focal"),
    (+0.010, 0.001, "not supported (resolved)", "not met (resolved); deciding comparison: vs Focal"),
])  # fmt: skip
def test_claim_verdict_is_judged_on_paired_differences(d_mean, d_sd, verdict, ece_part):
    text = "\n".join(claim_markdown(claim_table(d_mean, d_sd), schedule="30-epoch schedule"))
    assert ("- Error: FLγ-SECE 5.20 ± 0.00% vs CE 5.00 ± 0.00%; paired Δ +0.20 [+0.20, +0.20] points over 4 shared "
            "seeds, bar +0.5: within and resolved.") in text
    assert f"- Lowest ECE, paired against each of the 2 other methods: {ece_part}" in text
    assert (f"**Verdict on this data (4 seeds per method, 30-epoch schedule; paired by seed, 95% t-intervals): "
            f"{verdict}.**") in text


def test_oracle_bar_met_on_the_mean_but_unresolved():
    from metacal.report.claim import check_oracle

    rows = [with_val(row("ce", "CE", 0.30, 0.14, +0.12, 1.8, errors=[0.30] * 4, eces=[0.14] * 4), 0.13),
            with_val(row("focal3", "Focal γ = 3", 0.34, 0.05, errors=[0.34] * 4, eces=[0.05] * 4), 0.04),
            with_val(row("flgamma_sece", "FLγ-SECE", 0.305, 0.045, errors=[0.305] * 4,
                         eces=noisy(0.05, -0.005, 0.01)), 0.05)]
    result = check_oracle(rows)
    assert result["met"] and not result["verdict"].resolved and result["verdict"].binding == "ece_vs_fixed"
    assert result["checks"]["ece_vs_fixed"].seeds_needed == 18 and result["checks"]["ece_vs_half_ce"].resolved
    text = "\n".join(claim_markdown(rows))
    assert "**Bar for FLγ-SECE: met on the mean but unresolved (needs ≈ 18 seeds)**" in text
    assert ("- test ECE 4.50 ± 1.00% ≤ Focal γ = 3's 5.00 ± 0.00%: paired Δ -0.50 [-2.09, +1.09] points over 4 "
            "shared seeds: met on the mean but unresolved (needs ≈ 18 seeds)") in text
    # ECE − 0.5 × CE's = 4.5% − 7% per seed on the mean: resolved below 0
    assert "paired Δ(ECE − 0.5 × CE ECE) -2.50 [-4.09, -0.91] points over 4 shared seeds: met and resolved" in text
