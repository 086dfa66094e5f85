"""The evaluate CLI: JSON output against metacal.metrics.summary, --calib, --plot, and every bad-input case."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from metacal.evaluate.cli import main
from metacal.metrics import SUMMARY_KEYS, summary
from metacal.posthoc import HistogramBinning, TemperatureScaling

REPO = Path(__file__).resolve().parents[2]


def make_npz(path, n=300, k=5, seed=0, kind="logits", sharpen=2.0):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k))
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    labels = np.array([rng.choice(k, p=row) for row in p])
    logits = (sharpen * z).astype(np.float32)
    if kind == "logits":
        np.savez(path, logits=logits, labels=labels)
    else:
        probs = torch.softmax(torch.from_numpy(logits).double(), 1).numpy()
        np.savez(path, probs=probs, labels=labels)
    return path


def run(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_matches_summary(tmp_path, capsys):
    path = make_npz(tmp_path / "pred.npz")
    code, out, err = run([path, "--json", "--bins", "10"], capsys)
    assert code == 0 and err == ""
    result = json.loads(out)  # exactly one JSON object on stdout
    data = np.load(path)
    probs = torch.softmax(torch.from_numpy(data["logits"]).double(), 1)
    expected = summary(probs, torch.from_numpy(data["labels"]), num_bins=10)
    assert set(SUMMARY_KEYS) <= set(result)
    for key in SUMMARY_KEYS:
        assert result[key] == pytest.approx(expected[key], abs=1e-9), key
    assert result["n"] == 300 and result["num_classes"] == 5


def test_calib_adds_post_hoc_summaries(tmp_path, capsys):
    test, val = make_npz(tmp_path / "t.npz", seed=1), make_npz(tmp_path / "v.npz", seed=2)
    code, out, _ = run([test, "--calib", val, "--json"], capsys)
    assert code == 0
    result = json.loads(out)
    for key in ("after_ts_nll", "after_ts_ece", "after_hb"):
        assert set(result[key]) == set(SUMMARY_KEYS)
    t, v = np.load(test), np.load(val)
    zt, yt = torch.from_numpy(t["logits"]).double(), torch.from_numpy(t["labels"])
    zv, yv = torch.from_numpy(v["logits"]).double(), torch.from_numpy(v["labels"])
    ts = TemperatureScaling("nll").fit(zv, yv)
    assert result["temperature_nll"] == pytest.approx(ts.temperature, rel=1e-6)
    assert result["temperature_nll"] == pytest.approx(2.0, rel=0.35)  # data sharpened by 2
    assert result["after_ts_nll"]["ece"] == pytest.approx(summary(ts.transform(zt), yt)["ece"], abs=1e-6)
    te = TemperatureScaling("ece_grid").fit(zv, yv).temperature
    assert result["temperature_ece"] == pytest.approx(te, abs=1e-12)
    hb = HistogramBinning(15, "top").fit(zv.softmax(1), yv)
    assert result["after_hb"]["ece"] == pytest.approx(summary(hb.transform(zt.softmax(1)), yt)["ece"], abs=1e-9)
    assert result["after_ts_nll"]["nll"] < result["nll"]


def test_probs_file_with_calib_uses_log_probs(tmp_path, capsys):
    test, val = make_npz(tmp_path / "t.npz", kind="probs"), make_npz(tmp_path / "v.npz", seed=3, kind="probs")
    code, out, _ = run([test, "--calib", val, "--json"], capsys)
    assert code == 0
    result = json.loads(out)
    assert result["calib_logits_from"] == "log_probs"
    # log-probs differ from the logits by a per-row constant → same temperature as fitting on the logits
    v = np.load(val)
    zv = torch.from_numpy(v["probs"]).log()
    expected = TemperatureScaling().fit(zv, torch.from_numpy(v["labels"])).temperature
    assert result["temperature_nll"] == pytest.approx(expected, rel=1e-6)


def test_table_and_plot(tmp_path, capsys):
    path = make_npz(tmp_path / "pred.npz")
    png = tmp_path / "plots" / "rel.png"
    code, out, err = run([path, "--plot", png], capsys)
    assert code == 0 and err == ""
    assert "ECE (%)" in out and "Classwise ECE (%)" in out
    ece_pct = 100 * json.loads(_json(path, capsys))["ece"]
    assert f"{ece_pct:.2f}" in out  # the table shows percentages
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _json(path, capsys):
    main([str(path), "--json"])
    return capsys.readouterr()[0]


def _write(tmp_path, name="bad.npz", **arrays):
    path = tmp_path / name
    np.savez(path, **arrays)
    return path


GOOD_LOGITS = np.random.default_rng(0).normal(size=(6, 3))
GOOD_LABELS = np.array([0, 1, 2, 0, 1, 2])
UNIFORM = np.full((6, 3), 1 / 3)


@pytest.mark.parametrize(
    "case, arrays, needle",
    [
        ("missing labels", {"logits": GOOD_LOGITS}, "missing key 'labels'"),
        ("missing scores", {"labels": GOOD_LABELS}, "missing key 'logits' or 'probs'"),
        ("row mismatch", {"logits": GOOD_LOGITS, "labels": GOOD_LABELS[:5]}, "must have shape (6,)"),
        ("1-D logits", {"logits": GOOD_LOGITS[:, 0], "labels": GOOD_LABELS}, "must be N×K"),
        ("2-D labels", {"logits": GOOD_LOGITS, "labels": GOOD_LABELS[:, None]}, "'labels' must have shape"),
        ("nan logits", {"logits": np.where(np.eye(6, 3) > 0, np.nan, GOOD_LOGITS), "labels": GOOD_LABELS},
         "NaN or inf"),
        ("inf probs", {"probs": np.where(np.eye(6, 3) > 0, np.inf, UNIFORM), "labels": GOOD_LABELS}, "NaN or inf"),
        ("label too large", {"logits": GOOD_LOGITS, "labels": GOOD_LABELS + 1}, "must lie in [0, 2]"),
        ("negative label", {"logits": GOOD_LOGITS, "labels": GOOD_LABELS - 1}, "must lie in [0, 2]"),
        ("fractional labels", {"logits": GOOD_LOGITS, "labels": GOOD_LABELS + 0.5}, "must be integers"),
        ("probs not summing to 1", {"probs": UNIFORM * 1.01, "labels": GOOD_LABELS}, "sum to 1"),
        ("probs out of range", {"probs": np.tile([-0.2, 0.7, 0.5], (6, 1)), "labels": GOOD_LABELS}, "[0, 1]"),
    ],
)
def test_bad_input_one_line_exit_2(tmp_path, capsys, case, arrays, needle):
    path = _write(tmp_path, **arrays)
    code, out, err = run([path, "--json"], capsys)
    assert code == 2, case
    assert out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert needle in err, err


def test_probs_within_tolerance_are_accepted(tmp_path, capsys):
    path = _write(tmp_path, probs=UNIFORM * (1 + 5e-4), labels=GOOD_LABELS)
    code, _, _ = run([path, "--json"], capsys)
    assert code == 0


@pytest.mark.parametrize("content", [None, b"this is not a zip archive", b"", "npy", "object"])
def test_missing_or_unreadable_file(tmp_path, capsys, content):
    path = tmp_path / "pred.npz"
    if content == "npy":  # a single array saved with np.save under an .npz name
        with open(path, "wb") as fh:
            np.save(fh, GOOD_LOGITS)
    elif content == "object":  # object arrays need pickle, which is refused
        np.savez(path, logits=np.array([GOOD_LOGITS, None], dtype=object), labels=GOOD_LABELS)
    elif content is not None:
        path.write_bytes(content)
    code, out, err = run([path], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    expected = {None: "no such file", "npy": "single .npy array"}.get(content, "cannot read")
    assert expected in err, err


def test_bad_calib_file_and_bad_arguments(tmp_path, capsys):
    good = make_npz(tmp_path / "good.npz")
    other_k = make_npz(tmp_path / "k4.npz", k=4)
    for argv, needle in [
        ([good, "--calib", tmp_path / "none.npz"], "no such file"),
        ([good, "--calib", other_k], "K = 4"),
        ([good, "--bins", "0"], "--bins"),
        ([good, "--bins", "x"], "invalid int"),
        ([good, "--unknown"], "unrecognized"),
        ([], "required"),
    ]:
        code, out, err = run(argv, capsys)
        assert code == 2 and out == "", argv
        assert err.count("\n") == 1 and "Traceback" not in err and needle in err, (argv, err)


@pytest.mark.slow
def test_module_entry_point_runs_on_the_example_files(tmp_path):
    """`python -m metacal.evaluate` end to end on docs/examples (the command of docs/evaluation.md)."""
    test = REPO / "docs" / "examples" / "predictions_test.npz"
    val = REPO / "docs" / "examples" / "predictions_val.npz"
    png = tmp_path / "example_reliability.png"
    proc = subprocess.run(
        [sys.executable, "-m", "metacal.evaluate", str(test), "--calib", str(val), "--json", "--plot", str(png)],
        capture_output=True, text=True, cwd=REPO, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["n"] == 2000 and result["num_classes"] == 10
    assert result["ece"] > 0.05 and result["after_ts_nll"]["ece"] < 0.5 * result["ece"]  # over-confident example
    assert png.stat().st_size > 10_000
    bad = subprocess.run([sys.executable, "-m", "metacal.evaluate", str(tmp_path / "nope.npz")],
                         capture_output=True, text=True, cwd=REPO, timeout=300)  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
