"""The "Paired comparisons" section of the results page and its CSV, from synthetic run directories."""

import csv
import functools
import math

import numpy as np
import pytest
import torch
from scipy import stats

from metacal.report.aggregate import MethodRow
from metacal.report.comparisons import grid_pick, paired_markdown, references, ts_reference
from grid_specs import grid_spec

SEEDS = (0, 1, 2)


@pytest.fixture
def sweep(tmp_path, run_writer):
    """CE (over-confident), two fixed-γ rows (γ = 3 has the lower mean validation ECE, focal γ = 1 the lower one
    on seed 1), FLγ-SECE without seed 2.
    Seed S of CE and focal γ = 3 draws the same logits (write_run seeds by S) at another sharpness: the same errors,
    a consistent ECE gap. Focal and FLγ-SECE draw more samples (other logits, other errors)."""
    root = tmp_path / "sweep"
    for seed in SEEDS:
        run_writer(root / "ce" / f"seed{seed}", seed, n=200, k=4, sharpness=2.0, val_metrics={"ece": 0.10})
        run_writer(root / "focal" / f"seed{seed}", seed, n=220, k=4, sharpness=1.4,
                   val_metrics={"ece": 0.03 if seed == 1 else 0.06})  # the grid's pick on seed 1 only
        run_writer(root / "focal3" / f"seed{seed}", seed, n=200, k=4, sharpness=1.0, val_metrics={"ece": 0.04})
        if seed != 2:
            run_writer(root / "flgamma_sece" / f"seed{seed}", seed, n=240, k=4, sharpness=0.7,
                       val_metrics={"ece": 0.05})
    return root


def _test_numbers(run_dir):
    """Test ECE (15 equal-width bins) and error of one run, straight from its predictions."""
    from metacal import metrics

    with np.load(run_dir / "predictions" / "test.npz") as f:
        z, y = torch.from_numpy(f["logits"]).double(), torch.from_numpy(f["labels"])
    probs = torch.softmax(z, dim=1)
    return float(metrics.ece(probs, y, 15)), float((probs.argmax(1) != y).double().mean())


@functools.cache
def _critical_t() -> tuple[np.ndarray, np.ndarray]:
    """n = 2 … 10⁶ and t_{0.975, n−1}, computed once (half a second; the brute force below needs it per cell)."""
    n = np.arange(2, 10**6)
    return n, stats.t.ppf(0.975, n - 1)


def _cell(a, b):
    """The table's Δ [CI] | p | resolved | seeds needed, computed with scipy from the two per-seed lists."""
    d = np.subtract(a, b)
    if not d.any():  # identical numbers on every seed (same argmax → same error): nothing to test
        return "+0.00 [+0.00, +0.00] | — | no | —"
    res = stats.ttest_rel(a, b)
    ci = res.confidence_interval(0.95)
    p = float(res.pvalue)
    p_cell = "< 0.001" if p < 0.001 else f"{p:.3f}"
    # seeds needed by brute force over n = 2 … 10⁶: the first n with t_{0.975,n−1}·s/√n < |d̄|
    n, t = _critical_t()
    ok = t * d.std(ddof=1) / np.sqrt(n) < abs(d.mean())
    assert ok.any()
    return (f"{100 * d.mean():+.2f} [{100 * ci.low:+.2f}, {100 * ci.high:+.2f}] | {p_cell} | "
            f"{'yes' if p < 0.05 else 'no'} | {int(n[ok.argmax()]):,}")


