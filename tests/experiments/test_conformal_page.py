"""The prediction-set pages (experiments/conformal): per-run sets equal metacal.conformal applied by hand, the grid
pick is the lowest validation ECE, the paired differences against CE match scipy, the answer names exactly the
resolved rows, coverage under shift equals what ``evaluate_run(sets=…)`` reports for the same run."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats

from experiments.conformal.numbers import clean_sets, collect, grid_choice, key, shift_sets
from experiments.conformal.page import answer, page_lines, rows, versus_ce, write_page
from experiments.conformal.study import ALPHAS, SCORES, Study
from metacal.conformal import ConformalPredictor, set_metrics
from metacal.conformal.evaluation import SetRequest
from metacal.posthoc import TemperatureScaling
from metacal.predictions import Predictions
from metacal.run.method import Method
from metacal.shift.evaluate import evaluate_run

K, N = 5, 600
SEEDS = (0, 1, 2, 3)
# stem → (method record, sharpness of its logits: the larger, the more confident; smaller sets for sharper models)
STEMS = {"ce": (Method("ce", "ce"), 2.0), "focal": (Method("focal", "focal", {"gamma": 1.0}), 1.5),
         "focal2": (Method("focal2", "focal", {"gamma": 2.0}), 1.0), "auto_gamma": (Method("auto_gamma", "focal"), 0.5)}
VAL_ECE = {"ce": [0.09, 0.08, 0.10, 0.07], "focal": [0.03, 0.05, 0.02, 0.06], "focal2": [0.04, 0.02, 0.05, 0.01],
           "auto_gamma": [0.02] * 4}


def predictions(seed: int, sharp: float, split: str) -> Predictions:
    """Labels y ~ softmax(z) of true logits z; the model reports sharp·z plus noise: a blunter model (sharp < 1
    adds relatively more noise) needs larger sets for the same coverage."""
    gen = torch.Generator().manual_seed(seed * 10 + (split == "test"))
    z = torch.randn(N, K, generator=gen, dtype=torch.float64) * 2.0
    labels = torch.multinomial(torch.softmax(z, 1), 1, generator=gen).squeeze(1)
    noise = torch.randn(N, K, generator=gen, dtype=torch.float64) * (1.5 / sharp)
    return Predictions.from_logits((z + noise).float(), labels)


def make_study(root: Path) -> Study:
    folder = root / "runs/toy"
    for stem, (method, sharp) in STEMS.items():
        for seed in SEEDS:
            run = folder / stem / f"seed{seed}"
            (run / "predictions").mkdir(parents=True)
            predictions(seed, sharp, "val").save(run / "predictions/val.npz")
            predictions(seed, sharp, "test").save(run / "predictions/test.npz")
            m = {"finished": True, "epoch": 3, "val": {"ece": VAL_ECE[stem][seed]}, "method": method.record()}
            (run / "metrics.json").write_text(json.dumps(m))
    return Study("toy", "Toy data", "configs/x/base.yaml", folder, "corruptions")


def test_clean_sets_are_conformal_predictors_through_each_column(tmp_path):
    val, test = predictions(0, 1.0, "val"), predictions(0, 1.0, "test")
    got = clean_sets(val, test)
    assert set(got) == {key(c, s, a) for c in ("uncalibrated", "ts_nll") for s in SCORES for a in ALPHAS}
    ts = TemperatureScaling("nll").fit(val.logits.double(), val.labels)
    for score in SCORES:
        predictor = ConformalPredictor(score, 0.05).fit(ts.transform(val.logits.double()), val.labels)
        expected = set_metrics(predictor.predict_set(ts.transform(test.logits.double())), test.labels)
        for k in ("coverage", "size_mean", "class_coverage_worst"):
            assert got[key("ts_nll", score, 0.05)][k] == pytest.approx(expected[k], abs=1e-12)


def test_grid_pick_paired_differences_and_the_answer(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    study = make_study(tmp_path)
    runs = collect(study, tuple(STEMS), shift=False)
    assert {s: sorted(r) for s, r in runs.items()} == {s: list(SEEDS) for s in STEMS}
    grid = ("ce", "focal", "focal2", "focal3", "focal4", "focal5")
    assert grid_choice(runs, grid) == {0: "focal", 1: "focal2", 2: "focal", 3: "focal2"}  # lowest validation ECE
    table = rows(runs)
    assert table["grid", "uncalibrated"][0] is runs["focal"][0] and table["grid", "ts_nll"][1] is runs["focal2"][1]
    d = versus_ce(table, "auto_gamma", "uncalibrated", "aps", 0.1)
    diffs = [runs["auto_gamma"][s].clean[key("uncalibrated", "aps", 0.1)]["size_mean"]
             - runs["ce"][s].clean[key("uncalibrated", "aps", 0.1)]["size_mean"] for s in SEEDS]
    low, high = stats.t.interval(0.95, len(diffs) - 1, loc=np.mean(diffs), scale=stats.sem(diffs))
    assert (d.mean, *d.interval) == pytest.approx((np.mean(diffs), low, high), abs=1e-12)
    assert d.resolved and d.mean > 0  # the bluntest model needs the largest sets
    text = "\n".join(answer(table, study))
    ref = "CE" if np.mean([runs["ce"][s].clean[key("uncalibrated", "aps", 0.1)]["size_mean"] for s in SEEDS]) <= \
        np.mean([runs["ce"][s].clean[key("ts_nll", "aps", 0.1)]["size_mean"] for s in SEEDS]) else "CE + TS"
    assert f"α = 0.1, APS, against {ref} (4+ seeds): resolved smaller sets: none;" in text
    lines = "\n".join(page_lines(study, runs, None))
    assert "python scripts/conformal_report.py report toy" in lines and "| Auto γ + TS (n=4) |" in lines
    assert ("Grid pick: per seed, the run with the lowest validation ECE among CE and focal γ = 1, 2 (seed 0: focal "
            "γ = 1; seed 1: focal γ = 2; seed 2: focal γ = 1; seed 3: focal γ = 2).") in lines


def test_a_sharper_row_is_named_when_resolved_smaller(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    study = make_study(tmp_path)
    runs = collect(study, tuple(STEMS), shift=False)
    runs["ls_005"] = {s: replace(r, stem="ls_005") for s, r in runs["ce"].items()}  # a copy of CE ...
    runs["ce"] = {s: replace(r, stem="ce") for s, r in runs["focal2"].items()}  # ... and a blunter CE
    text = "\n".join(answer(rows(runs), study))
    assert "α = 0.1, APS, against CE (4+ seeds): resolved smaller sets: LS-0.05 -" in text  # the sharper copy


def test_the_discussions_links_are_rebased_onto_the_page(tmp_path, monkeypatch):
    """The Discussion file's links are written from docs/results/discussion/, so that they work where it lies;
    on the page, one folder up, they name the same files."""
    monkeypatch.chdir(tmp_path)
    study = make_study(tmp_path)
    folder = tmp_path / "docs/results/discussion"
    folder.mkdir(parents=True)
    (folder / "conformal_toy.md").write_text("See [the other page](../conformal_other.md) and [code](../../x.md#a).\n")
    page = write_page(study, collect(study, tuple(STEMS), shift=False), tmp_path / "docs/results").read_text()
    assert "## Discussion\n\nSee [the other page](conformal_other.md) and [code](../x.md#a).\n" in page


def test_shift_coverage_equals_evaluate_run(mnist1d_run):
    got = shift_sets(mnist1d_run, "mnist1d_natural", severities=(2,), alpha=0.1)
    result = evaluate_run(mnist1d_run, shift="mnist1d_natural", severities=[2], write=False, progress=False,
                          sets=SetRequest("raps", 0.1))
    held = next(m for m in result["shift"]["mean"] if m["severity"] == 2 and m["over"] == "held_out")["metrics"]
    for column in ("uncalibrated", "ts_nll"):
        assert got[key(column, "raps")][2]["coverage"] == pytest.approx(held[column]["sets"]["coverage"], abs=1e-9)
        assert got[key(column, "raps")][2]["size_mean"] == pytest.approx(held[column]["sets"]["size_mean"], abs=1e-9)
    clean = result["clean"]["ts_nll"]["sets"]
    assert got[key("ts_nll", "raps")][0]["coverage"] == pytest.approx(clean["coverage"], abs=1e-9)


def test_weighted_shift_coverage_equals_evaluate_run_and_reaches_the_page(mnist1d_run):
    got = shift_sets(mnist1d_run, "mnist1d_natural", severities=(4, 5), alpha=0.1, weighted=True)
    result = evaluate_run(mnist1d_run, shift="mnist1d_natural", severities=[4], write=False, progress=False,
                          sets=SetRequest("aps", 0.1, weighted=True))
    held = next(m for m in result["shift"]["mean"] if m["severity"] == 4 and m["over"] == "held_out")["metrics"]
    for column in ("uncalibrated", "ts_nll"):
        for k in ("coverage", "size_mean"):
            assert got[key(f"{column}_weighted", "aps")][4][k] == pytest.approx(held[column]["sets"][k], abs=1e-9)
    # the weights change the sets (a different quantile per input) and the page shows both rows
    assert got[key("ts_nll_weighted", "aps")][4]["size_mean"] != got[key("ts_nll", "aps")][4]["size_mean"]
    from experiments.conformal.numbers import RunSets
    from experiments.conformal.page import weighted_answer, weighted_table
    runs = {"ce": {s: RunSets("ce", s, 0.1, 1.5, 0.2, {}, got) for s in (0, 1)}}
    table = {("ce", "uncalibrated"): runs["ce"], ("ce", "ts_nll"): runs["ce"]}
    lines = "\n".join(weighted_table(table, Study("t", "T", "b", Path("r"), "mnist1d_natural")))
    cov = 100 * got[key("ts_nll_weighted", "aps")][4]["coverage"]
    assert "| CE + TS, weighted | APS |" in lines and f"{cov:.1f} / " in lines
    # the domain table: AUROC and the share of infinite quantiles, recomputed by hand for one family
    from metacal.conformal import domain_weights, log_prob_features
    from metacal.data import shift_suites
    from metacal.metrics.ood import auroc
    from metacal.predict.network import load_run
    run = load_run(mnist1d_run, "cpu")
    family = shift_suites.held_out_families(run.bundle, "mnist1d_natural")[0]
    x, _ = shift_suites.shifted_split(run.bundle, "mnist1d_natural", family, 5, "test", 0)
    w_cal, w_test = domain_weights(log_prob_features(torch.softmax(run.val.logits.double(), 1)),
                                   log_prob_features(torch.softmax(run.logits(x).double(), 1)))
    cell = got[key("weights", family)][5]
    assert cell["auroc"] == pytest.approx(auroc(w_test, w_cal), abs=1e-9)
    assert cell["infinite"] == pytest.approx(float((w_test > 0.1 * w_cal.sum() / 0.9).double().mean()), abs=1e-12)
    assert f"| {family} | " in lines and f"{cell['auroc']:.2f} / {100 * cell['infinite']:.0f} |" in lines
    gain = 100 * (got[key("ts_nll_weighted", "aps")][5]["coverage"] - got[key("ts_nll", "aps")][5]["coverage"])
    text = "\n".join(weighted_answer(table))
    # two identical seeds: a zero-width interval, marked resolved
    assert "on CE + TS at severity 5" in text and f"APS **{gain:+.1f} [" in text, text


def test_each_studys_printed_sweep_trains_the_seeds_and_runs_its_page_reads():
    from experiments.conformal.study import GRID, GRID_STEMS, METHODS, RESNET_GRID, STUDIES
    from experiments.regimes.study import SEEDS as REGIME_SEEDS

    for study in STUDIES:
        argv = study.sweep_command().split()
        seeds = tuple(int(a) for a in argv[argv.index("--seeds") + 1:argv.index("--out")])
        assert seeds == study.seeds
        assert argv[argv.index("--out") + 1] == str(study.runs)
        methods = argv[argv.index("--methods") + 1:argv.index("--seeds")]
        assert set(methods) == {*study.grid, *(m for m in METHODS if m != GRID)}  # every row's runs, no others
        assert study.grid == (RESNET_GRID if "resnet" in study.name else GRID_STEMS)
    mlp = [s for s in STUDIES if "regimes" in s.runs.parts]
    assert mlp and all(s.seeds == REGIME_SEEDS for s in mlp)  # the regime study's clean sweeps: same seeds
