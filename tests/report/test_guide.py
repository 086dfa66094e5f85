"""The generated method guide — the full one (docs/method_guide.md, metacal/report/guide.py) and the README's
compact block (metacal/report/guide_compact.py): their numbers are the results CSVs' numbers, both files hold the
current text, methods absent from the CSVs get no row, and a README without the markers is a clear error
(metacal/report/guide_cli.py)."""

from __future__ import annotations

import csv
import re
import shutil
from pathlib import Path

import pytest

from metacal.report import guide, guide_cli, guide_compact, shift_guide
from metacal.report.guide_spec import load_guide_spec

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "docs" / "results"
SPEC = load_guide_spec(REPO / "docs" / "method_guide.yaml")  # the pages and methods this repository's guide reads


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _write_csv(path: Path, rows: list[dict[str, str]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def _regimes(text: str) -> dict[str, str]:
    """Regime title → its block of the section (the shift block after them left out)."""
    text = text.split(f"**{shift_guide.TITLE}**")[0]
    parts = re.split(r"\*\*When CE is (over|under)-confident\*\*", text)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def _table(block: str) -> list[list[str]]:
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in block.splitlines()
            if line.startswith("|")]
    return rows[2:]  # without header and rule


def _stems(block: str) -> list[str]:
    """The pages of a regime, in column order, from the links of its regime line."""
    return re.findall(r"\]\(docs/results/([a-z0-9_]+)\.md\)", block.split("\n\n")[0])


def _pct(x: str) -> str:
    return f"{100 * float(x):.2f}"


@pytest.fixture(scope="module")
def section() -> str:
    return guide.guide_markdown(RESULTS, SPEC, "docs/results")


def test_every_table_number_is_the_csv_number(section):
    blocks = _regimes(section)
    assert set(blocks) == {"over", "under"}
    for regime, block in blocks.items():
        stems = _stems(block)
        assert sorted(stems) == sorted(s for s in SPEC.pages if s.endswith("overconfident") == (regime == "over"))
        rows = {s: {r["method"]: r for r in _csv(RESULTS / f"{s}.csv")} for s in stems}
        for s in stems:  # the regime line: CE's TS temperature and seeds, and the side of 1 it is on
            t, n = float(rows[s]["ce"]["t_nll_mean"]), rows[s]["ce"]["n_runs"]
            assert f"T = {t:.2f} on [" in block and (t > 1) == (regime == "over")
            assert re.search(rf"\]\(docs/results/{s}\.md\) \({n} seeds\)", block)
        table = _table(block)
        assert table and table[0][0] == "CE" and table[1][0] == "CE + TS"
        for cells in table:
            label = cells[0]
            for i, s in enumerate(stems):
                ece, err, cost = cells[1 + 3 * i: 4 + 3 * i]
                ce = rows[s]["ce"]
                if label == "CE + TS":  # CE's row: test ECE after TS (NLL, fitted on validation), CE's error and cost
                    row, ece_col = ce, "ece_ts_nll_mean"
                else:
                    matches = [r for r in rows[s].values() if r["label"] == label]
                    if not matches:
                        assert (ece, err, cost) == ("–", "–", "–")
                        continue
                    (row,), ece_col = matches, "ece_mean"
                assert ece == _pct(row[ece_col]) and err == _pct(row["error_mean"])
                s_ep, s_ce = float(row["s_per_epoch_mean"]), float(ce["s_per_epoch_mean"])
                assert cost == f"{s_ep:.2f} ({s_ep / s_ce:.2f}×)"


def test_sentence_numbers_are_the_paired_csv_numbers(section):
    for block in _regimes(section).values():
        stems = _stems(block)
        names = dict(zip(stems, re.findall(r"\[([^\]]+)\]\(docs/results/", block.split("\n\n")[0])))
        for s in stems:
            rows = {r["method"]: r for r in _csv(RESULTS / f"{s}.csv")}
            paired = {(r["reference"], r["method"], r["metric"]): r for r in _csv(RESULTS / f"{s}_paired.csv")}

            def delta(ref: str, method: str, metric: str) -> str:
                r = paired[(ref, method, metric)]
                return f"{100 * float(r['mean']):+.2f} points, {'resolved' if r['resolved'] == '1' else 'unresolved'}"

            # the lowest-ECE method other than CE, against CE
            low = min((r for m, r in rows.items() if m != "ce"), key=lambda r: float(r["ece_mean"]))
            assert (f"{low['label']} on {names[s]} (vs CE: ECE {delta('ce', low['method'], 'ece')}; "
                    f"error {delta('ce', low['method'], 'error')})") in block
            # FLγ-SECE against the better of CE and the page's fixed γ, and its cost
            refs = {r for (r, m, _) in paired if m == "flgamma_sece" and r in rows}  # not CE + TS, not the grid pick
            ref = min(refs, key=lambda r: float(rows[r]["ece_mean"]))
            fl = rows["flgamma_sece"]
            assert (f"{_pct(fl['ece_mean'])}% vs {rows[ref]['label']}'s {_pct(rows[ref]['ece_mean'])}% on "
                    f"{names[s]} (Δ {delta(ref, 'flgamma_sece', 'ece')})") in block
            ratio = float(fl["s_per_epoch_mean"]) / float(rows["ce"]["s_per_epoch_mean"])
            assert f"{ratio:.2f}×" in block.split("CE's s/epoch")[0].split("the paper's method")[1]


def test_readme_block_and_full_guide_are_up_to_date():
    old, new = guide_cli.render_readme(REPO / "README.md", RESULTS, SPEC)
    assert old == new, f"README.md's method guide is stale: run `{guide.COMMAND}`"
    assert f"Regenerate: `{guide.COMMAND}`" in old and "](docs/method_guide.md)" in old
    old, new = guide_cli.render_full(REPO / "docs" / "method_guide.md", RESULTS, SPEC)
    assert old == new, f"docs/method_guide.md is stale: run `{guide.COMMAND}`"


def test_check_without_readme_checks_the_current_folders_readme(monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    assert guide_cli.main(["--check"]) == 0
    assert capsys.readouterr().out.splitlines() == ["README.md: method guide up to date",
                                                    "docs/method_guide.md: method guide up to date"]


def _readme_block() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return text.split(guide_cli.START)[1].split(guide_cli.END)[0]


def test_readme_compact_numbers_are_the_csv_numbers():
    """Parsed back from README.md: the T ranges, each regime's temperatures and every cell of its table."""
    block, shift = _readme_block().split(f"**{shift_guide.TITLE}**")
    assert len(block.encode()) < 3000  # compact: the full tables live in docs/method_guide.md
    assert len(shift.encode()) < 600 + 700 * len(SPEC.shift_pages)  # the shift block: three rows a page
    rows = {s: {r["method"]: r for r in _csv(RESULTS / f"{s}.csv")} for s in SPEC.pages}
    temps = {s: float(r["ce"]["t_nll_mean"]) for s, r in rows.items()}
    for regime, over in (("over", True), ("under", False)):
        group = [s for s in SPEC.pages if (temps[s] > 1) == over]
        low, high = f"{min(temps[s] for s in group):.2f}", f"{max(temps[s] for s in group):.2f}"
        assert f"T = {low}–{high} on the {regime}-confident pages" in block
    blocks = _regimes(block)
    assert set(blocks) == {"over", "under"}
    for regime, part in blocks.items():
        stems = re.findall(r"\]\(docs/results/([a-z0-9_]+)\.md\)", part.split("\n\n")[0])
        assert sorted(stems) == sorted(s for s in SPEC.pages if s.endswith("overconfident") == (regime == "over"))
        for s in stems:
            assert f"T = {temps[s]:.2f} on [" in part and f"/{s}.md) ({rows[s]['ce']['n_runs']} seeds)" in part
        table = _table(part)
        labels = [re.sub(r" \((calibrated as trained|the paper).*\)$", "", cells[0]) for cells in table]
        assert labels[:2] == ["CE", "CE + TS"] and "FLγ-SECE" in labels
        assert ("Focal, auto γ" in labels) == any("auto_gamma" in rows[s] for s in stems)
        for label, cells in zip(labels, table):
            for s, cell in zip(stems, cells[1:]):
                ce = rows[s]["ce"]
                if label == "CE + TS":  # CE's row: test ECE after TS fitted by NLL on validation, CE's error
                    assert cell == f"{_pct(ce['ece_ts_nll_mean'])} ({_pct(ce['error_mean'])})"
                    continue
                match = [r for r in rows[s].values() if r["label"] == label]
                assert cell == (f"{_pct(match[0]['ece_mean'])} ({_pct(match[0]['error_mean'])})" if match else "–")
        verdict = part.strip().splitlines()[-1]
        assert verdict.startswith("Use CE + temperature scaling" if regime == "over" else "Use plain CE")


def test_compact_range_of_one_page_is_one_value(tmp_path):
    pages = guide.load_pages(RESULTS, SPEC.pages)
    one = [p for p in pages if p.stem == "mnist1d"]
    assert guide_compact.temperature_range(one) == f"{one[0].temperature:.2f}"


def _copy_results(tmp_path: Path) -> Path:
    out = tmp_path / "results"
    out.mkdir()
    for stem in [*SPEC.pages, *SPEC.shift_pages, *SPEC.regime_pages]:
        for name in (f"{stem}.csv", f"{stem}_paired.csv"):  # a regime page's CSV holds its paired columns
            if name == f"{stem}.csv" or stem not in SPEC.regime_pages:
                shutil.copy2(RESULTS / name, out / name)
    return out


def test_a_method_missing_from_the_csvs_gets_no_row_and_appears_once_present(tmp_path):
    results = _copy_results(tmp_path)
    over = [s for s in SPEC.pages if s.endswith("overconfident")]
    assert {"auto_gamma", "focal3"} <= set(SPEC.rows["over"])
    for stem in over:  # auto γ and focal γ = 3 taken out of every over-confident page: no row, not recommended
        rows = [r for r in _csv(results / f"{stem}.csv") if r["method"] not in ("auto_gamma", "focal3")]
        _write_csv(results / f"{stem}.csv", rows)
    without = _regimes(guide.guide_markdown(results, SPEC, "docs/results"))["over"]
    assert "auto γ" not in without and "Focal γ = 3" not in without
    # a later sweep adds auto γ (here: a copy of dual focal's numbers) to one page: a row, "–" on the other pages
    rows = _csv(results / f"{over[0]}.csv")
    rows.append({**next(r for r in rows if r["method"] == "dual_focal"), "method": "auto_gamma",
                 "label": "Focal, auto γ"})
    _write_csv(results / f"{over[0]}.csv", rows)
    paired = _csv(results / f"{over[0]}_paired.csv")
    paired += [{**r, "method": "auto_gamma"} for r in paired if r["method"] == "dual_focal"]
    _write_csv(results / f"{over[0]}_paired.csv", paired)
    block = _regimes(guide.guide_markdown(results, SPEC, "docs/results"))["over"]
    (row,) = [r for r in _table(block) if r[0] == "Focal, auto γ"]
    assert row[4:] == ["–"] * 3 * (len(over) - 1) and row[1] == _pct(next(
        r for r in _csv(results / f"{over[0]}.csv") if r["method"] == "dual_focal")["ece_mean"])
    use = block.split("Use CE + temperature scaling")[1].split("Lowest test ECE")[0]
    assert "Focal, auto γ" not in use  # not on every page: not recommended


def test_markers_missing_or_misplaced_is_a_clear_error(tmp_path, capsys):
    with pytest.raises(ValueError, match="method-guide:start"):
        guide_cli.replace_section("# README\nno markers\n", "body\n")
    with pytest.raises(ValueError, match="found 1 and 1"):
        guide_cli.replace_section(f"{guide_cli.END}\n{guide_cli.START}\n", "body\n")
    readme = tmp_path / "README.md"
    readme.write_text("# README\n")
    argv = ["--readme", str(readme), "--results", str(RESULTS), "--pages", str(REPO / "docs" / "method_guide.yaml")]
    assert guide_cli.main(argv) == 2
    assert "method-guide:start" in capsys.readouterr().err and readme.read_text() == "# README\n"


def test_cli_rewrites_only_between_the_markers_and_the_full_guide_and_check_reports_stale(tmp_path):
    (tmp_path / "docs").mkdir()
    shutil.copy2(REPO / "docs" / "method_guide.yaml", tmp_path / "docs" / "method_guide.yaml")
    shutil.copytree(_copy_results(tmp_path), tmp_path / "docs" / "results")
    readme, full = tmp_path / "README.md", tmp_path / "docs" / "method_guide.md"
    before, after = "# Title\n\nintro\n\n", "\n## Next\n\ntext\n"
    readme.write_text(f"{before}{guide_cli.START}\nstale\n{guide_cli.END}{after}")
    assert guide_cli.main(["--readme", str(readme), "--check"]) == 1 and not full.exists()
    assert guide_cli.main(["--readme", str(readme)]) == 0
    text = readme.read_text()
    assert text.startswith(f"{before}{guide_cli.START}\n") and text.endswith(f"{guide_cli.END}{after}")
    assert "](docs/results/mnist1d.md)" in text and "](docs/method_guide.md)" in text
    page = full.read_text()
    assert page.startswith(guide_cli.FULL_TITLE) and "](results/mnist1d.md)" in page
    assert page.endswith(guide.guide_markdown(tmp_path / "docs" / "results", SPEC, "results"))
    assert guide_cli.main(["--readme", str(readme), "--check"]) == 0
    full.write_text(page.replace("CE + TS", "CE+TS"))  # the full guide alone stale: --check says so
    assert guide_cli.main(["--readme", str(readme), "--check"]) == 1


def test_a_training_time_method_is_recommended_only_with_a_resolved_win_over_ce_on_every_page(tmp_path):
    results = _copy_results(tmp_path)
    over = [s for s in SPEC.pages if s.endswith("overconfident")]

    def set_dual_focal_vs_ce(stem: str, mean: str, resolved: str) -> None:
        paired = _csv(results / f"{stem}_paired.csv")
        for r in paired:
            if (r["reference"], r["method"], r["metric"]) == ("ce", "dual_focal", "ece"):
                r.update(mean=mean, resolved=resolved)
        _write_csv(results / f"{stem}_paired.csv", paired)

    for stem in over:
        set_dual_focal_vs_ce(stem, "-0.01", "1")
    block = _regimes(guide.guide_markdown(results, SPEC, "docs/results"))["over"]
    assert ("at training time, Dual focal: each lowers test ECE against CE by a resolved margin on every page."
            in block)
    set_dual_focal_vs_ce(over[-1], "-0.01", "0")  # unresolved on one page: no longer recommended
    block = _regimes(guide.guide_markdown(results, SPEC, "docs/results"))["over"]
    assert "at training time" not in block and "Use CE + temperature scaling" in block


def test_the_page_list_is_a_file_and_a_bad_one_is_one_line(tmp_path, capsys):
    """The library names no page: the guide reads docs/method_guide.yaml (or --pages); a page dropped from the
    file leaves the guide, a broken file stops the command with one line and writes nothing."""
    readme = tmp_path / "README.md"
    readme.write_text(f"# R\n{guide_cli.START}\nold\n{guide_cli.END}\n")
    pages = tmp_path / "pages.yaml"
    text = (REPO / "docs" / "method_guide.yaml").read_text()
    pages.write_text(text.replace("  fashion_mnist: Fashion-MNIST\n", ""))
    assert guide_cli.main(["--readme", str(readme), "--results", str(RESULTS), "--pages", str(pages)]) == 0
    full = (tmp_path / "docs" / "method_guide.md").read_text()
    assert "](../../" in full and "/fashion_mnist.md)" not in full and "/mnist1d.md)" in full
    for broken, message in [("pages: [a]\n", "needs the keys pages, shift_pages, rows, recommend (and may have regime_pages)"),
                            (text.replace("rows:\n", "rows:\n  sideways: [ce]\n"), "'rows' must map regimes"),
                            ("pages: {a: 1}\nshift_pages: {}\nrows: {}\nrecommend: {}\n", "'pages' must map")]:
        pages.write_text(broken)
        before = readme.read_text()
        assert guide_cli.main(["--readme", str(readme), "--results", str(RESULTS), "--pages", str(pages)]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1 and readme.read_text() == before
    assert guide_cli.main(["--readme", str(readme), "--pages", str(tmp_path / "none.yaml")]) == 2
    assert "no page list" in capsys.readouterr().err
