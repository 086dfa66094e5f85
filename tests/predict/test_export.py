"""Export: the file alone maps raw inputs to the probabilities of predict_proba — a .pt2 program through
torch.export.load (torch only, no deprecation warning), an .onnx model through onnxruntime (within 1e-5)."""

from __future__ import annotations

import importlib.util
import warnings

import numpy as np
import pytest
import torch

import metacal
from metacal.posthoc import registry
from metacal.predict.export import exportable
from tests.predict.conftest import mnist1d_test_inputs


def load_program(path):
    """torch.export.load(path).module(), failing the test on any warning it prints."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return torch.export.load(str(path)).module()


# every exportable calibrator that a run's predictions/val.npz can fit (ts_perturbed needs its perturbed copy)
@pytest.mark.parametrize("calibrator", [*(n for n in exportable() if not registry.spec(n).needs_perturbed), None])
def test_pt2_export_reproduces_predict_proba(mnist1d_run, tmp_path, calibrator):
    x, _ = mnist1d_test_inputs(mnist1d_run)
    model = metacal.load(mnist1d_run, calibrator=calibrator, device="cpu")
    program = load_program(model.export(tmp_path / "model.pt2"))
    with torch.no_grad():
        probs = program(x)
        single = program(x[:1])  # the batch dimension is free: one row works too
    assert probs.dtype == torch.float64 and probs.shape == (400, 10)
    assert float((probs - model.predict_proba(x)).abs().max()) <= 1e-12
    assert float((single - model.predict_proba(x[:1])).abs().max()) <= 1e-12


@pytest.mark.parametrize("calibrator", ["ts_nll", "dirichlet", "ets", None])
def test_onnx_export_reproduces_predict_proba(mnist1d_run, tmp_path, calibrator):
    import onnxruntime

    x, _ = mnist1d_test_inputs(mnist1d_run)
    model = metacal.load(mnist1d_run, calibrator=calibrator, device="cpu")
    session = onnxruntime.InferenceSession(str(model.export(tmp_path / "model.onnx")),
                                           providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["x"] and [o.name for o in session.get_outputs()] == ["probs"]
    inputs = x.numpy()
    probs = session.run(None, {"x": inputs})[0]
    expected = model.predict_proba(inputs)
    assert probs.dtype == np.float64 and probs.shape == (400, 10)
    assert np.abs(probs - expected).max() <= 1e-5
    assert np.abs(session.run(None, {"x": inputs[:3]})[0] - expected[:3]).max() <= 1e-5


def test_image_export_takes_unit_floats(cifar_run, cifar10_dir, tmp_path):
    import onnxruntime

    model = metacal.load(cifar_run, calibrator="ets", device="cpu")  # 5 validation images: too few for matrix
    images = cifar10_dir.test_images  # uint8 (20, 3, 32, 32)
    unit = torch.from_numpy(images).float() / 255
    expected = model.predict_proba(images)
    program = load_program(model.export(tmp_path / "c10.pt2"))
    assert np.abs(program(unit).numpy() - expected).max() <= 1e-6
    with pytest.raises(Exception):  # the program's own shape guard: channels last is refused
        program(unit.permute(0, 2, 3, 1).contiguous())
    session = onnxruntime.InferenceSession(str(model.export(tmp_path / "c10.onnx")),
                                           providers=["CPUExecutionProvider"])
    assert np.abs(session.run(None, {"x": unit.numpy()})[0] - expected).max() <= 1e-5


@pytest.mark.parametrize("calibrator", [n for n in registry.available() if n not in exportable()])
def test_lookup_calibrators_are_not_exported(mnist1d_run, tmp_path, calibrator):
    model = metacal.load(mnist1d_run, calibrator=calibrator, device="cpu")
    with pytest.raises(ValueError, match=f"^calibrator {calibrator} cannot be exported; use metacal.load"):
        model.export(tmp_path / "model.pt2")
    assert not (tmp_path / "model.pt2").exists()


def test_other_suffixes_and_missing_onnx_packages_are_one_line(mnist1d_run, tmp_path, monkeypatch):
    model = metacal.load(mnist1d_run, device="cpu")
    with pytest.raises(ValueError, match=r"^cannot export to model\.pt: name a \.pt2 file \(torch\.export\) or an "
                                         r"\.onnx file \(ONNX\) \(TorchScript is no longer written"):
        model.export(tmp_path / "model.pt")
    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxscript" else found(name, *a))
    with pytest.raises(ValueError) as info:
        model.export(tmp_path / "model.onnx")
    assert str(info.value) == ("exporting to ONNX needs the packages onnx and onnxscript (not installed: "
                               "onnxscript): pip install 'metacal[export]'")
    assert list(tmp_path.iterdir()) == []


def test_a_network_that_cannot_be_exported_is_one_line(mnist1d_run, tmp_path):
    model = metacal.load(mnist1d_run, device="cpu")

    class Unexportable(torch.nn.Module):
        def forward(self, x):
            return {"no": x}  # a dict output: the calibrator cannot take it

    model.network = Unexportable()
    with pytest.raises(ValueError, match="^the network cannot be exported"):
        model.export(tmp_path / "model.pt2")
    assert not (tmp_path / "model.pt2").exists()
