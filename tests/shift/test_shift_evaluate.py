"""A finished run evaluated as it is (metacal.shift.evaluate): the clean test set and severity 0 reproduce the run's
own metrics.json exactly; the user's arrays of the clean test set reproduce it too; the calibrators' columns are
the fitted maps applied to the cell's logits; OOD sets and files; every bad input is one line, exit 2, and
writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from metacal.data import shift_suites
from metacal.data.ood_sets import ood_inputs
from metacal.evaluate.cli import main
from metacal.metrics import summary
from metacal.metrics.ood import ood_detection
from metacal.posthoc import TemperatureScaling
from metacal.predictions import load_predictions
from metacal.predict.network import load_run
from metacal.shift.evaluate import evaluate_run

COMMON_KEYS = ("n", "error", "nll", "brier", "ece", "mce", "ace", "rmsce", "ece_sweep", "classwise_ece", "aurc",
               "augrc", "risk_at_coverage", "coverage_at_risk")
# mnist1d_run, cifar_run: tiny finished runs shared by the session (tests/conftest.py)


def run_cli(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_same_metrics(ours: dict, theirs: dict) -> None:
    for key in COMMON_KEYS:
        assert ours[key] == theirs[key], key


def test_clean_and_severity_zero_reproduce_metrics_json(mnist1d_run):
    result = evaluate_run(mnist1d_run, shift="mnist1d_natural", severities=[1, 3], write=False, progress=False)
    metrics = json.loads((mnist1d_run / "metrics.json").read_text())
    for part in (result["clean"], result["shift"]["clean"]):
        assert_same_metrics(part["uncalibrated"], metrics["test"])
        assert_same_metrics(part["ts_nll"], metrics["test_after_ts"])
    assert result["calibrators"]["ts_nll"]["temperature"] == metrics["test_after_ts"]["temperature"]
    families = result["shift"]["families"]
    assert len(result["shift"]["cells"]) == 2 * len(families)
    assert set(result["shift"]["fit_families"]) | set(result["shift"]["held_out_families"]) == set(families) - {"all"}
    assert result["shift"]["held_out_families"] == ["scale", "translation"]  # "all" moves the fit families' too
    assert 2 * len(result["shift"]["fit_families"]) <= len(families)


def test_a_cell_is_the_network_on_the_shifted_split_under_each_fitted_map(mnist1d_run):
    result = evaluate_run(mnist1d_run, shift="mnist1d_natural", severities=[5], write=False, progress=False)
    run = load_run(mnist1d_run, "cpu")
    family = result["shift"]["families"][0]
    x, y = shift_suites.shifted_split(run.bundle, "mnist1d_natural", family, 5, "test", 0)
    logits = run.logits(x)
    cell = next(c for c in result["shift"]["cells"] if c["family"] == family)["metrics"]
    t = result["calibrators"]["ts_nll"]["temperature"]
    expected = summary(torch.softmax(logits.double() / t, 1), y, 15, binning_free=False)
    assert cell["ts_nll"]["ece"] == pytest.approx(float(expected["ece"]), abs=1e-12)
    assert cell["uncalibrated"]["error"] == pytest.approx(float((logits.argmax(1) != y).double().mean()), abs=1e-12)
    # perturbation TS: T fitted by NLL on the clean and the perturbed validation predictions together
    xp, yp = shift_suites.perturbed_split(run.bundle, "mnist1d_natural", "val", 0)
    both = torch.cat([run.val.logits, run.logits(xp)]).double()
    t_pert = TemperatureScaling("nll").fit(both, torch.cat([run.val.labels, yp])).temperature
    assert result["calibrators"]["ts_perturbed"]["temperature"] == pytest.approx(t_pert, rel=1e-6)
    # the mean rows average the cells
    mean = next(m for m in result["shift"]["mean"] if m["severity"] == 5 and m["over"] == "all")["metrics"]
    cells = [c["metrics"]["ets"]["nll"] for c in result["shift"]["cells"]]
    assert mean["ets"]["nll"] == pytest.approx(np.mean(cells), abs=1e-12)


def test_inputs_of_the_clean_test_set_reproduce_metrics_json(mnist1d_run, tmp_path, capsys):
    run = load_run(mnist1d_run, "cpu")
    test = run.bundle.test
    x = torch.stack([test[i][0] for i in range(len(test))]).numpy()
    y = np.array([int(test[i][1]) for i in range(len(test))])
    path = tmp_path / "arrays.npz"
    np.savez(path, x=x, y=y, x_ood=x[:50] * 3.0)
    code, out, err = run_cli([mnist1d_run, "--inputs", path, "--json"], capsys)
    assert code == 0, err
    result = json.loads(out)
    metrics = json.loads((mnist1d_run / "metrics.json").read_text())
    assert_same_metrics(result["inputs"]["metrics"]["uncalibrated"], metrics["test"])
    assert set(result["inputs"]["ood"]["uncalibrated"]) == {"msp", "max_logit", "energy", "entropy"}
    assert (mnist1d_run / "shift" / "inputs_arrays.json").is_file()


def test_ood_set_and_file_against_the_clean_test_set(mnist1d_run, tmp_path):
    result = evaluate_run(mnist1d_run, ood="digits", write=True, progress=False)
    run = load_run(mnist1d_run, "cpu")
    inside = load_predictions(mnist1d_run / "predictions" / "test.npz").logits
    outside = run.logits(ood_inputs(run.bundle, "digits", 0))
    expected = ood_detection(inside, outside)
    for score, values in expected.items():
        for key, value in values.items():
            assert result["ood"]["uncalibrated"][score][key] == pytest.approx(float(value), abs=1e-12)
    saved = json.loads((mnist1d_run / "shift" / "ood_digits.json").read_text())
    assert saved["ood"] == result["ood"]
    np.savez(tmp_path / "far.npz", logits=outside.numpy())  # the same OOD predictions as a file
    from_file = evaluate_run(mnist1d_run, ood=tmp_path / "far.npz", write=False)
    for score, values in result["ood"]["uncalibrated"].items():
        assert from_file["ood"]["uncalibrated"][score] == pytest.approx(values, abs=1e-12)


def test_image_run_every_corruption_and_the_table(cifar_run, capsys):
    code, out, err = run_cli([cifar_run, "--shift", "corruptions", "--severities", "2", "5"], capsys)
    assert code == 0, err
    assert "held out:" in out and "ECE % per family" in out
    saved = json.loads((cifar_run / "shift" / "corruptions.json").read_text())
    families = shift_suites.suite_families(load_run(cifar_run, "cpu").bundle, "corruptions")
    assert len(families) >= 8 and saved["shift"]["families"] == families
    assert [(c["family"], c["severity"]) for c in saved["shift"]["cells"]] == [(f, s) for f in families
                                                                                for s in (2, 5)]
    metrics = json.loads((cifar_run / "metrics.json").read_text())
    assert_same_metrics(saved["shift"]["clean"]["uncalibrated"], metrics["test"])


@pytest.mark.parametrize("argv, message", [
    (["--shift", "corruption"], "did you mean"),  # MNIST-1D: an image suite, misspelt
    (["--shift", "corruptions"], "mnist1d_natural"),  # not for this dataset: names the suites that fit
    (["--shift", "mnist1d_natural", "--severities", "0"], "severities must be integers 1..5"),
    (["--ood", "digitz"], "did you mean"),
    (["--shift", "mnist1d_natural", "--device", "gpu"], "--device gpu is not a device (cpu, cuda, cuda:0)"),
    (["--shift", "mnist1d_natural", "--device", f"cuda:{torch.cuda.device_count()}"],  # absent on every machine
     "no such CUDA device on this machine; use --device cpu"),
])
def test_bad_requests_are_one_line_and_write_nothing(mnist1d_run, argv, message, capsys):
    before = sorted(p.name for p in (mnist1d_run / "shift").glob("*")) if (mnist1d_run / "shift").is_dir() else []
    code, out, err = run_cli([mnist1d_run, *argv], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and message in err, err
    after = sorted(p.name for p in (mnist1d_run / "shift").glob("*")) if (mnist1d_run / "shift").is_dir() else []
    assert after == before


def test_bad_inputs_files_are_one_line(mnist1d_run, tmp_path, capsys):
    cases = {
        "shape": (dict(x=np.zeros((5, 1, 39), np.float32), y=np.zeros(5, int)), "shape"),
        "labels": (dict(x=np.zeros((5, 1, 40), np.float32), y=np.array([0, 1, 2, 3, 10])), "labels must lie in 0..9"),
        "no_y": (dict(x=np.zeros((5, 1, 40), np.float32)), "lacks 'y'"),
        "nan": (dict(x=np.full((5, 1, 40), np.nan, np.float32), y=np.zeros(5, int)), "inputs must be finite"),
    }
    for name, (arrays, message) in cases.items():
        path = tmp_path / f"{name}.npz"
        np.savez(path, **arrays)
        code, out, err = run_cli([mnist1d_run, "--inputs", path], capsys)
        assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, (name, err)
        assert not (mnist1d_run / "shift" / f"inputs_{name}.json").exists()


def test_a_run_without_a_checkpoint_is_one_line(mnist1d_run, tmp_path, capsys):
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "config.yaml").write_text((mnist1d_run / "config.yaml").read_text())
    (bare / "predictions").mkdir()
    code, _, err = run_cli([bare, "--shift", "mnist1d_natural"], capsys)
    assert code == 2 and "has no checkpoint to evaluate" in err and len(err.strip().splitlines()) == 1
    assert not (bare / "shift").exists()


def test_perturbed_validation_is_saved_for_calib_and_the_report(mnist1d_run, capsys):
    from metacal import metrics
    from metacal.report.posthoc_columns import posthoc_metrics
    from metacal.run.layout import Run

    result = evaluate_run(mnist1d_run, shift="mnist1d_natural", severities=[2], progress=False)
    saved = mnist1d_run / "shift" / "val_mnist1d_natural.npz"
    val = load_predictions(saved)
    assert val.perturbed is not None and torch.equal(val.logits, load_predictions(
        mnist1d_run / "predictions" / "val.npz").logits)
    t = result["calibrators"]["ts_perturbed"]["temperature"]
    test = load_predictions(mnist1d_run / "predictions" / "test.npz")
    expected = float(metrics.ece(torch.softmax(test.logits.double() / t, 1), test.labels, 15))
    code, out, err = run_cli([mnist1d_run / "predictions" / "test.npz", "--calib", saved, "--calibrators",
                              "ts_perturbed", "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["after_ts_perturbed"]["ece"] == pytest.approx(expected, abs=1e-9)
    record = Run(mnist1d_run, "ce", 0)
    notes: list[str] = []
    row = posthoc_metrics(record.validation_for_posthoc(), test, calibrators=["ts_perturbed"], notes=notes)
    assert row["ece_ts_perturbed"] == pytest.approx(expected, abs=1e-9) and notes == []
    plain = posthoc_metrics(record.predictions("val"), test, calibrators=["ts_perturbed"], notes=notes)
    assert np.isnan(plain["ece_ts_perturbed"]) and "--shift SUITE first" in notes[0]


def test_per_sample_top_labels_at_severities_0_and_3(mnist1d_run):
    """shift/<suite>_samples.npz: severity 0 is the clean test split's top labels; severity 3 pools the held-out
    families, so its mean correctness is 1 − the held-out mean error at severity 3 (equal family sizes); the TS
    column's confidences are the tempered softmax's."""
    from metacal.shift.samples import load_samples, samples_path

    result = evaluate_run(mnist1d_run, shift="mnist1d_natural", severities=[3], progress=False)
    samples = load_samples(samples_path(mnist1d_run, "mnist1d_natural"))
    assert set(samples) == {(s, c) for s in (0, 3) for c in ("uncalibrated", "ts_nll", "ts_perturbed")}
    test = load_predictions(mnist1d_run / "predictions" / "test.npz")
    confidence, correct = samples[(0, "uncalibrated")]
    assert np.allclose(confidence, test.probs.max(1).values.float().numpy())
    assert np.array_equal(correct, (test.probs.argmax(1) == test.labels).numpy())
    held = result["shift"]["held_out_families"]
    mean3 = next(m for m in result["shift"]["mean"] if m["severity"] == 3 and m["over"] == "held_out")["metrics"]
    for column in ("uncalibrated", "ts_nll"):
        confidence, correct = samples[(3, column)]
        assert len(correct) == len(test.labels) * len(held)
        assert 1 - correct.mean() == pytest.approx(mean3[column]["error"], abs=1e-12)
    t = result["calibrators"]["ts_nll"]["temperature"]
    expected = torch.softmax(test.logits.double() / t, 1).max(1).values.float().numpy()
    assert np.allclose(samples[(0, "ts_nll")][0], expected, atol=1e-6)
