"""The results page end to end on synthetic run directories, its CLI, and the figure data helpers."""

import csv
import json
import math
import os
import platform
import re

import numpy as np
import pytest
import torch

from metacal.report.figures import epoch_series, pareto_front
from metacal.machine import cpu_model
from metacal.report.page import SPARSE_TEST_NOTE
from metacal.run.layout import find_runs


def test_pareto_front_by_hand():
    pts = [(1, 5), (2, 3), (3, 4), (4, 1), (2, 6), (5, 1), (float("nan"), 0.0)]
    # (3,4) is dominated by (2,3); (2,6) by (1,5); (5,1) by (4,1) (equal y, larger x); NaN never enters
    assert pareto_front(pts) == [0, 1, 3]
    assert pareto_front([(1, 1), (1, 1)]) == [0, 1]  # identical points do not dominate each other
    assert pareto_front([]) == []


def test_epoch_series_mean_and_std(tmp_path, run_writer):
    for seed in (0, 1):
        run_writer(tmp_path / "flgamma_sece" / f"seed{seed}", seed, predictions=False, test_metrics={},
                   epochs=3, gamma=True)
    run_writer(tmp_path / "ce" / "seed0", 0, predictions=False, test_metrics={}, epochs=2)
    runs = find_runs(tmp_path)
    fl = [r for r in runs if r.method == "flgamma_sece"]
    epochs, mean, std = epoch_series(fl, "test", "ece")
    # test ECE written as 0.1(e+1) + 0.01·seed → mean over seeds 0, 1 is 0.1(e+1) + 0.005, std 0.01/√2
    np.testing.assert_allclose(epochs, [0, 1, 2])
    np.testing.assert_allclose(mean, [0.105, 0.205, 0.305])
    np.testing.assert_allclose(std, [0.01 / math.sqrt(2)] * 3)
    epochs, mean, _ = epoch_series(fl, "test", "gamma_mean")  # 1 + 0.5e + seed
    np.testing.assert_allclose(mean, [1.5, 2.0, 2.5])
    ce = [r for r in runs if r.method == "ce"]
    assert epoch_series(ce, "test", "gamma_mean") is None  # no γ-Net → no γ curve
    _, _, std = epoch_series(ce, "test", "ece")
    assert np.isnan(std).all()  # one run: std undefined


@pytest.fixture
def sweep_root(tmp_path, run_writer):
    root = tmp_path / "sweep"
    for seed in (0, 1):
        run_writer(root / "ce" / f"seed{seed}", seed, n=200, k=4, sharpness=2.0)
        run_writer(root / "flgamma_sece" / f"seed{seed}", seed, n=200, k=4, gamma=True)
    run_writer(root / "my_loss" / "seed0", 0, n=200, k=4)
    run_writer(root / "my_loss" / "seed1", 1, n=200, k=4, metrics=False, done=False)  # crashed run
    return root


def _run_cli(argv):
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "report_cli", Path(__file__).resolve().parents[2] / "scripts" / "report.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.main(argv)


