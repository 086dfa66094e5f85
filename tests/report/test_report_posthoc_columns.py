"""The "ECE after …" columns of the registry's calibrators (vector, matrix, Dirichlet, isotonic next to TS/HB):
per run equal to an independent registry fit, mean ± std over seeds, refusals as NaN + note, --calibrators."""

import csv
import math
from pathlib import Path

import numpy as np
import pytest

from metacal import metrics
from metacal.posthoc import registry
from metacal.predictions import load_predictions
from metacal.report.aggregate import aggregate, run_numbers
from metacal.report.cli import main as report_main  # what scripts/report.py runs
from metacal.report.posthoc_columns import ALL, DEFAULT, column_key, parse_calibrators
from metacal.run.layout import find_runs, read_run

NEW = ("vector", "matrix", "dirichlet", "isotonic", "ets")
HEADERS = {"vector": "ECE after VS (%)", "matrix": "ECE after MS-ODIR (%)", "dirichlet": "ECE after Dir-ODIR (%)",
           "ets": "ECE after ETS (%)",
           "isotonic": "ECE after Iso (%)"}


def _independent_ece(run_dir: Path, name: str) -> float:
    """ECE (15 bins) of the test predictions after ``name`` fitted on the val predictions, read from the files."""
    val = load_predictions(run_dir / "predictions" / "val.npz")
    test = load_predictions(run_dir / "predictions" / "test.npz")
    return float(metrics.ece(registry.calibrate(name, val, test), test.labels, 15))


def _table(text: str) -> tuple[list[str], dict[str, list[str]]]:
    """Header cells and {label: cells} of the page's first table."""
    lines = [ln for ln in text.split("## Test metrics")[1].split("\n\n")[1].splitlines() if ln.startswith("|")]
    cells = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]
    return cells[0], {c[0]: c for c in cells[2:]}


@pytest.fixture
def three_seeds(tmp_path, run_writer):
    """CE, seeds 0–2, over-confident logits (×3), K = 3, 300 val and 300 test samples per run."""
    root = tmp_path / "sweep"
    for seed in (0, 1, 2):
        run_writer(root / "ce" / f"seed{seed}", seed, n=300, k=3, sharpness=3.0)
    return root


def test_new_columns_equal_registry_fit_per_run_and_mean_std_over_seeds(three_seeds, tmp_path):
    out = tmp_path / "page.md"
    assert report_main([str(three_seeds), "--out", str(out)]) == 0
    row = aggregate(find_runs(three_seeds))[0]
    header, body = _table(out.read_text())
    csv_row = next(csv.DictReader(open(out.with_suffix(".csv"))))
    for name in NEW:
        key = column_key(name)
        expected = np.array([_independent_ece(three_seeds / "ce" / f"seed{s}", name) for s in (0, 1, 2)])
        got = np.array([row.per_run[s][key] for s in (0, 1, 2)])
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12, err_msg=name)
        # each map lowers the ECE of these over-confident logits on every seed: the numbers are not vacuous
        assert all(got < np.array([row.per_run[s]["ece"] for s in (0, 1, 2)]) - 0.05), name
        mean, std, n = row.stats[key]
        assert n == 3 and mean == pytest.approx(expected.mean(), rel=1e-9)
        assert std == pytest.approx(expected.std(ddof=1), rel=1e-9)
        # the page shows it in % next to the TS/HB columns, the CSV in fractions
        assert body["CE"][header.index(HEADERS[name])] == f"{100 * mean:.3f} ± {100 * std:.3f}"
        assert float(csv_row[f"{key}_mean"]) == pytest.approx(mean, rel=1e-12)
        assert float(csv_row[f"{key}_std"]) == pytest.approx(std, rel=1e-12) and csv_row[f"{key}_n"] == "3"
    assert header.index("ECE after HB (%)") + 1 == header.index("ECE after VS (%)")
    assert header[-1] == "s/epoch" and row.notes == []


def test_too_few_validation_samples_give_nan_and_a_note(tmp_path, run_writer):
    root = tmp_path / "sweep"
    for seed in (0, 1):
        run_writer(root / "ce" / f"seed{seed}", seed, n=300, k=5, sharpness=2.0)
    small = root / "ce" / "seed1" / "predictions" / "val.npz"
    with np.load(small) as data:  # keep 20 validation samples: K(K+1) = 30 needed by matrix/Dirichlet, 2K = 10 by VS
        np.savez(small, logits=data["logits"][:20], labels=data["labels"][:20])
    out = tmp_path / "page.md"
    assert report_main([str(root), "--out", str(out)]) == 0
    row = aggregate(find_runs(root))[0]
    for name in ("matrix", "dirichlet"):
        key = column_key(name)
        assert math.isnan(row.per_run[1][key])
        assert row.per_run[0][key] == pytest.approx(_independent_ece(root / "ce" / "seed0", name), rel=1e-9)
        mean, std, n = row.stats[key]
        assert n == 1 and mean == row.per_run[0][key] and math.isnan(std)  # mean over the run that has it
    for name in ("vector", "isotonic"):  # 20 ≥ 10 and ≥ 5: fitted on the small set
        assert row.per_run[1][column_key(name)] == pytest.approx(_independent_ece(root / "ce" / "seed1", name),
                                                                 rel=1e-9)
    assert row.notes == [
        "seed 1: ECE after MS-ODIR: matrix scaling (ODIR) needs at least 30 fitting samples for K = 5, got N = 20 "
        "in predictions/val.npz",
        "seed 1: ECE after Dir-ODIR: Dirichlet calibration (ODIR) needs at least 30 fitting samples for K = 5, "
        "got N = 20 in predictions/val.npz"]
    text = out.read_text()
    header, body = _table(text)
    assert body["CE"][header.index("ECE after MS-ODIR (%)")] == f"{100 * row.per_run[0]['ece_matrix']:.3f} (n=1)"
    assert "Post-hoc calibrators that refused a run" in text
    assert f"- CE {row.notes[0]}\n- CE {row.notes[1]}\n" in text


