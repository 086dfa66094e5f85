"""The generated claim check (Wang & Golebiowski 2024: lowest ECE with error within 0.5 points of CE) and the
direction table."""

import math

import numpy as np
import pytest

from metacal.report.aggregate import MethodRow, aggregate
from metacal.report.claim import check_claim, claim_markdown, direction_markdown
from metacal.report.runs import find_runs


def row(method: str, label: str, error: float, ece: float, over: float = math.nan, t: float = math.nan) -> MethodRow:
    r = MethodRow(method=method, label=label, seeds=[0, 1], missing_seeds=[])
    r.stats = {"error": (error, 0.001, 2), "ece": (ece, 0.002, 2), "overconfidence": (over, 0.0, 2),
               "t_nll": (t, 0.0, 2)}
    return r


def table(fl_error: float, fl_ece: float, focal_ece: float = 0.02) -> list[MethodRow]:
    return [row("ce", "CE", 0.050, 0.030, +0.025, 1.4), row("focal", "Focal", 0.060, focal_ece, -0.015, 0.8),
            row("flgamma_sece", "FLγ-SECE", fl_error, fl_ece, -0.004, 0.95)]


def test_supported_when_lowest_ece_and_error_within_half_a_point():
    result = check_claim(table(fl_error=0.054, fl_ece=0.010))
    assert result["supported"] and result["rank"] == 1 and result["n_methods"] == 3
    assert result["error_gap"] == pytest.approx(0.004) and result["better"] == []
    text = "\n".join(claim_markdown(table(0.054, 0.010)))
    assert "+0.40 points — within 0.5" in text and "rank 1 of 3" in text
    assert "**Verdict on this data (seeds and schedule unknown): supported.**" in text


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
    assert "**Verdict on this data (" in text and (": supported.**" in text) is (lowest and within)
    assert ("NOT within" in text) is (not within)


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


@pytest.mark.parametrize("fl_error, fl_ece, checks", [
    (0.305, 0.050, (True, True, True)),    # ties the chosen fixed γ's 5.0%: met
    (0.305, 0.048, (True, True, True)),
    (0.311, 0.048, (True, True, False)),   # 1.1 points above CE
    (0.310, 0.050, (True, True, True)),    # exactly 1 point: within
    (0.305, 0.060, (False, True, True)),   # 6% > focal γ = 3's 5% (Focal γ = 1's 4.5% is not the bar: chosen on val)
    (0.305, 0.0701, (False, False, True)),  # above half of CE's 14%
])  # fmt: skip
def test_oracle_bar_uses_the_fixed_gamma_chosen_on_validation(fl_error, fl_ece, checks):
    from metacal.report.claim import check_oracle

    result = check_oracle(oracle_table(fl_error, fl_ece))
    assert result["fixed"].method == "focal3"
    assert (result["ece_vs_fixed"], result["ece_vs_half_ce"], result["error_vs_ce"]) == checks
    assert result["met"] == all(checks)
    text = "\n".join(claim_markdown(oracle_table(fl_error, fl_ece)))
    assert "Regime: CE is OVER-confident on this data (temperature fitted by TS-NLL on validation T = 1.800" in text
    assert f"**Bar {'met' if all(checks) else 'not met'} by FLγ-SECE**" in text


def test_oracle_bar_is_checked_for_the_trajectory_variant_too():
    from metacal.report.claim import check_oracle

    rows = oracle_table(0.330, 0.080) + [with_val(row("flgamma_sece_trajectory", "FLγ-SECE, trajectory level",
                                                      0.305, 0.040), 0.03)]
    assert check_oracle(rows, "flgamma_sece_trajectory")["met"] and not check_oracle(rows)["met"]
    text = "\n".join(claim_markdown(rows))
    assert "**Bar not met by FLγ-SECE**" in text and "**Bar met by FLγ-SECE, trajectory level**" in text
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

    assert basis(rows(5, 5), "30-epoch schedule") == "5 seeds per method, 30-epoch schedule"
    assert basis(rows(3, 2)) == "2–3 seeds per method; fewer than 3 seeds: differences not resolved"
    assert basis(rows(1, 1), "6-epoch schedule of at most 100 steps per epoch (shortened)") == (
        "1 seed per method, 6-epoch schedule of at most 100 steps per epoch (shortened); a single seed: no spread, "
        "not a result; shortened schedule: a smoke test of the pipeline more than a result")
