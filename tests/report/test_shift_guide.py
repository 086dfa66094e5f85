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


def _paired(stem: str) -> dict:
    return {(r["method"], r["reference"], r["severity"], r["metric"]): r
            for r in csv.DictReader((RESULTS / f"{stem}_paired.csv").open(encoding="utf-8"))}


def test_full_guide_shift_block_numbers_are_the_csv_numbers():
    """Every number of docs/method_guide.md's shift block, parsed back: the mean over severities 0–5 and the worst severity
    from <stem>.csv, the Δ of that mean against CE + TS from <stem>_paired.csv (its interval: the mean of the
    per-severity half-widths; bold exactly when it excludes 0), and the recommendation follows the rule."""
    guide = (ROOT / "docs" / "method_guide.md").read_text(encoding="utf-8")
    block = _block(guide)
    assert "averaged over severities 0–5" in block
    for stem, name in load_guide_spec(ROOT / "docs" / "method_guide.yaml").shift_pages.items():
        part = block.split(f"**[{name}](results/{stem}.md)**")[1].split("\n\n**")[0]
        cells = _cells(RESULTS / f"{stem}.csv")
        paired = _paired(stem)
        labels = {r["label"]: r["method"] for r in csv.DictReader((RESULTS / f"{stem}.csv").open(encoding="utf-8"))}
        table = [[c.strip() for c in line.strip("|").split("|")] for line in part.splitlines() if line.startswith("| ")]
        assert table[0][0] == "method" and len(table) >= 3
        means = {}
        for label, mean, delta, worst, sev3, clean, error in table[1:]:
            m = labels[label]
            eces = [cells[(m, "held_out", str(s), "ece")] for s in range(6)]
            means[m] = sum(eces) / 6
            assert mean == f"{100 * means[m]:.2f}"
            assert worst == f"{max(range(6), key=lambda s: (eces[s], s))}: {100 * max(eces):.2f}"
            assert sev3 == f"{100 * eces[3]:.2f}" and clean == f"{100 * eces[0]:.2f}"
            assert error == f"{100 * cells[(m, 'held_out', '0', 'error')]:.2f}"
            if m == "ce+ts":
                assert delta == "–"
                continue
            rows = [paired[(m, "ce+ts", str(s), "ece")] for s in range(6)]
            d = sum(float(r["mean"]) for r in rows) / 6
            half = sum((float(r["high"]) - float(r["low"])) / 2 for r in rows) / 6
            numbers = [float(x) for x in re.findall(r"[+-]\d+\.\d+", delta)]
            assert numbers == pytest.approx([100 * d, 100 * (d - half), 100 * (d + half)], abs=0.006)
            assert delta.startswith("**") == (abs(d) > half)
            # the conservative interval is never narrower than any one severity's would allow for the mean
            assert half >= min((float(r["high"]) - float(r["low"])) / 2 for r in rows) - 1e-12
        first = labels[table[1][0]]
        lowest = min(means, key=means.get)
        if first != "ce+ts":  # recommended only when resolved better than CE + TS on the mean
            assert table[1][2].startswith("**-") and first == lowest
        assert "use CE + TS" in part or first != "ce+ts"


def test_readme_shift_verdicts_are_the_full_guides():
    """The README's compact shift block: one line per page whose verdict is the full guide's, with CE + TS's mean
    ECE over severities 0–5 from <stem>.csv."""
    readme, guide = (_block((ROOT / p).read_text(encoding="utf-8")) for p in ("README.md", "docs/method_guide.md"))
    for stem, name in load_guide_spec(ROOT / "docs" / "method_guide.yaml").shift_pages.items():
        (line,) = [x for x in readme.splitlines() if x.startswith(f"- **[{name}](docs/results/{stem}.md)**")]
        verdict = guide.split(f"**[{name}](results/{stem}.md)**")[1].split("\n")[0]
        assert verdict in line
        cells = _cells(RESULTS / f"{stem}.csv")
        mean = sum(cells[("ce+ts", "held_out", str(s), "ece")] for s in range(6)) / 6
        assert f"Mean ECE: CE + TS {100 * mean:.2f}%" in line