def test_only_the_selected_calibrators_are_fitted(three_seeds, monkeypatch):
    fitted = []
    real = registry.fit_calibrator
    monkeypatch.setattr(registry, "fit_calibrator", lambda name, *a, **kw: fitted.append(name) or real(name, *a, **kw))
    numbers = run_numbers(read_run(three_seeds / "ce" / "seed0"), calibrators=["isotonic", "ts_nll"])
    assert fitted == ["ts_nll", "isotonic"]  # registry order; matrix/Dirichlet (the slow CV) never run
    assert numbers["ece_isotonic"] == pytest.approx(_independent_ece(three_seeds / "ce" / "seed0", "isotonic"),
                                                    rel=1e-12)
    assert numbers["t_nll"] > 1.5  # ×3 logits: the claim's temperature still comes with ts_nll
    assert all(math.isnan(numbers[column_key(n)]) for n in ALL if n not in ("isotonic", "ts_nll"))
    assert math.isnan(numbers[column_key("ts_perturbed")])  # not selected (and needs perturbed predictions)


def test_probs_only_runs_fit_the_new_maps_on_log_probs(tmp_path, run_writer):
    run_dir = run_writer(tmp_path / "ce" / "seed0", 0, n=300, k=3, sharpness=3.0, probs_only=True)
    numbers = run_numbers(read_run(run_dir), calibrators=["ts_nll", "vector", "dirichlet"])
    assert math.isnan(numbers["ece_ts_nll"])  # TS keeps needing logits, as before
    for name in ("vector", "dirichlet"):  # the evaluate CLI's rule: ln p stands in for the logits
        assert numbers[column_key(name)] == pytest.approx(_independent_ece(run_dir, name), rel=1e-9)


def test_cli_option_selects_the_columns(three_seeds, tmp_path):
    out = tmp_path / "page.md"
    assert report_main([str(three_seeds), "--out", str(out), "--calibrators", "isotonic,vector,vector"]) == 0
    text = out.read_text()
    header, _ = _table(text)
    assert [h for h in header if h.startswith("ECE after")] == ["ECE after VS (%)", "ECE after Iso (%)"]
    fields = next(csv.reader(open(out.with_suffix(".csv"))))
    assert "ece_vector_mean" in fields and "ece_isotonic_mean" in fields
    assert not any(f.startswith(("ece_matrix", "ece_dirichlet", "ece_ts_nll", "ece_hb")) for f in fields)
    assert "Not computed (`--calibrators`): TS-NLL, TS-grid, HB, MS-ODIR, Dir-ODIR, ETS." in text
    assert "--calibrators isotonic,vector,vector" in text  # the regeneration command keeps the choice
    assert report_main([str(three_seeds), "--out", str(out), "--calibrators", "none"]) == 0
    header, _ = _table(out.read_text())
    assert not any(h.startswith("ECE after") for h in header) and "`--calibrators none`" in out.read_text()


def test_parse_calibrators():
    assert parse_calibrators("all") == DEFAULT == ("ts_nll", "ts_ece", "hb", "vector", "matrix", "dirichlet",
                                                   "isotonic", "ets")  # ts_perturbed needs shift/val_<suite>.npz
    assert ALL == (*DEFAULT, "ts_perturbed") and parse_calibrators("ts_perturbed,ets") == ("ets", "ts_perturbed")
    assert parse_calibrators("none") == ()
    assert parse_calibrators(" dirichlet , ts_nll,hb ") == ("ts_nll", "hb", "dirichlet")


@pytest.mark.parametrize("value, message", [
    ("vectr", "unknown post-hoc calibrator 'vectr'; did you mean vector?"),
    ("vector,matrx,ts", "unknown post-hoc calibrator 'matrx'; did you mean matrix?"),
    ("all,vector", "unknown post-hoc calibrator 'all'"),
    (",", "no name given; choose from"),
])  # fmt: skip
def test_bad_calibrator_names_are_one_line_exit_2_and_write_nothing(three_seeds, tmp_path, capsys, value, message):
    out = tmp_path / "page.md"
    assert report_main([str(three_seeds), "--out", str(out), "--calibrators", value]) == 2
    err = capsys.readouterr().err
    assert err.startswith("report: error: --calibrators: ") and message in err
    assert "ts_nll, ts_ece, hb, vector, matrix, dirichlet, isotonic" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists() and not out.with_suffix(".csv").exists()
