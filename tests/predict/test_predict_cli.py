"""python -m metacal.predict: the probabilities it writes are metacal.load(...).predict_proba's, bit for bit; the
export it writes is the .pt2 program or the ONNX model; every bad input is one line, exit code 2, and writes
nothing."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest
import torch

import metacal
from metacal.predict.cli import main
from tests.predict.conftest import copy_run, mnist1d_test_inputs


def run_cli(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def inputs(mnist1d_run, tmp_path_factory):
    x, y = mnist1d_test_inputs(mnist1d_run)
    folder = tmp_path_factory.mktemp("predict_inputs")
    np.savez(folder / "xy.npz", x=x.numpy(), y=y.numpy())
    np.savez(folder / "x.npz", x=x.numpy())
    return folder


def test_cli_writes_the_probabilities_of_predict_proba(mnist1d_run, inputs, tmp_path, capsys):
    out = tmp_path / "probs.npz"
    code, printed, err = run_cli([mnist1d_run, inputs / "xy.npz", "--out", out, "--device", "cpu"], capsys)
    assert code == 0, err
    metrics = json.loads((mnist1d_run / "metrics.json").read_text())["test_after_ts"]
    assert printed.strip() == (f"wrote (400, 10) probabilities (ts_nll) and labels_pred to {out}; error "
                               f"{100 * metrics['error']:.2f}%, ECE {100 * metrics['ece']:.2f}% (15 bins)")
    x, _ = mnist1d_test_inputs(mnist1d_run)
    expected = metacal.load(mnist1d_run, device="cpu").predict_proba(x).numpy()
    with np.load(out) as saved:
        assert np.array_equal(saved["probs"], expected) and saved["probs"].dtype == np.float64
        assert np.array_equal(saved["labels_pred"], expected.argmax(axis=1)) and saved["labels_pred"].dtype == np.int64
        assert saved["classes"].tolist() == [str(c) for c in range(10)]
        assert str(saved["calibrator"]) == "ts_nll"


def test_cli_other_calibrators_and_none(mnist1d_run, inputs, tmp_path, capsys):
    run = copy_run(mnist1d_run, tmp_path / "run")
    x, _ = mnist1d_test_inputs(mnist1d_run)
    for name, flag in (("vector", "vector"), (None, "none")):
        out = tmp_path / f"{flag}.npz"
        code, printed, err = run_cli([run, inputs / "x.npz", "--out", out, "--calibrator", flag], capsys)
        assert code == 0, err
        assert printed.strip() == f"wrote (400, 10) probabilities ({name or 'uncalibrated'}) and labels_pred to {out}"
        with np.load(out) as saved:
            expected = metacal.load(run, calibrator=name, device="cpu").predict_proba(x).numpy()
            assert np.array_equal(saved["probs"], expected) and str(saved["calibrator"]) == flag
    assert (run / "calibration" / "vector.pt").is_file()


def test_cli_export_matches_predict_proba(mnist1d_run, tmp_path, capsys):
    import onnxruntime

    x, _ = mnist1d_test_inputs(mnist1d_run)
    expected = metacal.load(mnist1d_run, device="cpu").predict_proba(x.numpy())
    onnx_path, pt2_path = tmp_path / "model.onnx", tmp_path / "model.pt2"
    for path, kind in ((onnx_path, "ONNX"), (pt2_path, "torch.export")):
        code, printed, err = run_cli([mnist1d_run, "--export", path, "--calibrator", "ts_nll"], capsys)
        assert code == 0 and err == "", err
        assert printed.strip() == (f"wrote {kind} model (ts_nll) to {path}: inputs (N, 1, 40) float32 → N×10 "
                                   "float64 probabilities")
    session = onnxruntime.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    assert np.abs(session.run(None, {"x": x.numpy()})[0] - expected).max() <= 1e-5
    assert np.abs(torch.export.load(str(pt2_path)).module()(x).numpy() - expected).max() <= 1e-12


def test_cli_onnx_without_its_packages_names_the_extra(mnist1d_run, tmp_path, capsys, monkeypatch):
    import importlib.util

    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnx" else found(name, *a))
    code, printed, err = run_cli([mnist1d_run, "--export", tmp_path / "model.onnx"], capsys)
    assert code == 2 and printed == "" and not (tmp_path / "model.onnx").exists()
    assert err == ("python -m metacal.predict: error: exporting to ONNX needs the packages onnx and onnxscript "
                   "(not installed: onnx): pip install 'metacal[export]'\n")


def test_bad_requests_are_one_line_and_write_nothing(mnist1d_run, inputs, tmp_path, capsys):
    run = copy_run(mnist1d_run, tmp_path / "run")
    x = np.load(inputs / "xy.npz")["x"]
    np.savez(tmp_path / "nox.npz", z=x)
    np.savez(tmp_path / "short.npz", x=x[:, :, :30])
    np.savez(tmp_path / "wide.npz", x=np.repeat(x, 3, axis=1))
    np.savez(tmp_path / "bady.npz", x=x, y=np.full(len(x), 10))
    x_nan = x.copy()
    x_nan[7, 0, 3] = np.nan
    np.savez(tmp_path / "nan.npz", x=x_nan)
    absent = f"cuda:{torch.cuda.device_count()}"  # one past the last GPU: absent on every machine
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro").chmod(0o500)
    out = tmp_path / "out.npz"
    cases = {
        "missing run": ([tmp_path / "nope", inputs / "x.npz", "--out", out], "is not a directory"),
        "not a run": ([tmp_path, inputs / "x.npz", "--out", out], "has no config.yaml"),
        "missing inputs": ([run, tmp_path / "none.npz", "--out", out], "no such file"),
        "no x": ([run, tmp_path / "nox.npz", "--out", out], r"has no 'x' \(found: z\)"),
        "wrong shape": ([run, tmp_path / "short.npz", "--out", out], r"shape \(N, 1, 40\); got \(400, 1, 30\)"),
        "wrong channels": ([run, tmp_path / "wide.npz", "--out", out], r"shape \(N, 1, 40\); got \(400, 3, 40\)"),
        "labels out of range": ([run, tmp_path / "bady.npz", "--out", out], r"y must lie in 0\.\.9, got 10\.\.10"),
        "NaN inputs": ([run, tmp_path / "nan.npz", "--out", out], "inputs must be finite; sample 7 has NaN"),
        "unknown device": ([run, inputs / "x.npz", "--out", out, "--device", "gpu"],
                           r"--device gpu is not a device \(cpu, cuda, cuda:0\)$"),
        "absent device": ([run, inputs / "x.npz", "--out", out, "--device", absent],
                          f"--device {absent}: no such CUDA device on this machine; use --device cpu$"),
        "unknown calibrator": ([run, inputs / "x.npz", "--out", out, "--calibrator", "dirichlett"],
                               "did you mean dirichlet"),
        "out is a folder": ([run, inputs / "x.npz", "--out", tmp_path / "ro"], "is a directory; name a file"),
        "out folder missing": ([run, inputs / "x.npz", "--out", tmp_path / "no" / "p.npz"], "does not exist"),
        "no out": ([run, inputs / "x.npz"], "go together"),
        "not exportable": ([run, "--export", tmp_path / "m.pt2", "--calibrator", "isotonic"],
                           "calibrator isotonic cannot be exported"),
        "TorchScript file": ([run, "--export", tmp_path / "m.pt"], r"name a \.pt2 file \(torch\.export\) or an \.onnx"),
    }
    if os.geteuid() != 0:  # root writes anywhere
        cases["unwritable out"] = ([run, inputs / "x.npz", "--out", tmp_path / "ro" / "p.npz"], "cannot be written")
    before = sorted(p.name for p in (run / "calibration").iterdir())
    for name, (argv, message) in cases.items():
        code, printed, err = run_cli(argv + (["--calibrator", "vector"] if "--calibrator" not in argv else []),
                                     capsys)
        assert code == 2, name
        assert printed == "" and len(err.strip().splitlines()) == 1, name
        assert err.startswith("python -m metacal.predict: error: "), name
        assert re.search(message, err), (name, err)
    assert not out.exists() and not (tmp_path / "m.pt").exists() and not (tmp_path / "m.pt2").exists()
    assert not any((tmp_path / "ro").iterdir())
    assert sorted(p.name for p in (run / "calibration").iterdir()) == before  # nothing fitted, nothing saved