def test_report_cli_writes_page_csv_and_figures(sweep_root, tmp_path, capsys):
    out = tmp_path / "docs" / "fmnist.md"
    (sweep_root / "sweep_command.txt").write_text("python scripts/sweep.py --configs a.yaml --seeds 0 1 --out x\n")
    discussion = tmp_path / "discussion.md"
    discussion.write_text("Written by people: why CE is over-confident here.\n")
    argv = [str(sweep_root), "--out", str(out), "--title", "Synthetic sweep", "--discussion", str(discussion)]
    assert _run_cli(argv) == 0
    text = out.read_text()
    # the sweep that made the runs, the claim check and the people's discussion, in this order
    assert "The runs were produced by:\n\n```\npython scripts/sweep.py --configs a.yaml --seeds 0 1 --out x\n```" in text
    assert text.index("## Test metrics") < text.index("## The claim under test") < \
        text.index("## Paired comparisons over seeds") < text.index("## Discussion")
    assert "## Discussion\n\nWritten by people: why CE is over-confident here.\n" in text
    assert "| CE | " in text.split("### Direction of the miscalibration")[1]
    assert text.startswith("# Synthetic sweep\n")
    # the exact regeneration command and the machine, read not typed
    assert f"python scripts/report.py {sweep_root} --out {out} --title 'Synthetic sweep' --discussion {discussion}" in text
    assert f"torch: {torch.__version__}" in text and f"platform: {platform.platform()}" in text
    assert "From the runs' config.yaml: data: synthetic." in text
    assert f"cpu: {cpu_model()}" in text and f"cores: {os.cpu_count()}" in text
    assert f"cpu kernels: {torch.backends.cpu.get_cpu_capability()}" in text
    # first table: Table-1 columns, paper labels, unknown stems as is, seeds with missing ones named
    table = [ln for ln in text.split("## The claim under test")[0].splitlines() if ln.startswith("|")]
    assert "ECE (%)" in table[0] and "Error (%)" in table[0] and "ECE after HB (%)" in table[0]
    labels = [ln.split("|")[1].strip() for ln in table[2:]]
    assert labels == ["CE", "FLγ-SECE", "my_loss"]
    assert table[-1].split("|")[2].strip() == "1 (missing: 1)"
    assert "my_loss: run directories without metrics.json (unfinished or failed): seed1" in text
    # CSV next to it, parseable, numbers in fractions matching the Markdown's percentages
    rows = list(csv.DictReader(open(out.with_suffix(".csv"))))
    assert [r["method"] for r in rows] == ["ce", "flgamma_sece", "my_loss"]
    ce_ece = float(rows[0]["ece_mean"]), float(rows[0]["ece_std"])
    assert f"{100 * ce_ece[0]:.3f} ± {100 * ce_ece[1]:.3f}" in table[2]
    assert rows[0]["ece_ts_nll_n"] == "2" and 0 < float(rows[0]["ece_ts_nll_mean"]) < ce_ece[0]
    # figures exist next to the page and are linked from it
    for name in ("reliability", "ece_mce_vs_bins", "error_vs_ece", "test_ece_per_epoch", "gamma_per_epoch"):
        png = out.parent / f"fmnist_{name}.png"
        assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert f"](fmnist_{name}.png)" in text
    assert (out.parent / "fmnist_paired.csv").is_file() and "### Against CE (the baseline)" in text
    assert f"wrote {out}, {out.with_suffix('.csv')}, {out.parent / 'fmnist_paired.csv'} and 5 figures" in \
        capsys.readouterr().out


def test_report_without_gamma_runs_says_so(tmp_path, run_writer):
    run_writer(tmp_path / "ce" / "seed0", 0, n=100, k=3)
    assert _run_cli([str(tmp_path)]) == 0  # default --out: RUN_ROOT/report.md
    text = (tmp_path / "report.md").read_text()
    assert "γ per epoch: no γ-Net run" in text
    assert not (tmp_path / "report_gamma_per_epoch.png").exists()
    assert re.search(r"\| CE \| 1 \| ", text)
    assert SPARSE_TEST_NOTE not in text  # the test set was evaluated every epoch


def test_test_ece_curves_say_when_the_test_set_was_evaluated_only_at_improvements(tmp_path, run_writer):
    """``eval.test_every_epoch: false`` leaves ``test: null`` on the epochs without a validation improvement; the
    per-epoch figure then averages different seeds at different epochs, and the page says so under it."""
    run_writer(tmp_path / "ce" / "seed0", 0, n=100, k=3)
    history = tmp_path / "ce" / "seed1" / "history.json"
    run_writer(history.parent, 1, n=100, k=3)
    records = json.loads(history.read_text())
    records[1]["test"] = None
    history.write_text(json.dumps(records))
    assert _run_cli([str(tmp_path)]) == 0
    text = (tmp_path / "report.md").read_text()
    figure = text.split("### Test ECE per epoch")[1].split("###")[0]
    assert SPARSE_TEST_NOTE in figure


def _corrupt_run(root):
    run = root / "ce" / "seed0"
    (run / "predictions").mkdir(parents=True)
    (run / "metrics.json").write_text('{"test": {"ece": 0.1}}')
    (run / "predictions" / "test.npz").write_bytes(b"not a zip file")