def numbers(best: str = "dual_focal", best_ece: float = 0.05, diffs: tuple[float, float] = (-0.02, 0.01)
            ) -> ShiftPageNumbers:
    """CE + TS at ECE 0.10 on every severity, ``best`` at ``best_ece``; its paired difference against CE + TS on
    every severity: mean diffs[0], half-width diffs[1] (n = 5)."""
    labels = {"ce+ts": "CE + TS", "ce+ts_perturbed": "CE + perturbation TS", best: "Best"}
    means = {(m, "held_out", s, "ece"): v for m, v in (("ce+ts", 0.10), ("ce+ts_perturbed", 0.12), (best, best_ece))
             for s in range(6)}
    means.update({(m, "held_out", 0, "error"): 0.05 for m in labels})
    d, h = diffs
    paired = {(best, "ce+ts", s, "ece"): (5, d, d - h, d + h, abs(d) > h) for s in range(6)}
    paired[(best, "ce+ts", 0, "error")] = (5, 0.001, -0.01, 0.012, False)
    return ShiftPageNumbers("page", "Page", means, labels, paired)


def test_the_rule_recommends_another_row_only_when_resolved_better_on_the_mean():
    resolved = numbers(diffs=(-0.02, 0.01))
    assert recommended(resolved) == "dual_focal"
    text = page_block(resolved, "docs/results")[0]
    assert "use Best: resolved lower mean ECE over severities 0–5 than CE + TS." in text
    unresolved = numbers(diffs=(-0.02, 0.03))
    assert recommended(unresolved) == "ce+ts"
    assert "use CE + TS, as without shift: Best has a lower mean ECE over severities 0–5, but not resolved " \
           "against it" in page_block(unresolved, "docs/results")[0]
    worse = numbers(best_ece=0.2, diffs=(0.1, 0.01))
    assert recommended(worse) == "ce+ts"
    assert "use CE + TS, as without shift: it has the lowest mean ECE" in page_block(worse, "docs/results")[0]


def test_the_mean_difference_interval_is_the_mean_of_the_half_widths():
    page = numbers(diffs=(-0.02, 0.01))
    page.paired[("dual_focal", "ce+ts", 5, "ece")] = (5, -0.08, -0.15, -0.01, True)  # one wider severity
    d, half, resolved = shift_guide.mean_difference(page, "dual_focal")
    assert d == pytest.approx((5 * -0.02 - 0.08) / 6) and half == pytest.approx((5 * 0.01 + 0.07) / 6)
    assert resolved == (abs(d) > half)
    assert shift_guide.mean_difference(page, "ce+ts") is None
    del page.paired[("dual_focal", "ce+ts", 2, "ece")]
    assert shift_guide.mean_difference(page, "dual_focal") is None  # a severity without a pair


def test_the_conservative_interval_covers_the_exact_one():
    """On random per-seed differences, the mean of the per-severity t-interval half-widths is never narrower than
    the exact t-interval of the per-seed means over severities (sd of a mean ≤ mean of the sds)."""
    import numpy as np

    gen = np.random.default_rng(0)
    t = stats.t.ppf(0.975, 4)
    for _ in range(200):
        d = gen.normal(0, 1, (5, 6)) * gen.uniform(0.1, 2, 6) + gen.normal(0, 1, (5, 1))
        exact = t * d.mean(axis=1).std(ddof=1) / math.sqrt(5)
        bound = (t * d.std(axis=0, ddof=1) / math.sqrt(5)).mean()
        assert bound >= exact - 1e-12


def test_a_missing_paired_csv_names_the_fix(tmp_path):
    (tmp_path / "page.csv").write_text("method,label,over,severity,metric,mean,std,n\n")
    with pytest.raises(FileNotFoundError, match="page_paired.csv is missing: regenerate the shift page"):
        shift_guide.load_shift_page(tmp_path, "page", "Page")
