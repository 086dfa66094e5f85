"""`--calib` with every registered post-hoc calibrator: JSON and table entries match the library, a subset
with --calibrators, and bad input (too few samples, class mismatch, non-finite logits, unknown names) as one
line, exit code 2 and nothing written."""

import json

import numpy as np
import pytest
import torch

from metacal.evaluate.cli import main
from metacal.metrics import SUMMARY_KEYS, summary
from metacal.posthoc import DirichletCalibration, IsotonicCalibration, MatrixScaling, VectorScaling, registry
from metacal.predictions import load_predictions


def make_npz(path, n=400, k=4, seed=0, sharpen=2.5):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 1.5
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    labels = np.array([rng.choice(k, p=row) for row in p])
    np.savez(path, logits=(sharpen * z).astype(np.float32), labels=labels)
    return path


def run(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_reports_every_calibrator(tmp_path, capsys):
    test, val = make_npz(tmp_path / "t.npz", seed=1), make_npz(tmp_path / "v.npz", seed=2)
    code, out, err = run([test, "--calib", val, "--json"], capsys)
    assert code == 0 and err == ""
    result = json.loads(out)
    assert "after_ts_perturbed" not in result  # a plain VAL.npz has no perturbed predictions: left out
    for name in registry.available(for_predictions=load_predictions(val)):
        assert set(result[f"after_{name}"]) == set(SUMMARY_KEYS), name
        assert result[f"after_{name}"]["ece"] < 0.5 * result["ece"], name  # over-confident by 2.5×
    t, v = np.load(test), np.load(val)
    zt, yt = torch.from_numpy(t["logits"]).double(), torch.from_numpy(t["labels"])
    zv, yv = torch.from_numpy(v["logits"]).double(), torch.from_numpy(v["labels"])
    for name, cal in (("vector", VectorScaling()), ("matrix", MatrixScaling()), ("dirichlet", DirichletCalibration())):
        expected = summary(cal.fit(zv, yv).transform(zt), yt)
        assert result[f"after_{name}"]["ece"] == pytest.approx(expected["ece"], abs=1e-9), name
        assert result[f"after_{name}"]["nll"] == pytest.approx(expected["nll"], abs=1e-9), name
    iso = IsotonicCalibration().fit(zv.softmax(1), yv)
    assert result["after_isotonic"]["ece"] == pytest.approx(summary(iso.transform(zt.softmax(1)), yt)["ece"], abs=1e-9)
    params = result["calibrator_params"]
    assert params["ts_nll"]["temperature"] == pytest.approx(result["temperature_nll"])
    assert params["matrix"]["reg_lambda"] == params["matrix"]["reg_mu"] in (1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0)
    assert set(params) == {"ts_nll", "ts_ece", "matrix", "dirichlet", "ets"}
    assert set(params["ets"]) == {"temperature", "w_ts", "w_raw", "w_uniform"}


def test_table_has_a_column_per_calibrator_and_subset(tmp_path, capsys):
    test, val = make_npz(tmp_path / "t.npz", seed=1), make_npz(tmp_path / "v.npz", seed=2)
    code, out, _ = run([test, "--calib", val, "--calibrators", "vector,isotonic"], capsys)
    assert code == 0
    header = out.splitlines()[1].split()
    assert header == ["metric", "uncalibrated", "VS", "Iso"]
    code, out, _ = run([test, "--calib", val, "--calibrators", "isotonic", "--json"], capsys)
    result = json.loads(out)
    assert [k for k in result if k.startswith("after_")] == ["after_isotonic"]
    assert "temperature_nll" not in result and result["calibrator_params"] == {}


@pytest.mark.parametrize("case", ["too few", "class mismatch", "nan logits", "inf logits", "unknown name",
                                  "no calib", "empty list", "no perturbed"])
def test_bad_input_one_line_exit_2_nothing_written(tmp_path, capsys, case):
    test = make_npz(tmp_path / "t.npz", k=4)
    val = make_npz(tmp_path / "v.npz", k=4, seed=3)
    extra = []
    if case == "too few":  # matrix scaling needs K(K+1) = 20 samples at K = 4
        val, needle = make_npz(tmp_path / "small.npz", n=19, k=4), "needs at least 20 fitting samples for K = 4, got N = 19"
    elif case == "class mismatch":
        val, needle = make_npz(tmp_path / "k5.npz", k=5), "K = 5 classes but predictions have K = 4"
    elif case in ("nan logits", "inf logits"):
        data = dict(np.load(val))
        data["logits"][7, 2] = np.nan if case == "nan logits" else np.inf
        np.savez(val, **data)
        needle = "NaN or inf in 1 row"
    elif case == "unknown name":
        extra, needle = ["--calibrators", "vector,platt"], "unknown post-hoc calibrator 'platt'; available: ts_nll, ts_ece"
    elif case == "no perturbed":
        extra, needle = ["--calibrators", "ts_perturbed"], ("perturbation temperature scaling needs perturbed "
                                                            "validation predictions: evaluate a run directory with "
                                                            "--shift")
    elif case == "no calib":
        extra, needle = ["--calibrators", "vector"], "--calibrators needs --calib"
    else:
        extra, needle = ["--calibrators", ","], "--calibrators: no name given; choose from ts_nll"
    plot = tmp_path / "rel.png"
    argv = [test, "--json", "--plot", plot, *extra] + ([] if case == "no calib" else ["--calib", val])
    code, out, err = run(argv, capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err and needle in err, err
    assert not plot.exists()


def test_too_few_samples_for_one_calibrator_leaves_the_others_usable(tmp_path, capsys):
    test, small = make_npz(tmp_path / "t.npz"), make_npz(tmp_path / "small.npz", n=19, k=4)
    code, out, _ = run([test, "--calib", small, "--calibrators", "ts_nll,vector,isotonic", "--json"], capsys)
    assert code == 0 and set(k for k in json.loads(out) if k.startswith("after_")) == {
        "after_ts_nll", "after_vector", "after_isotonic"}