@pytest.mark.parametrize("make, argv_extra, message", [
    (lambda root: None, [], "run root not found"),
    (lambda root: (root / "ce" / "seed0").mkdir(parents=True), [], "none of the 1 run directories"),
    (lambda root: root.mkdir(), [], "no run directories"),
    (lambda root: root.mkdir(), ["--out", "x.txt"], "must name a Markdown file"),
    (lambda root: root.mkdir(), ["--bins", "0"], "--bins must be a positive integer"),
    (_corrupt_run, [], "cannot read as .npz"),
    (lambda root: root.mkdir(), ["--discussion", "nope.md"], "--discussion: no such file: nope.md"),
])  # fmt: skip
def test_report_cli_bad_input_is_one_line_exit_2(tmp_path, capsys, make, argv_extra, message):
    root = tmp_path / "root"
    make(root)
    assert _run_cli([str(root), *argv_extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_page_leads_with_the_answer_and_ends_with_the_per_seed_rows(tmp_path, run_writer):
    """Regime line, summary table and verdicts first; paired details, discussion, figures and how the page was made
    after them; the per-seed rows last. The regime line is the CE runs' own temperature, said once."""
    from metacal.posthoc import TemperatureScaling
    from metacal.report.page import build_report

    root = tmp_path / "sweep"
    for seed in (0, 1, 2):
        run_writer(root / "ce" / f"seed{seed}", seed, n=200, k=4, sharpness=2.0)
        run_writer(root / "focal" / f"seed{seed}", seed, n=200, k=4, sharpness=1.0, val_metrics={"ece": 0.05})
        run_writer(root / "flgamma_sece" / f"seed{seed}", seed, n=200, k=4, gamma=True)
    out = tmp_path / "page.md"
    discussion = tmp_path / "discussion.md"
    discussion.write_text("People's reading.\n")
    result = build_report(root, out, title="Order", command="python scripts/report.py x", discussion=discussion)
    text = out.read_text()
    heads = [ln for ln in text.splitlines() if ln.startswith("## ")]
    assert heads == ["## Test metrics, mean ± std over seeds", "## The claim under test",
                     "## Paired comparisons over seeds", "## Discussion", "## Figures", "## How this page was made",
                     "## Per seed"]
    first = text.split("## Test metrics")[0]
    ce = next(r for r in result.rows if r.method == "ce")
    t = ce.stats["t_nll"][0]
    # the CE runs' mean TS temperature, fitted on their val predictions as the runs were written
    fitted = []
    for seed in (0, 1, 2):
        z = np.load(root / "ce" / f"seed{seed}" / "predictions" / "val.npz")
        fitted.append(TemperatureScaling("nll").fit(z["logits"], z["labels"]).temperature)
    assert t == pytest.approx(np.mean(fitted), rel=1e-6)
    regime = f"Regime: CE is {'OVER' if t > 1 else 'UNDER'}-confident on this data"
    assert first.startswith("# Order\n\n**" + regime) and f"T = {t:.3f}" in first
    assert text.count("Regime: CE is") == 1
    assert text.index("**Verdict on this data") < text.index("## Paired comparisons over seeds")
    assert text.index("**Bar for FLγ-SECE") < text.index("## Paired comparisons over seeds")
    assert "python scripts/report.py x" in text.split("## How this page was made")[1]
    per_seed = text.split("## Per seed")[1]
    assert "Test ECE / test error (%) per seed:" in per_seed and "Test ECE / test error (%) per seed:" not in \
        text.split("## Per seed")[0]
    rows = [ln for ln in per_seed.splitlines() if ln.startswith("| ") and not ln.startswith("| seed")]
    fl = next(r for r in result.rows if r.method == "flgamma_sece")
    for seed, line in zip((0, 1, 2), rows):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[0] == str(seed)
        assert cells[2] == f"{100 * fl.per_run[seed]['ece']:.2f} / {100 * fl.per_run[seed]['error']:.2f}"
