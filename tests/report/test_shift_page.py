"""The shift results page (metacal/report/shift_page.py, scripts/shift_report.py) on a hand-written sweep whose
numbers are known: every expectation below is assembled by hand from the formulas of ``_ece``/``_summary``."""

from __future__ import annotations

import csv
import importlib.util
import json
import math
from pathlib import Path

import pytest
from grid_specs import grid_spec
from scipy import stats

from metacal.report.shift_page import main

ROOT = Path(__file__).resolve().parents[2]
SUITE = "corruptions"
FIT, HELD = "gaussian_noise", "impulse_noise"  # the fake suite: one fit family, one held out
# per (method, seed): the run's own ECE offset; val ECE chooses the grid pick (auto_gamma is lowest, not in the grid)
OFFSET = {"ce": (0.05, 0.06, 0.07), "focal": (0.03, 0.05, 0.04), "focal2": (0.02, 0.01, 0.03),
          "auto_gamma": (0.01, 0.02, 0.00)}
VAL_ECE = {"ce": (0.01, 0.05, 0.05), "focal": (0.02, 0.01, 0.04), "focal2": (0.03, 0.04, 0.02),
           "auto_gamma": (0.001, 0.0, 0.001)}
COLUMN = {"uncalibrated": 0.0, "ts_nll": -0.01, "ts_perturbed": -0.015, "ets": -0.012}
FAMILY = {FIT: 0.0, HELD: 0.03}
METRIC = {"error": 0.10, "nll": 0.50, "brier": 0.20, "mce": 0.05, "ace": 0.01, "aurc": 0.03, "augrc": 0.02}


def _ece(method: str, seed: int, column: str, family: str | None, severity: int) -> float:
    shifted = 0.01 * severity + (FAMILY[family] if severity else 0.0)
    return 0.02 + shifted + OFFSET[method][seed] + COLUMN[column]


def _summary(ece: float) -> dict:
    return {"n": 100, "ece": ece, **{m: ece + d for m, d in METRIC.items()},
            "risk_at_coverage": {"0.8": ece + 0.04, "0.9": ece + 0.06},
            "coverage_at_risk": {"0.01": ece + 0.3, "0.05": ece + 0.5}}


def _ood(method: str, seed: int) -> dict:
    out = {}
    for column, bump in (("uncalibrated", 0.0), ("ts_nll", 0.01)):
        out[column] = {score: {"auroc": 0.8 + OFFSET[method][seed] + bump + 0.001 * i, "aupr_in": 0.7, "aupr_out": 0.6,
                               "fpr95": 0.5 - OFFSET[method][seed]}
                       for i, score in enumerate(("msp", "max_logit", "energy", "entropy"))}
    return {"set": "digits", "n_in": 100, "n_out": 50, **out}


def make_sweep(root: Path, methods=tuple(OFFSET), temps=(1.2, 1.5, 1.8), ood: bool = True) -> Path:
    """<root>/<method>/seed<S>/ with metrics.json, shift/corruptions.json (2 families × severities 1–2; no
    precomputed means: the page averages the cells) and shift/ood_digits.json."""
    for method in methods:
        for seed in range(3):
            run = root / method / f"seed{seed}"
            (run / "shift").mkdir(parents=True)
            clean = {col: _summary(_ece(method, seed, col, None, 0)) for col in COLUMN}
            metrics = {"val": {"ece": VAL_ECE[method][seed]}, "test": clean["uncalibrated"],
                       "test_after_ts": {"temperature": temps[seed]}, "method": grid_spec(method).record()}
            (run / "metrics.json").write_text(json.dumps(metrics))
            cells = [{"family": f, "severity": s, "metrics": {c: _summary(_ece(method, seed, c, f, s)) for c in COLUMN}}
                     for f in (FIT, HELD) for s in (1, 2)]
            shift = {"suite": SUITE, "families": [FIT, HELD], "fit_families": [FIT], "held_out_families": [HELD],
                     "severities": [0, 1, 2], "clean": clean, "cells": cells}
            head = {"run": str(run), "num_bins": 15, "calibrators": {"ts_nll": {"temperature": temps[seed]}},
                    "clean": clean}
            (run / "shift" / f"{SUITE}.json").write_text(json.dumps({**head, "shift": shift}))
            if ood:
                (run / "shift" / "ood_digits.json").write_text(json.dumps({**head, "ood": _ood(method, seed)}))
    return root


