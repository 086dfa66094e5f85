"""The method guide's shift block (metacal/report/shift_guide.py): the paired CSV a shift page writes, checked
against scipy on the hand-built sweep of test_shift_page.py; the README's block parsed back to the committed CSVs;
the verdict's three cases on hand-made numbers."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import pytest
from scipy import stats

from metacal.report import shift_guide
from metacal.report.guide_spec import load_guide_spec
from metacal.report.shift_guide import ShiftPageNumbers, page_block, recommended
from metacal.report.shift_page import main
from tests.report.test_shift_page import HELD, SUITE, _ece, make_sweep

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"


def test_paired_csv_matches_scipy_on_the_hand_built_sweep(tmp_path):
    root = make_sweep(tmp_path / "sweep")
    out = tmp_path / "docs" / "shift.md"
    assert main([str(root), "--suite", SUITE, "--out", str(out)]) == 0
    rows = list(csv.DictReader((tmp_path / "docs" / "shift_paired.csv").open()))
    for method, ref, column in (("focal2", "ce+ts", "ts_nll"), ("auto_gamma", "ce+ts_perturbed", "ts_perturbed")):
        for severity in (0, 1, 2):
            (line,) = [r for r in rows if (r["method"], r["reference"], r["severity"], r["metric"])
                       == (method, ref, str(severity), "ece")]
            a = [_ece(method, s, "uncalibrated", HELD, severity) for s in range(3)]
            b = [_ece("ce", s, column, HELD, severity) for s in range(3)]
            ci = stats.ttest_rel(a, b).confidence_interval(0.95)
            assert float(line["mean"]) == pytest.approx(sum(x - y for x, y in zip(a, b)) / 3, abs=1e-12)
            assert (float(line["low"]), float(line["high"])) == pytest.approx((ci.low, ci.high), abs=1e-9)
            assert line["resolved"] == str(int(ci.low > 0 or ci.high < 0)) and line["n"] == "3"
    assert not [r for r in rows if r["method"] == r["reference"]]  # a reference is not paired with itself


def _block(text: str) -> str:
    return text.split(f"**{shift_guide.TITLE}**")[1]


def _cells(path: Path) -> dict[tuple[str, str, str, str], float]:
    return {(r["method"], r["over"], r["severity"], r["metric"]): float(r["mean"])
            for r in csv.DictReader(path.open(encoding="utf-8")) if r["severity"]}


def test_readme_shift_block_numbers_are_the_csv_numbers():
    """Every number of the README's shift block, parsed back: the cells from <stem>.csv, the Δ from
    <stem>_paired.csv (bold exactly when resolved), and the recommended row is the lowest ECE at severity 3."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = _block(readme)
    for stem, name in load_guide_spec(ROOT / "docs" / "method_guide.yaml").shift_pages.items():
        part = block.split(f"**[{name}](docs/results/{stem}.md)**")[1].split("\n\n**")[0]
        cells = _cells(RESULTS / f"{stem}.csv")
        paired = {(r["method"], r["reference"], r["severity"], r["metric"]): r
                  for r in csv.DictReader((RESULTS / f"{stem}_paired.csv").open(encoding="utf-8"))}
        labels = {r["label"]: r["method"] for r in csv.DictReader((RESULTS / f"{stem}.csv").open(encoding="utf-8"))}
        table = [[c.strip() for c in line.strip("|").split("|")] for line in part.splitlines() if line.startswith("| ")]
        assert table[0][0] == "method" and len(table) >= 3  # the header, the recommended row, the references
        best = min((m for m in set(labels.values()) if (m, "held_out", "3", "ece") in cells),
                   key=lambda m: cells[(m, "held_out", "3", "ece")])
        assert table[1][0] == next(label for label, m in labels.items() if m == best)
        for label, sev3, d_ts, d_pts, clean, error in table[1:]:
            m = labels[label]
            assert sev3 == f"{100 * cells[(m, 'held_out', '3', 'ece')]:.2f}"
            assert clean == f"{100 * cells[(m, 'held_out', '0', 'ece')]:.2f}"
            assert error == f"{100 * cells[(m, 'held_out', '0', 'error')]:.2f}"
            for ref, text in (("ce+ts", d_ts), ("ce+ts_perturbed", d_pts)):
                if m == ref:
                    assert text == "–"
                    continue
                r = paired[(m, ref, "3", "ece")]
                numbers = [float(x) for x in re.findall(r"[+-]\d+\.\d+", text)]
                assert numbers == pytest.approx([100 * float(r[k]) for k in ("mean", "low", "high")], abs=0.006)
                assert text.startswith("**") == (r["resolved"] == "1")


def numbers(best_ece: float, vs_pts: tuple[float, float, float, bool] | None,
            best: str = "dual_focal") -> ShiftPageNumbers:
    labels = {"ce+ts": "CE + TS", "ce+ts_perturbed": "CE + perturbation TS", best: "Best"}
    means = {("ce+ts", "held_out", 3, "ece"): 0.10, ("ce+ts_perturbed", "held_out", 3, "ece"): 0.07,
             (best, "held_out", 3, "ece"): best_ece}
    means.update({(m, "held_out", 0, k): 0.05 for m in labels for k in ("ece", "error")})
    paired = {} if vs_pts is None else {(best, "ce+ts_perturbed", 3, "ece"): (5, *vs_pts)}
    paired[(best, "ce+ts", 0, "ece")] = (5, 0.02, 0.01, 0.03, True)
    paired[(best, "ce+ts", 0, "error")] = (5, 0.001, -0.01, 0.012, False)
    return ShiftPageNumbers("page", "Page", means, labels, paired)


def test_the_verdict_names_the_lowest_and_says_whether_it_beats_both_references():
    both = numbers(0.05, (-0.02, -0.03, -0.01, True))
    both.paired[("dual_focal", "ce+ts", 3, "ece")] = (5, -0.05, -0.06, -0.04, True)
    assert recommended(both) == "dual_focal"
    text = page_block(both, "docs/results")[0]
    assert "use Best: lower ECE at severity 3 than CE + TS and CE + perturbation TS (resolved)" in text
    assert "differs from CE + TS by +2.00 points of ECE (resolved) and +0.10 points of error." in text
    one = numbers(0.06, (-0.01, -0.03, 0.01, False))  # no pair with CE + TS at severity 3, unresolved vs pTS
    assert "Best has the lowest mean ECE at severity 3, but not resolved against CE + TS or CE + perturbation " \
           "TS, which need no retraining" in page_block(one, "docs/results")[0]
    post_hoc = numbers(0.09, None)
    assert recommended(post_hoc) == "ce+ts_perturbed"
    post_hoc.paired[("ce+ts_perturbed", "ce+ts", 3, "ece")] = (5, -0.03, -0.04, -0.02, True)
    assert "use CE + perturbation TS, fitted on the CE run after training: the lowest mean ECE at severity 3." \
        in page_block(post_hoc, "docs/results")[0]
    assert math.isnan(post_hoc.mean("none", "ece", 3))


def test_a_missing_paired_csv_names_the_fix(tmp_path):
    (tmp_path / "page.csv").write_text("method,label,over,severity,metric,mean,std,n\n")
    with pytest.raises(FileNotFoundError, match="page_paired.csv is missing: regenerate the shift page"):
        shift_guide.load_shift_page(tmp_path, "page", "Page")
