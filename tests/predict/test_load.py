"""metacal.load: a finished run as a calibrated classifier, rebuilt from config.yaml + predictor.json + the
selected checkpoint; its probabilities reproduce the run's own test predictions after temperature scaling."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
import torch

import metacal
from metacal.posthoc import registry
from metacal.predictions import Predictions, load_predictions
from metacal.predict.network import RunError
from tests.predict.conftest import copy_run, mnist1d_test_inputs


def after_ts(run) -> torch.Tensor:
    """softmax(logits / T) of predictions/test.npz with metrics.json's T: what the run reported after TS."""
    temperature = json.loads((run / "metrics.json").read_text())["test_after_ts"]["temperature"]
    return torch.softmax(load_predictions(run / "predictions" / "test.npz").logits.double() / temperature, dim=1)


def test_a_run_writes_its_predictor_file_and_temperature(mnist1d_run):
    record = json.loads((mnist1d_run / "predictor.json").read_text())
    assert record["model"] == "mlp" and record["model_options"] == {"hidden": [32]}
    assert record["num_classes"] == 10 and record["classes"] == [str(c) for c in range(10)]
    assert record["inputs"] == {"kind": "vector", "input_shape": [1, 40], "mean": [0.0], "std": [1.0]}
    state = torch.load(mnist1d_run / "calibration" / "ts_nll.pt", weights_only=True)
    metrics = json.loads((mnist1d_run / "metrics.json").read_text())
    assert state["calibrator"] == "ts_nll"
    assert float(state["temperature"]) == metrics["test_after_ts"]["temperature"]


def test_predict_proba_reproduces_the_test_predictions_after_ts(mnist1d_run):
    x, y = mnist1d_test_inputs(mnist1d_run)
    model = metacal.load(mnist1d_run, device="cpu")
    probs = model.predict_proba(x)
    assert probs.dtype == torch.float64 and probs.shape == (400, 10)
    assert float((probs - after_ts(mnist1d_run)).abs().max()) <= 1e-6
    assert torch.equal(model.logits(x), load_predictions(mnist1d_run / "predictions" / "test.npz").logits.float())
    labels = model.predict(x)
    assert labels.dtype == torch.int64 and torch.equal(labels, probs.argmax(dim=1))
    metrics = json.loads((mnist1d_run / "metrics.json").read_text())
    assert model.temperature == metrics["test_after_ts"]["temperature"]
    assert float((labels != y).double().mean()) == pytest.approx(metrics["test_after_ts"]["error"], abs=1e-12)
    assert model.num_classes == 10 and model.calibrator_name == "ts_nll"


def test_image_run_from_uint8_images(cifar_run, cifar10_dir):
    model = metacal.load(cifar_run, device="cpu")
    images = cifar10_dir.test_images  # uint8 (20, 3, 32, 32), the official test batch
    probs = model.predict_proba(images)  # numpy in, numpy out
    assert isinstance(probs, np.ndarray) and probs.dtype == np.float64 and probs.shape == (20, 10)
    assert np.abs(probs - after_ts(cifar_run).numpy()).max() <= 1e-6
    channels_last = model.predict_proba(np.ascontiguousarray(images.transpose(0, 2, 3, 1)))
    assert np.array_equal(channels_last, probs)
    unit = model.predict_proba(torch.from_numpy(images).float() / 255)
    assert np.abs(unit.numpy() - probs).max() <= 1e-6
    assert model.classes == cifar10_dir.classes
    with pytest.raises(ValueError, match=r"^images must have shape \(N, 3, 32, 32\) or \(N, 32, 32, 3\) for this "
                                         r"model; got \(20, 1, 32, 32\)$"):
        model.predict_proba(images[:, :1])
    with pytest.raises(ValueError, match=r"float images must be in \[0, 1\]"):
        model.predict_proba(images.astype(np.float32))


def test_outputs_follow_the_kind_of_input(mnist1d_run):
    """Tensors in: CPU tensors out; numpy arrays or lists in: numpy arrays out (float64 N×K, int64 N)."""
    x, _ = mnist1d_test_inputs(mnist1d_run)
    model = metacal.load(mnist1d_run, device="cpu")
    probs, labels = model.predict_proba(x), model.predict(x)
    assert isinstance(probs, torch.Tensor) and probs.dtype == torch.float64 and probs.shape == (400, 10)
    assert isinstance(labels, torch.Tensor) and labels.dtype == torch.int64 and labels.shape == (400,)
    for raw in (x.numpy(), x[:5].tolist()):
        as_numpy, predicted = model.predict_proba(raw), model.predict(raw)
        n = len(raw)
        assert type(as_numpy) is np.ndarray and as_numpy.dtype == np.float64 and as_numpy.shape == (n, 10)
        assert type(predicted) is np.ndarray and predicted.dtype == np.int64 and predicted.shape == (n,)
        assert np.array_equal(as_numpy, probs[:n].numpy()) and np.array_equal(predicted, labels[:n].numpy())
        assert np.array_equal(predicted, as_numpy.argmax(axis=1))