def table(md: str, heading: str) -> dict[str, list[str]]:
    """{row label: cells} of the first table after the Markdown heading ``heading``."""
    lines = md.splitlines()
    start = lines.index(heading)
    rows = {}
    for line in lines[start + 1:]:
        if line.startswith("#"):
            break
        if line.startswith("| ") and not line.startswith("| Method"):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            rows[cells[0]] = cells[1:]
        elif rows and not line.startswith("|"):
            break
    return rows


def pct(values) -> str:
    """Mean ± sample std in %, as the page writes it."""
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return f"{100 * mean:.2f} ± {100 * sd:.2f}"


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    root = make_sweep(tmp_path_factory.mktemp("sweep"))
    out = root.parent / "docs" / "shift.md"
    argv = [str(root), "--suite", SUITE, "--out", str(out), "--ood", "digits", "--sweep-command", "python sweep x"]
    assert main(argv) == 0
    return root, out, out.read_text(encoding="utf-8")


def test_commands_and_regime(page):
    root, out, md = page
    assert "python sweep x" in md
    assert f'for r in {root}/*/seed*; do python -m metacal.evaluate "$r" --shift corruptions --ood digits; done' in md
    assert f"python scripts/shift_report.py {root} --suite corruptions --out {out}" in md
    # CE's clean ECE 7, 8, 9 %; T 1.2, 1.5, 1.8 → mean 1.5 > 1
    assert "CE's clean test ECE 8.00 ± 1.00%, its temperature-scaling T = 1.500 ± 0.300 (mean over 3 seeds): " \
           "CE is over-confident (T > 1)" in md


def test_ece_by_severity_all_and_held_out(page):
    _, _, md = page
    every = table(md, "## Test ECE against severity, mean over all families")
    held = table(md, "## Test ECE against severity, mean over the held-out families")
    # CE raw, seeds 0..2: clean 0.02 + (.05, .06, .07); sev 2 all families: 0.02 + 0.02 + (0 + 0.03)/2 + offset
    assert every["CE"] == ["8.00 ± 1.00", "10.50 ± 1.00", "11.50 ± 1.00"]
    # held out = impulse_noise alone: 0.02 + 0.01·sev + 0.03 + offset (the fit family's numbers must not enter)
    assert held["CE"] == ["8.00 ± 1.00", "12.00 ± 1.00", "13.00 ± 1.00"]
    assert held["CE + TS"][2] == "12.00 ± 1.00"
    assert held["CE + perturbation TS"][2] == "11.50 ± 1.00"
    assert held["CE + ensemble TS"][2] == "11.80 ± 1.00"
    assert held["Focal γ = 2"] == [pct([0.04, 0.03, 0.05]), pct([0.08, 0.07, 0.09]), pct([0.09, 0.08, 0.10])]
    assert "Focal γ = 2 + perturbation TS" not in held  # extra calibrators are CE's only
    assert list(held) == ["CE", "CE + TS", "CE + perturbation TS", "CE + ensemble TS", "Focal", "Focal + TS",
                          "Focal γ = 2", "Focal γ = 2 + TS", "Focal, auto γ", "Focal, auto γ + TS", "Grid pick"]


def test_grid_pick_per_seed_on_validation_ece(page):
    _, _, md = page
    # val ECE: seed 0 CE .01 < focal .02 < focal2 .03; seed 1 focal .01; seed 2 focal2 .02; auto γ is not in the grid
    assert "seed 0: CE; seed 1: Focal; seed 2: Focal γ = 2" in md
    held = table(md, "## Test ECE against severity, mean over the held-out families")
    # picked raw runs at sev 2, held out: 0.07 + (CE s0 .05, focal s1 .05, focal2 s2 .03)
    assert held["Grid pick"][2] == pct([0.12, 0.12, 0.10]) == "11.33 ± 1.15"


def test_detail_table(page):
    md = page[2]
    detail = table(md, "## NLL, Brier, AURC, AUGRC (held-out mean)")
    # CE raw at severity 0, ECE (.07, .08, .09): NLL = ECE + 0.5, Brier = ECE + 0.2, AURC = ECE + 0.03,
    # AUGRC = ECE + 0.02
    assert detail["CE"] == ["0.5800 ± 0.0100", "0.2800 ± 0.0100", "11.00 ± 1.00", "10.00 ± 1.00"]
    assert "Severity 3 was not evaluated." in md


def _interval(cell: str) -> tuple[float, float, float, bool]:
    bold = cell.startswith("**")
    mean, rest = cell.strip("*").split(" [")
    low, high = rest.rstrip("]").split(", ")
    return float(mean), float(low), float(high), bold


