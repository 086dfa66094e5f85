"""The regime study's page (experiments/regimes): per-run numbers from hand-made predictions, the grid pick, the best
reference, paired differences against scipy, the generated answer, the CSV the method guide reads, and the guide's
branches (metacal/report/regime_guide.py) from that CSV."""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats

from experiments.regimes.numbers import collect, scores
from experiments.regimes.page import page_csv, page_lines
from experiments.regimes.rows import GRID, Variant, best_reference, compare, grid_choice, values, variants
from experiments.regimes.study import Page, Regime, Study
from metacal import metrics
from metacal.run.method import Method
from metacal.predictions import Predictions, load_predictions
from metacal.report.regime_guide import Tally, cells, regimes_markdown, tallies, verdict

K, N = 4, 400
SEEDS = (0, 1, 2, 3)
# (stem, method record, sharpness of its test logits per seed: > 1 over-confident, < 1 under-confident)
STEMS = {"ce": (Method("ce", "ce"), 3.0), "focal": (Method("focal", "focal", {"gamma": 1.0}), 1.6),
         "focal2": (Method("focal2", "focal", {"gamma": 2.0}), 1.2), "mixup": (Method("mixup", "mixup"), 1.05)}
VAL_ECE = {"ce": [0.09, 0.08, 0.10, 0.07], "focal": [0.03, 0.05, 0.02, 0.06], "focal2": [0.04, 0.02, 0.05, 0.01],
           "mixup": [0.02] * 4}


def predictions(seed: int, sharp: float, split: str, noisy: bool) -> Predictions:
    """Labels y ~ softmax(z) of true logits z; the model reports sharp·z (+ a seed's jitter)."""
    gen = torch.Generator().manual_seed(seed * 10 + (split == "test"))
    z = torch.randn(N, K, generator=gen, dtype=torch.float64) * 1.5
    labels = torch.multinomial(torch.softmax(z, 1), 1, generator=gen).squeeze(1)
    logits = (sharp + 0.05 * seed) * z
    extra = {}
    if noisy:
        flip = torch.rand(N, generator=gen) < 0.3
        extra["noisy_labels"] = torch.where(flip, (labels + 1) % K, labels)
    return replace(Predictions.from_logits(logits.float(), labels), **extra)


def make_study(root: Path, noisy: bool = True) -> Study:
    regime = Regime("pair30", "pair 0.3", "noisy", ("data.options.noise_rate=0.3",))
    study = Study("toy", "toy_page", "Toy data", "configs/x/base.yaml", (regime,))
    folder = root / "runs/regimes/toy/pair30"
    for stem, (method, sharp) in STEMS.items():
        for seed in SEEDS:
            run = folder / stem / f"seed{seed}"
            (run / "predictions").mkdir(parents=True)
            predictions(seed, sharp, "val", noisy).save(run / "predictions/val.npz")
            predictions(seed, sharp, "test", noisy).save(run / "predictions/test.npz")
            record = {"label_noise": {"realised": {"train": 0.3, "val": 0.31}}, "sizes": {"train": 100}}
            m = {"finished": True, "epoch": 3 + seed, "val": {"ece": VAL_ECE[stem][seed]}, "test": {"ece": 0.1},
                 "method": method.record(), "data": record}
            (run / "metrics.json").write_text(json.dumps(m))
    (folder / "sweep_command.txt").write_text("python scripts/sweep.py --out runs/regimes/toy/pair30\n")
    return study