def test_uncalibrated_and_wrong_inputs(mnist1d_run):
    x, _ = mnist1d_test_inputs(mnist1d_run)
    model = metacal.load(mnist1d_run, calibrator=None, device="cpu")
    logits = load_predictions(mnist1d_run / "predictions" / "test.npz").logits
    assert torch.equal(model.predict_proba(x), torch.softmax(logits.double(), dim=1))
    assert model.temperature is None and model.calibrator_name is None
    with pytest.raises(ValueError, match=r"^inputs must have shape \(N, 1, 40\); got \(400, 40\)$"):
        model.predict_proba(x[:, 0])
    with pytest.raises(ValueError, match="did you mean dirichlet"):
        metacal.load(mnist1d_run, calibrator="dirichlett")
    x_bad = x.clone()
    x_bad[5, 0, 0] = float("inf")
    with pytest.raises(ValueError, match=r"^inputs must be finite; sample 5 has NaN or infinite values$"):
        model.predict(x_bad)


def test_a_device_this_machine_lacks_is_one_line(mnist1d_run):
    absent = f"cuda:{torch.cuda.device_count()}"  # one past the last GPU: absent on every machine
    with pytest.raises(ValueError) as info:
        metacal.load(mnist1d_run, device=absent)
    assert str(info.value) == f"device='{absent}': no such CUDA device on this machine; use device='cpu'"
    with pytest.raises(ValueError) as info:
        metacal.load(mnist1d_run, device="gpu")
    assert str(info.value) == "device='gpu' is not a device (cpu, cuda, cuda:0)"
    model = metacal.load(mnist1d_run, device="cpu")
    with pytest.raises(ValueError, match="no such CUDA device"):
        model.to(absent)
    assert model.device == torch.device("cpu")


def test_another_calibrator_is_fitted_once_then_read(mnist1d_run, tmp_path, monkeypatch):
    run = copy_run(mnist1d_run, tmp_path / "run")
    x, _ = mnist1d_test_inputs(mnist1d_run)
    first = metacal.load(run, calibrator="dirichlet", device="cpu").predict_proba(x)
    saved = run / "calibration" / "dirichlet.pt"
    stamp = os.stat(saved).st_mtime_ns
    val = load_predictions(run / "predictions" / "val.npz")
    test = load_predictions(run / "predictions" / "test.npz")
    expected = registry.calibrate("dirichlet", val, test)
    assert float((first - expected).abs().max()) <= 1e-6

    def refuse(*args, **kwargs):
        raise AssertionError("refitted a saved calibrator")

    monkeypatch.setattr(registry, "fit_calibrator", refuse)
    second = metacal.load(run, calibrator="dirichlet", device="cpu").predict_proba(x)
    assert torch.equal(second, first) and os.stat(saved).st_mtime_ns == stamp


def test_a_run_without_predictor_files_is_completed_once(mnist1d_run, tmp_path):
    run = copy_run(mnist1d_run, tmp_path / "old")
    (run / "predictor.json").unlink()
    (run / "calibration" / "ts_nll.pt").unlink()
    x, _ = mnist1d_test_inputs(mnist1d_run)
    probs = metacal.load(run, device="cpu").predict_proba(x)
    assert float((probs - after_ts(mnist1d_run)).abs().max()) <= 1e-6
    assert json.loads((run / "predictor.json").read_text()) == json.loads((mnist1d_run / "predictor.json").read_text())
    assert torch.load(run / "calibration" / "ts_nll.pt", weights_only=True)["temperature"] == torch.load(
        mnist1d_run / "calibration" / "ts_nll.pt", weights_only=True)["temperature"]


def test_runs_that_cannot_be_loaded(mnist1d_run, tmp_path):
    with pytest.raises(RunError, match="is not a directory"):
        metacal.load(tmp_path / "missing")
    run = copy_run(mnist1d_run, tmp_path / "py")
    config = (run / "config.yaml").read_text().replace("name: mlp", "name: python:MyNet", 1)
    assert "python:MyNet" in config
    (run / "config.yaml").write_text(config)
    with pytest.raises(RunError, match=r"trained from Python .*load_initial_weights\(model, "):
        metacal.load(run)
    bare = copy_run(mnist1d_run, tmp_path / "bare")
    for link in (bare / "checkpoints").iterdir():
        if link.is_symlink():
            link.unlink()
    for folder in (bare / "checkpoints").iterdir():
        shutil.rmtree(folder)
    with pytest.raises(RunError, match="no checkpoint"):
        metacal.load(bare)


def test_predictions_helper_matches_registry_application(mnist1d_run):
    """The calibrated probabilities are the registry's map applied to the network's logits (float64)."""
    x, _ = mnist1d_test_inputs(mnist1d_run)
    model = metacal.load(mnist1d_run, calibrator="ts_ece", device="cpu")
    logits = model.logits(x).double()
    expected = registry.apply_calibrator("ts_ece", model.calibrator, Predictions.from_logits(logits, torch.zeros(400)))
    assert torch.equal(model.predict_proba(x), expected)
    assert model.temperature in [t / 10 for t in range(1, 101)]  # TS-ECE searches the grid 0.1 … 10.0
