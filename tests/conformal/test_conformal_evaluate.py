"""Prediction sets where users ask for them: ``python -m metacal.evaluate --conformal`` on prediction files (each
calibrator column equals the predictor fitted by hand through that calibrator), on a run under shift (every cell's
sets are the ones built by hand from the shifted split), ``metacal.load(run).predict_set``; every bad request is
one line, exit 2."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import metacal
from metacal.conformal import ConformalPredictor, domain_weights, log_prob_features, set_metrics
from metacal.conformal.evaluation import CELL_KEYS, SetRequest
from metacal.data import shift_suites
from metacal.evaluate.cli import main
from metacal.posthoc import TemperatureScaling
from metacal.predict.network import load_run
from metacal.predictions import Predictions, load_predictions
from metacal.shift.evaluate import evaluate_run


def logits_file(path, n: int, k: int, seed: int, scale: float = 3.0):
    """Over-confident logits: labels drawn from softmax(z), the file holds scale·z."""
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(n, k, generator=gen, dtype=torch.float64)
    labels = torch.multinomial(torch.softmax(z, 1), 1, generator=gen).squeeze(1)
    Predictions.from_logits(scale * z, labels).save(path)
    return scale * z, labels


def run_cli(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("score", ["thr", "aps", "raps"])
def test_every_column_is_the_predictor_fitted_through_its_calibrator(tmp_path, capsys, score):
    logits_file(tmp_path / "val.npz", 1500, 6, 0)
    logits_file(tmp_path / "test.npz", 3000, 6, 1)
    cal, test = load_predictions(tmp_path / "val.npz"), load_predictions(tmp_path / "test.npz")  # as stored
    z_cal, y_cal, z_test, y_test = cal.logits.double(), cal.labels, test.logits.double(), test.labels
    code, out, err = run_cli([tmp_path / "test.npz", "--calib", tmp_path / "val.npz", "--calibrators", "ts_nll",
                              "--conformal", score, "--alpha", "0.1", "--json"], capsys)
    assert code == 0, err
    result = json.loads(out)["conformal"]
    assert (result["score"], result["alpha"], result["n_calib"]) == (score, 0.1, 1500)
    assert set(result["columns"]) == {"uncalibrated", "ts_nll"}
    ts = TemperatureScaling("nll").fit(z_cal, y_cal)
    for column, transform in (("uncalibrated", lambda z: torch.softmax(z, 1)), ("ts_nll", ts.transform)):
        predictor = ConformalPredictor(score, 0.1).fit(transform(z_cal), y_cal)
        expected = set_metrics(predictor.predict_set(transform(z_test)), y_test)
        got = result["columns"][column]
        assert got["quantile"] == pytest.approx(predictor.quantile, abs=1e-12)
        for key in ("coverage", "size_mean", "size_median", "empty", "singleton", "class_coverage_worst"):
            assert got[key] == pytest.approx(expected[key], abs=1e-12), (column, key)
        assert got["coverage"] >= 0.87  # 90% target; 3000 exchangeable test points: sd ≈ 0.55 points
    assert result["columns"]["ts_nll"]["size_mean"] != result["columns"]["uncalibrated"]["size_mean"]


def test_the_table_names_the_request_and_every_column(tmp_path, capsys):
    logits_file(tmp_path / "val.npz", 400, 4, 0)
    logits_file(tmp_path / "test.npz", 400, 4, 1)
    code, out, err = run_cli([tmp_path / "test.npz", "--calib", tmp_path / "val.npz", "--calibrators", "ts_nll,ets",
                              "--conformal", "aps", "--mondrian", "--alpha", "0.05"], capsys)
    assert code == 0, err
    assert "prediction sets: class-conditional APS sets at α = 0.05 (target coverage 95%), calibrated on 400" in out
    table = out.split("prediction sets:")[1].splitlines()
    assert [line.split()[0] for line in table[2:5]] == ["uncalibrated", "ts_nll", "ets"]


@pytest.mark.parametrize("extra, message", [
    (["--conformal", "aps", "--alpha", "0"], "alpha must be a number in (0, 1)"),
    (["--conformal", "aps", "--alpha", "1.5"], "alpha must be a number in (0, 1)"),
    (["--conformal", "apx"], "did you mean aps?"),
    (["--conformal", "aps", "--alpha", "0.01"], "has 50 samples; a 99% conformal quantile needs at least 99"),
    (["--alpha", "0.1"], "--alpha needs --conformal SCORE"),
    (["--conformal", "raps", "--lam", "-1"], "raps needs k_reg >= 0 and a finite lam >= 0"),
    (["--weighted"], "--weighted needs --conformal SCORE"),
    (["--conformal", "thr", "--mondrian", "--weighted"], "use weighted or mondrian, not both"),
])
def test_bad_requests_are_one_line(tmp_path, capsys, extra, message):
    logits_file(tmp_path / "val.npz", 50, 3, 0)
    logits_file(tmp_path / "test.npz", 50, 3, 1)
    code, out, err = run_cli([tmp_path / "test.npz", "--calib", tmp_path / "val.npz", *extra], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and message in err, err


def test_weighted_sets_on_files_are_the_predictor_with_domain_weights(tmp_path, capsys):
    """--weighted: every column's sets use the weights of a domain classifier between the calibration split and the
    evaluated file (here a shifted one: twice the logit scale)."""
    cal_logits, cal_labels = logits_file(tmp_path / "val.npz", 400, 4, 0)
    logits, labels = logits_file(tmp_path / "test.npz", 300, 4, 1, scale=6.0)
    code, out, err = run_cli([tmp_path / "test.npz", "--calib", tmp_path / "val.npz", "--calibrators", "ts_nll",
                              "--conformal", "thr", "--weighted", "--json"], capsys)
    assert code == 0, err
    got = json.loads(out)["conformal"]
    assert got["weighted"] is True
    cal_probs, probs = torch.softmax(cal_logits, 1), torch.softmax(logits, 1)
    weights = domain_weights(log_prob_features(cal_probs), log_prob_features(probs))
    predictor = ConformalPredictor("thr", 0.1).fit(cal_probs, cal_labels)
    expected = set_metrics(predictor.predict_set(probs, weights=weights), labels)
    assert got["columns"]["uncalibrated"]["coverage"] == pytest.approx(expected["coverage"], abs=1e-12)
    assert got["columns"]["uncalibrated"]["size_mean"] == pytest.approx(expected["size_mean"], abs=1e-12)
    code, out, err = run_cli([tmp_path / "test.npz", "--calib", tmp_path / "val.npz", "--conformal", "thr",
                              "--weighted"], capsys)
    assert code == 0 and "prediction sets: shift-weighted THR sets at α = 0.1" in out, err


def test_sets_need_a_calibration_split(tmp_path, capsys):
    logits_file(tmp_path / "test.npz", 50, 3, 1)
    code, out, err = run_cli([tmp_path / "test.npz", "--conformal", "thr"], capsys)
    assert code == 2 and "--conformal needs --calib VAL.npz" in err and len(err.strip().splitlines()) == 1


def test_run_under_shift_every_cell_is_the_sets_of_the_shifted_split(mnist1d_run, capsys):
    request = SetRequest("thr", 0.2)
    result = evaluate_run(mnist1d_run, shift="mnist1d_natural", severities=[4], write=False, progress=False,
                          sets=request)
    run = load_run(mnist1d_run, "cpu")
    ts = TemperatureScaling("nll").fit(run.val.logits.double(), run.val.labels)
    predictor = ConformalPredictor("thr", 0.2).fit(ts.transform(run.val.logits.double()), run.val.labels)
    assert result["conformal"]["quantiles"]["ts_nll"] == pytest.approx(predictor.quantile, abs=1e-12)
    family = result["shift"]["families"][0]
    x, y = shift_suites.shifted_split(run.bundle, "mnist1d_natural", family, 4, "test", 0)
    expected = set_metrics(predictor.predict_set(ts.transform(run.logits(x).double())), y)
    cell = next(c for c in result["shift"]["cells"] if c["family"] == family)["metrics"]
    assert set(cell["ts_nll"]["sets"]) == set(CELL_KEYS)
    for key in CELL_KEYS:
        assert cell["ts_nll"]["sets"][key] == pytest.approx(expected[key], abs=1e-12), key
    mean = next(m for m in result["shift"]["mean"] if m["severity"] == 4 and m["over"] == "all")["metrics"]
    cells = [c["metrics"]["ets"]["sets"]["size_mean"] for c in result["shift"]["cells"]]
    assert mean["ets"]["sets"]["size_mean"] == pytest.approx(np.mean(cells), abs=1e-12)
    code, out, err = run_cli([mnist1d_run, "--shift", "mnist1d_natural", "--severities", "4", "--conformal", "thr",
                              "--alpha", "0.2"], capsys)
    assert code == 0, err
    assert "prediction sets, mean over families" in out and "THR sets at α = 0.2" in out


def test_run_with_too_small_a_validation_split_is_one_line(mnist1d_run, capsys):
    n_val = load_run(mnist1d_run, "cpu").val.labels.shape[0]
    alpha = 1.0 / (n_val + 2)  # needs ⌈1/α⌉ − 1 = n_val + 1 samples
    code, out, err = run_cli([mnist1d_run, "--shift", "mnist1d_natural", "--conformal", "aps", "--alpha", alpha],
                             capsys)
    assert code == 2 and out == "" and f"has {n_val} samples" in err and len(err.strip().splitlines()) == 1


def test_predict_set_is_the_conformal_mask_of_the_calibrated_probabilities(mnist1d_run):
    model = metacal.load(mnist1d_run, device="cpu")
    run = load_run(mnist1d_run, "cpu")
    x = metacal.data.raw_inputs(run.bundle)[0][:300]
    sets = model.predict_set(x, alpha=0.1, method="aps")
    assert isinstance(sets, np.ndarray) and sets.dtype == np.bool_ and sets.shape == (300, model.num_classes)
    val_probs = model.calibrate(run.val.logits)
    predictor = ConformalPredictor("aps", 0.1).fit(val_probs, run.val.labels)
    expected = predictor.predict_set(torch.as_tensor(model.predict_proba(x)))
    assert np.array_equal(sets, expected.numpy())
    assert isinstance(model.predict_set(torch.as_tensor(x), method="thr"), torch.Tensor)
    with pytest.raises(ValueError, match=r"^alpha must be a number in \(0, 1\)"):
        model.predict_set(x, alpha=1.0)


def test_weighted_predict_set_uses_the_domain_weights_of_the_batch(mnist1d_run):
    """weighted=True: the batch is the shifted sample; the sets are the predictor's with the domain classifier's
    weights between the raw validation probabilities and the batch's."""
    model = metacal.load(mnist1d_run, device="cpu")
    run = load_run(mnist1d_run, "cpu")
    x, _ = shift_suites.shifted_split(run.bundle, "mnist1d_natural", "translation", 5, "test", 0)
    sets = model.predict_set(x, alpha=0.1, method="thr", weighted=True)
    predictor = ConformalPredictor("thr", 0.1).fit(model.calibrate(run.val.logits), run.val.labels)
    raw = torch.softmax(run.logits(x).double(), 1)
    weights = domain_weights(log_prob_features(run.val.probs), log_prob_features(raw))
    expected = predictor.predict_set(model.calibrate(run.logits(x)), weights=weights)
    assert torch.equal(torch.as_tensor(sets), expected)
    assert not torch.equal(torch.as_tensor(sets), torch.as_tensor(model.predict_set(x, alpha=0.1, method="thr")))
    with pytest.raises(ValueError, match="weighted or mondrian"):
        model.predict_set(x, method="thr", mondrian=True, weighted=True)