@pytest.mark.parametrize("heading,label,row,ref", [
    ("### Against CE + TS", "Focal γ = 2", "focal2", ("ce", "ts_nll")),
    ("### Against CE + TS", "Focal", "focal", ("ce", "ts_nll")),
    ("### Against CE + perturbation TS", "Focal, auto γ", "auto_gamma", ("ce", "ts_perturbed")),
])
def test_paired_intervals_match_scipy(page, heading, label, row, ref):
    md = page[2]
    cells = table(md, heading)[label]
    assert cells[0] == "3"
    for severity, cell in zip((0, 1, 2), cells[1:]):
        a = [_ece(row, s, "uncalibrated", HELD, severity) for s in range(3)]
        b = [_ece(ref[0], s, ref[1], HELD, severity) for s in range(3)]
        ci = stats.ttest_rel(a, b).confidence_interval(0.95)
        mean, low, high, bold = _interval(cell)
        assert mean == pytest.approx(100 * (sum(a) - sum(b)) / 3, abs=0.006)
        assert (low, high) == pytest.approx((100 * ci.low, 100 * ci.high), abs=0.006)
        assert bold == (ci.low > 0 or ci.high < 0)
    # by hand: focal2 − (CE − .01) = (−.02, −.04, −.03): resolved; focal: (−.01, 0, −.02): not
    assert _interval(table(md, "### Against CE + TS")["Focal γ = 2"][1])[3]
    assert not _interval(table(md, "### Against CE + TS")["Focal"][1])[3]


def test_ood_table(page):
    ood = table(page[2], "## OOD detection: digits against the clean test set, in %")
    # CE raw msp AUROC .8 + (.05, .06, .07); FPR95 .5 − offset; energy AUROC + .002; TS + .01
    assert ood["CE"][:2] == ["86.00 ± 1.00", "44.00 ± 1.00"]
    assert ood["CE + TS"][0] == "87.00 ± 1.00"
    assert ood["CE"][4] == "86.20 ± 1.00"
    assert "CE + perturbation TS" not in ood


def test_csv_every_cell(page):
    out = page[1]
    lines = out.with_suffix(".csv").read_text().splitlines()
    # 11 rows × 2 overs × 3 severities × 12 metrics, plus 9 rows with OOD × 4 scores × 4 metrics, plus the header
    assert len(lines) == 1 + 11 * 2 * 3 * 12 + 9 * 16
    rows = list(csv.DictReader(lines))
    hit = [r for r in rows if (r["method"], r["over"], r["severity"], r["metric"]) == ("ce", "held_out", "2", "ece")]
    assert len(hit) == 1 and float(hit[0]["mean"]) == pytest.approx(0.13) and hit[0]["n"] == "3"
    assert float(hit[0]["std"]) == pytest.approx(0.01)
    assert all((out.parent / f"shift_{m}_vs_severity.png").is_file() for m in ("ece", "aurc"))


def test_launcher_seeds_and_under_confident(tmp_path):
    spec = importlib.util.spec_from_file_location("shift_report", ROOT / "scripts" / "shift_report.py")
    launcher = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(launcher)
    root = make_sweep(tmp_path / "sweep", methods=("ce",), temps=(0.8, 0.9, 0.7), ood=False)
    out = tmp_path / "p.md"
    (tmp_path / "notes.md").write_text("CE stays under-confident under shift.\n")
    assert launcher.main([str(root), "--suite", SUITE, "--out", str(out), "--seeds", "0", "1",
                          "--discussion", str(tmp_path / "notes.md")]) == 0
    md = out.read_text()
    assert md.rstrip().endswith("## Discussion\n\nCE stays under-confident under shift.")
    assert "T = 0.850 ± 0.071 (mean over 2 seeds): CE is under-confident (T < 1)" in md
    assert table(md, "## Test ECE against severity, mean over the held-out families")["CE"][2] == pct([0.12, 0.13])
    assert "No grid pick" in md and len(out.with_suffix(".csv").read_text().splitlines()) == 1 + 4 * 2 * 3 * 12