@pytest.fixture
def toy(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    study = make_study(tmp_path)
    return study, collect(study, ("ts_nll", "ets"))


def test_scores_are_the_metrics_of_the_predictions():
    pred = predictions(0, 2.0, "test", noisy=True)
    out = scores(pred.probs, pred)
    assert out["ece"] == pytest.approx(float(metrics.ece(pred.probs, pred.labels, 15)))
    assert out["ece_noisy"] == pytest.approx(float(metrics.ece(pred.probs, pred.noisy_labels, 15)))
    assert out["error_noisy"] == pytest.approx(float((pred.probs.argmax(1) != pred.noisy_labels).double().mean()))
    assert "gap" not in out


def test_run_numbers_fit_ts_on_the_runs_own_validation(toy):
    study, found = toy
    run = found["pair30"]["ce"][0]
    val = Predictions.from_logits(*(torch.from_numpy(np.load(f"runs/regimes/toy/pair30/ce/seed0/predictions/val.npz")[k])
                                    for k in ("logits", "labels")))
    from metacal.posthoc import TemperatureScaling

    t = TemperatureScaling("nll").fit(val.logits.double(), val.labels).temperature
    assert run.temperature == pytest.approx(float(t), rel=1e-6) and run.temperature > 1.5  # sharpened 3×
    assert run.variants["ts_nll"]["ece"] < run.variants["raw"]["ece"]
    assert run.fixed_gamma == 0.0 and found["pair30"]["mixup"][0].fixed_gamma is None


def test_grid_pick_is_the_lowest_validation_ece_per_seed(toy):
    _, found = toy
    stems = found["pair30"]
    assert grid_choice(stems) == {0: "focal", 1: "focal2", 2: "focal", 3: "focal2"}
    grid = values(stems, Variant(GRID), "ece")
    assert grid == {s: stems[c].get(s).variants["raw"]["ece"] for s, c in grid_choice(stems).items()}


def test_paired_difference_is_scipys(toy):
    _, found = toy
    stems = found["pair30"]
    ref = best_reference(stems, ("ts_nll", "ets"), "ece")
    means = {c: np.mean([stems["ce"][s].variants[c]["ece"] for s in SEEDS]) for c in ("ts_nll", "ets")}
    assert ref == Variant("ce", min(means, key=means.get))
    d = compare(stems, Variant("mixup"), ref, "ece")
    a = [stems["mixup"][s].variants["raw"]["ece"] for s in SEEDS]
    b = [stems["ce"][s].variants[ref.calibrator]["ece"] for s in SEEDS]
    ci = stats.ttest_rel(a, b).confidence_interval(0.95)
    assert d.mean == pytest.approx(np.mean(np.subtract(a, b))) and d.interval == pytest.approx((ci.low, ci.high))


def test_page_answer_and_csv_agree_with_the_numbers(toy, tmp_path):
    study, found = toy
    spec = Page("toy_page", "Toy", "ece", ("ece", "error", "ece_noisy"))
    lines = page_lines(spec, [study], {"toy": found}, tmp_path / "toy_page.md")
    text = "\n".join(lines)
    assert "python scripts/sweep.py --out runs/regimes/toy/pair30" in text
    stems = found["pair30"]
    ref = best_reference(stems, spec.references, "ece")
    answer = next(line for line in lines if line.startswith("- pair 0.3"))
    better = [v for v in (Variant("mixup"), Variant("mixup", "ts_nll"), Variant(GRID), Variant(GRID, "ts_nll"),
                          Variant("focal"), Variant("focal2"))
              if v.stem in ("mixup", GRID) and (d := compare(stems, v, ref, "ece")).n > 1 and d.resolved and d.mean < 0]
    assert ("**yes**" in answer) == bool(better)
    worse = [v for v in variants(spec.references) if v.trains_differently
             and (d := compare(stems, v, ref, "ece")).n > 1 and d.resolved and d.mean > 0]
    said = {0: "No training-time row is", 1: "1 training-time row is"}.get(len(worse),
                                                                        f"{len(worse)} training-time rows are")
    assert f"{said} resolved worse." in answer
    rows = list(csv.DictReader(page_csv(spec, [study], {"toy": found}).splitlines()))
    line = next(r for r in rows if r["row"] == "mixup" and r["metric"] == "ece")
    d = compare(stems, Variant("mixup"), Variant("ce", "ets"), "ece")
    assert float(line["vs_ce+ets_mean"]) == pytest.approx(d.mean) and line["kind"] == "noisy"
    assert float(line["vs_ce+ets_low"]) == pytest.approx(d.interval[0])
    # the guide's branch reads the same CSV
    path = tmp_path / "toy_page.csv"
    path.write_text(page_csv(spec, [study], {"toy": found}))
    (cell,) = cells(list(csv.DictReader(path.open())), "noisy", "ece")
    others = [v for v in (Variant(GRID), Variant(GRID, "ts_nll"), Variant("mixup"), Variant("mixup", "ts_nll"))]
    wins = [v for v in others if (d := compare(stems, v, ref, "ece")).resolved and d.mean < 0]
    best = min(wins or others, key=lambda v: np.mean(list(values(stems, v, "ece").values())))
    assert cell.row == best.label and cell.reference == ref.label
    assert cell.delta[0] == pytest.approx(compare(stems, best, ref, "ece").mean)


def test_guide_verdict_names_a_row_only_when_it_wins_everywhere():
    from metacal.report.regime_guide import Cell

    win = Cell("A", "r1", "CE + TS", 0.05, "Mixup", 0.03, (-0.02, -0.03, -0.01), True, 5)
    lose = Cell("A", "r2", "CE + ETS", 0.04, "Mixup", 0.05, (0.01, -0.01, 0.03), False, 5)
    assert verdict([win, win]).startswith("Use Mixup: it beats the best post-hoc column by a resolved margin in "
                                          "every regime")
    text = verdict([win, lose])
    assert text.startswith("Use CE + TS or CE + ETS") and "in 1 of 2 regimes (Mixup in A, r1), not in all" in text
    assert "no training-time row beats" in verdict([lose])
    hurt = Cell("A", "r3", "CE + TS", 0.30, "Mixup", 0.2, (-0.1, -0.2, 0.01), False, 5, (-0.2, -0.3, -0.1), True)
    assert verdict([hurt, hurt]).startswith("Keep CE as trained, with no post-hoc map")
    assert not verdict([hurt, lose]).startswith("Keep CE")


def test_guide_prefers_a_row_that_wins_somewhere_and_loses_nowhere():
    """Two regimes against CE + TS: the grid pick wins r1 (resolved) and ties r2; mixup wins r1 but loses r2 (both
    resolved); CE as trained never differs. The verdict names the grid pick; with no such row, the post-hoc column."""
    head = ["study", "study_title", "regime", "regime_label", "kind", "metric", "row", "row_label", "mean", "n",
            "vs_ce+ts_mean", "vs_ce+ts_low", "vs_ce+ts_high", "vs_ce+ts_resolved"]
    table = {  # regime → row → (mean, Δ mean, low, high, resolved)
        "r1": {"ce": (0.08, 0.01, -0.02, 0.04, "0"), "ce+ts": (0.07, "", "", "", ""),
               "grid": (0.05, -0.02, -0.03, -0.01, "1"), "mixup": (0.04, -0.03, -0.05, -0.01, "1")},
        "r2": {"ce": (0.06, 0.01, -0.01, 0.03, "0"), "ce+ts": (0.05, "", "", "", ""),
               "grid": (0.05, 0.0, -0.01, 0.01, "0"), "mixup": (0.07, 0.02, 0.01, 0.03, "1")},
    }
    labels = {"ce": "CE", "ce+ts": "CE + TS", "grid": "Grid pick", "mixup": "Mixup"}
    rows = [{k: str(v) for k, v in zip(head, ("s", "S", regime, regime, "noisy", "ece", row, labels[row],
                                               vals[0], 3, *vals[1:]))}
            for regime, by_row in table.items() for row, vals in by_row.items()]
    assert tallies(rows, "noisy", "ece") == [Tally("CE", 0, 0, 2), Tally("Grid pick", 1, 0, 2), Tally("Mixup", 1, 1, 2)]
    found = cells(rows, "noisy", "ece")
    assert verdict(found, tally=tallies(rows, "noisy", "ece")) == (
        "Use the grid pick (CE and focal γ = 1…5 trained, the lowest validation ECE kept) rather than CE + TS: it "
        "beats the best post-hoc column by a resolved margin in 1 of 2 regimes and loses to it by a resolved margin in "
        "none.")
    tied = [Tally("CE", 1, 0, 2), Tally("Mixup", 1, 0, 2)]
    assert verdict(found, tally=tied).startswith("Use CE as trained (no post-hoc map) or Mixup rather than CE + TS: "
                                                 "each beats")
    assert verdict(found, tally=[Tally("Mixup", 1, 1, 2)]).startswith("Use CE + TS (a post-hoc map")
    assert verdict(found, tally=[Tally("Mixup", 0, 0, 2)]).startswith("Use CE + TS (a post-hoc map")


def test_guide_names_a_resolved_win_before_a_lower_unresolved_mean():
    head = ["study", "study_title", "regime", "regime_label", "kind", "metric", "row", "row_label", "mean", "n",
            "vs_ce+ts_mean", "vs_ce+ts_low", "vs_ce+ts_high", "vs_ce+ts_resolved"]
    lines = [("ce", "CE", 0.030, "", "", "", ""), ("ce+ts", "CE + TS", 0.020, "", "", "", ""),
             ("dual_focal", "Dual focal", 0.015, -0.005, -0.020, 0.010, "0"),  # lowest mean, not resolved
             ("auto_gamma+ts_nll", "Auto γ + TS", 0.019, -0.001, -0.0015, -0.0005, "1")]
    rows = [dict(zip(head, ("s", "S", "r", "R", "imbalanced", "classwise_ece", row, label, mean, 3, *vs)))
            for row, label, mean, *vs in lines]
    rows = [{k: str(v) for k, v in r.items()} for r in rows]
    (cell,) = cells(rows, "imbalanced", "classwise_ece")
    assert (cell.row, cell.resolved, cell.delta[0]) == ("Auto γ + TS", True, -0.001)
    rows[3]["vs_ce+ts_resolved"] = "0"  # no resolved win: the lowest mean
    (cell,) = cells(rows, "imbalanced", "classwise_ece")
    assert (cell.row, cell.resolved) == ("Dual focal", False)


def test_guide_branch_without_the_page_names_the_command(tmp_path):
    with pytest.raises(FileNotFoundError, match="regime_study.py report noisy_labels"):
        regimes_markdown(tmp_path, "docs/results", {"noisy_labels": "Noisy labels"})


def test_regime_line_states_ces_direction_raw_and_after_ts_fitted_on_noisy_labels(toy):
    """CE's logits are 3× too sharp: raw it is over-confident on the clean test labels; TS fitted on validation labels
    with 30% flips (as a noisy run's val.npz holds them) flattens it past calibration, so CE + TS is under-confident
    on the clean test labels. The regime line states both, in points."""
    from experiments.regimes.regime_tables import regime_table
    from metacal.posthoc import TemperatureScaling

    study, _ = toy
    raw, ts = [], []
    for seed in SEEDS:
        run = Path(f"runs/regimes/toy/pair30/ce/seed{seed}/predictions")
        val, test = (load_predictions(run / f"{s}.npz") for s in ("val", "test"))
        val = replace(val, labels=val.noisy_labels)
        val.save(run / "val.npz")
        t = TemperatureScaling("nll").fit(val.logits.double(), val.labels).temperature
        raw.append(float(metrics.overconfidence(test.probs, test.labels)))
        ts.append(float(metrics.overconfidence(torch.softmax(test.logits.double() / t, 1), test.labels)))
    assert np.mean(raw) > 0 > np.mean(ts)
    found = collect(study, ("ts_nll", "ets"))
    row = next(line for line in regime_table(study, found, list(study.regimes)) if line.startswith("| pair 0.3"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[7] == f"over-confident ({100 * np.mean(raw):.2f})"
    assert cells[8] == f"under-confident ({100 * np.mean(ts):.2f})"


def test_a_secondary_paired_table_chooses_its_reference_on_its_own_metric(toy, tmp_path):
    study, found = toy
    spec = Page("toy_page", "Toy", "ece", ("ece", "error", "ece_noisy"), paired=("ece_noisy",))
    lines = page_lines(spec, [study], {"toy": found}, tmp_path / "toy_page.md")
    start = next(i for i, line in enumerate(lines) if line.startswith("### Paired") and "Δ ece_noisy" in line)
    header = next(line for line in lines[start:] if line.startswith("| Row"))
    mixup = next(line for line in lines[start:] if line.startswith("| Mixup |"))
    stems = found["pair30"]
    ref = best_reference(stems, spec.references, "ece_noisy")
    assert f"(vs {ref.label})" in header
    d = compare(stems, Variant("mixup"), ref, "ece_noisy")
    assert f"{100 * d.mean:+.2f}" in mixup
    assert sum("### Paired" in line for line in lines) == 2  # the headline's and this one