def test_page_has_the_paired_section_with_the_numbers_scipy_gives(sweep, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from metacal.report.page import build_report

    out = tmp_path / "page.md"
    result = build_report(sweep, out)
    text = out.read_text()
    assert text.index("## Test metrics") < text.index("## The claim under test") < \
        text.index("## Paired comparisons over seeds")
    section = text.split("## Paired comparisons over seeds")[1].split("## Figures")[0]
    headers = ["### Against CE (the baseline)",
               "### Against CE + TS (CE's test ECE after temperature scaling fitted by NLL on validation; CE's error)",
               "### Against Focal γ = 3 (the fixed γ chosen on mean validation ECE among Focal, Focal γ = 3)",
               "### Against Grid pick (per seed, the run with the lowest validation ECE among CE, Focal, "
               "Focal γ = 3 — seed 0: Focal γ = 3; seed 1: Focal; seed 2: Focal γ = 3)"]
    at = [section.index(h) for h in headers]
    assert at == sorted(at)
    against_ce, against_ts, against_fixed, against_grid = (section[a:b] for a, b in zip(at, at[1:] + [len(section)]))
    numbers = {m: {s: _test_numbers(sweep / m / f"seed{s}") for s in SEEDS if (sweep / m / f"seed{s}").is_dir()}
               for m in ("ce", "focal", "focal3", "flgamma_sece")}
    ce_row = next(r for r in result.rows if r.method == "ce")  # TS itself is tested against scipy elsewhere
    numbers["ce+ts"] = {s: (ce_row.per_run[s]["ece_ts_nll"], numbers["ce"][s][1]) for s in SEEDS}
    numbers["grid"] = {s: numbers["focal" if s == 1 else "focal3"][s] for s in SEEDS}

    def expected(method, ref, label):
        shared = sorted(set(numbers[method]) & set(numbers[ref]))
        cells = [_cell([numbers[method][s][i] for s in shared], [numbers[ref][s][i] for s in shared]) for i in (0, 1)]
        return f"| {label} | {len(shared)} | {cells[0]} | {cells[1]} |"

    # FLγ-SECE lacks seed 2: paired on seeds 0 and 1 only
    assert expected("flgamma_sece", "ce", "FLγ-SECE") in against_ce
    assert expected("focal3", "ce", "Focal γ = 3") in against_ce
    assert expected("flgamma_sece", "focal3", "FLγ-SECE") in against_fixed
    assert expected("ce", "focal3", "CE") in against_fixed
    for method, label in (("ce", "CE"), ("focal", "Focal"), ("focal3", "Focal γ = 3"), ("flgamma_sece", "FLγ-SECE")):
        assert expected(method, "ce+ts", label) in against_ts
        assert expected(method, "grid", label) in against_grid
    assert "| CE |" not in against_ce and "| Focal γ = 3 |" not in against_fixed  # no row against itself
    # CE vs focal γ = 3: the same logits at two sharpnesses — identical errors (Δ = 0: no test, nothing to resolve)
    assert "| CE | 3 | " in against_fixed and "| +0.00 [+0.00, +0.00] | — | no | — |" in against_fixed
    # the claim now speaks in paired terms and keeps its basis
    assert "**Verdict on this data (2–3 seeds per method, unknown schedule; paired by seed, 95% t-intervals): " in text
    assert "**Bar for FLγ-SECE: " in text
    # the CSV next to the page: fractions, one line per (reference, method, metric)
    assert result.paired_csv == tmp_path / "page_paired.csv"
    assert "[page_paired.csv](page_paired.csv)" in section
    lines = list(csv.DictReader(open(result.paired_csv)))
    # (CE and focal γ = 3: 3 other methods each; CE + TS and the grid pick: all 4) × 2 metrics
    assert len(lines) == (3 + 4 + 3 + 4) * 2
    assert {r["reference"] for r in lines} == {"ce", "ce+ts", "focal3", "grid_pick"}
    line = next(r for r in lines if (r["reference"], r["method"], r["metric"]) == ("ce", "flgamma_sece", "ece"))
    a = [numbers["flgamma_sece"][s][0] for s in (0, 1)]
    b = [numbers["ce"][s][0] for s in (0, 1)]
    assert line["n"] == "2" and line["seeds"] == "0 1"
    assert float(line["mean"]) == pytest.approx(np.mean(np.subtract(a, b)), rel=1e-6)
    assert float(line["p"]) == pytest.approx(float(stats.ttest_rel(a, b).pvalue), rel=1e-6)


def _row(method, label, eces, ece_val=math.nan):
    r = MethodRow(method=method, label=label, seeds=list(range(len(eces))), missing_seeds=[], spec=grid_spec(method))
    r.per_run = {s: {"ece": e, "error": 0.1} for s, e in enumerate(eces)}
    r.stats = {"ece_val": (ece_val, 0.0, len(eces))}
    return r


def test_references_are_ce_and_the_fixed_gamma_chosen_on_validation():
    ce, f1, f3 = _row("ce", "CE", [0.1, 0.2]), _row("focal", "Focal", [0.01, 0.02], 0.03), \
        _row("focal3", "Focal γ = 3", [0.05, 0.06], 0.02)
    assert [(r.method, why) for r, why in references([ce, f1, f3])] == [
        ("ce", "the baseline"), ("focal3", "the fixed γ chosen on mean validation ECE among Focal, Focal γ = 3")]
    assert [r.method for r, _ in references([f1, _row("x", "X", [0.1])])] == ["focal"]
    text = "\n".join(paired_markdown([_row("x", "X", [0.1]), _row("y", "Y", [0.2])]))
    assert "No reference: the runs have neither a CE nor a fixed-γ focal row." in text
    # zero difference: "—" for p, resolved and seeds needed is undefined
    text = "\n".join(paired_markdown([ce, _row("m", "M", [0.1, 0.2])], metrics=("ece",)))
    assert "| M | 2 | +0.00 [+0.00, +0.00] | — | no | — |" in text


def _run_row(method, per_seed):
    """A MethodRow from {seed: (test ECE, test error, validation ECE)}."""
    r = MethodRow(method=method, label=method, seeds=sorted(per_seed), missing_seeds=[], spec=grid_spec(method))
    r.per_run = {s: {"ece": e, "error": err, "ece_val": v, "ece_ts_nll": e / 2} for s, (e, err, v) in per_seed.items()}
    r.stats = {"ece_val": (float(np.mean([v for _, _, v in per_seed.values()])), 0.0, len(per_seed))}
    return r


def test_grid_pick_takes_each_seeds_lowest_validation_ece_and_ts_is_ce_after_temperature_scaling():
    ce = _run_row("ce", {0: (0.10, 0.20, 0.09), 1: (0.12, 0.21, 0.02), 2: (0.11, 0.22, 0.08)})
    f1 = _run_row("focal", {0: (0.03, 0.23, 0.03), 1: (0.04, 0.24, 0.05), 2: (0.05, 0.25, 0.07)})
    f3 = _run_row("focal3", {0: (0.07, 0.26, 0.01), 1: (0.08, 0.27, 0.06), 2: (0.09, 0.28, 0.07)})
    other = _run_row("dual_focal", {0: (0.5, 0.5, 0.0), 1: (0.5, 0.5, 0.0), 2: (0.5, 0.5, 0.0)})  # not in the grid
    row, labels = grid_pick([ce, f1, f3, other])
    # seed 0: focal γ = 3 (0.01); seed 1: CE (0.02); seed 2: focal and focal γ = 3 tie at 0.07 → the first listed
    assert labels == {0: "focal3", 1: "ce", 2: "focal"}
    assert {s: (n["ece"], n["error"]) for s, n in row.per_run.items()} == {0: (0.07, 0.26), 1: (0.12, 0.21),
                                                                         2: (0.05, 0.25)}
    # a seed on which some grid row has no validation ECE is left out; fewer than two focal rows: no grid
    f3.per_run[2]["ece_val"] = float("nan")
    assert set(grid_pick([ce, f1, f3])[0].per_run) == {0, 1}
    assert grid_pick([ce, f1, other]) is None and grid_pick([f1, f3]) is None
    ts = ts_reference(ce)
    assert (ts.method, ts.label) == ("ce+ts", "CE + TS")
    assert ts.per_run == {0: {"ece": 0.05, "error": 0.20}, 1: {"ece": 0.06, "error": 0.21},
                          2: {"ece": 0.055, "error": 0.22}}
    assert ts_reference(_row("ce", "CE", [0.1, 0.2])) is None  # no TS column: no CE + TS reference
    # the fixed γ chosen on MEAN validation ECE is another reference: focal γ = 3 (0.0467) over focal (0.05)
    assert [r.method for r, _ in references([ce, f1, f3])] == ["ce", "ce+ts", "focal3", "grid_pick"]