def test_methods_reports_those_and_names_the_rest(tmp_path, page):
    """--methods: a page of the methods whose runs are done while another's still train (its files missing); the
    rows, grid pick and numbers are those of the full page, and the page names what it left out."""
    root = make_sweep(tmp_path / "sweep")
    (root / "auto_gamma" / "seed1" / "shift" / f"{SUITE}.json").unlink()
    out = tmp_path / "p.md"
    assert main([str(root), "--suite", SUITE, "--out", str(out), "--ood", "digits",
                 "--methods", "ce", "focal", "focal2"]) == 0
    md, full = out.read_text(), page[2]
    assert "Not on this page (`--methods`): auto_gamma, whose runs are in" in md
    heading = "## Test ECE against severity, mean over the held-out families"
    kept = table(md, heading)
    assert "Focal, auto γ" not in kept and "Focal, auto γ" in table(full, heading)
    assert kept == {label: cells for label, cells in table(full, heading).items() if label in kept}
    assert [line for line in md.splitlines() if line.startswith("Grid pick:")] == \
        [line for line in full.splitlines() if line.startswith("Grid pick:")]
    assert "--methods ce focal focal2" in md


@pytest.mark.parametrize("case,needle", [
    ("empty", "no run directories"),
    ("methods", "--methods: no runs of mbls under"),
    ("missing", "1 of 12 runs have no shift/corruptions.json: focal2/seed1"),
    ("suite", "unknown shift suite 'corruption'"),
    ("ood", "12 of 12 runs have no shift/ood_held_out_classes.json"),
    ("seeds", "--seeds: no run for auto_gamma seed 5"),
    ("discussion", "--discussion file not found"),
    ("ood_sweep", "--ood-sweep must look like SWEEP:SET"),
    ("ood_sweep_files", "--ood-sweep: 12 of 12 runs have no shift/ood_held_out_classes.json"),
])
def test_bad_input_one_line_exit_2_nothing_written(tmp_path, capsys, case, needle):
    root = tmp_path / "sweep"
    root.mkdir()
    if case != "empty":
        make_sweep(root, ood=False)
    if case == "missing":
        (root / "focal2" / "seed1" / "shift" / f"{SUITE}.json").unlink()
    out = tmp_path / "docs" / "page.md"
    argv = [str(root), "--suite", "corruption" if case == "suite" else SUITE, "--out", str(out)]
    argv += {"ood": ["--ood", "held_out_classes"], "seeds": ["--seeds", "0", "5"],
             "methods": ["--methods", "ce", "mbls"], "discussion": ["--discussion", str(tmp_path / "none.md")], "ood_sweep": ["--ood-sweep", str(root)],
             "ood_sweep_files": ["--ood-sweep", f"{root}:held_out_classes"]}.get(case, [])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1
    assert not (tmp_path / "docs").exists()


def test_a_second_sweeps_ood_table(tmp_path):
    """--ood-sweep OTHER:SET: the OOD numbers of another sweep's runs (here: trained on classes 0–7, OOD = the held-out
    classes), raw and + TS per method, mean ± std over seeds, with their own CSV and their commands on the page."""
    root = make_sweep(tmp_path / "sweep", ood=False)
    other = tmp_path / "classes"
    for method in ("ce", "focal2"):
        for seed in range(3):
            run = other / method / f"seed{seed}"
            (run / "shift").mkdir(parents=True)
            (run / "metrics.json").write_text(json.dumps({"method": grid_spec(method).record()}))
            (run / "config.yaml").write_text("data: {name: fashion_mnist, options: {in_classes: [0, 1, 2, 3, 4, 5, "
                                             "6, 7]}}\nrun: {seed: %d}\n" % seed)
            ood = {**_ood(method, seed), "set": "held_out_classes"}
            (run / "shift" / "ood_held_out_classes.json").write_text(json.dumps({"run": str(run), "ood": ood}))
    (other / "sweep_command.txt").write_text("python sweep classes\n")
    out = tmp_path / "docs" / "p.md"
    assert main([str(root), "--suite", SUITE, "--out", str(out), "--ood-sweep", f"{other}:held_out_classes"]) == 0
    md = out.read_text()
    assert f'python sweep classes\nfor r in {other}/*/seed*; do python -m metacal.evaluate "$r" --ood held_out_classes; done' in md
    ood = table(md, "## OOD detection: held_out_classes, runs trained on classes [0, 1, 2, 3, 4, 5, 6, 7], in %")
    assert list(ood) == ["CE", "CE + TS", "Focal γ = 2", "Focal γ = 2 + TS"]
    assert ood["CE"][:2] == ["86.00 ± 1.00", "44.00 ± 1.00"] and ood["Focal γ = 2 + TS"][0] == pct(
        [0.8 + 0.01 + o for o in OFFSET["focal2"]])
    rows = list(csv.DictReader(out.with_name("p_ood_held_out_classes.csv").open()))
    assert len(rows) == 4 * 4 * 4 and {r["over"] for r in rows} == {"ood_held_out_classes"}
