"""TorchScript export: the file alone (torch.jit.load) maps raw inputs to the probabilities of predict_proba."""

from __future__ import annotations

import pytest
import torch

import metacal
from tests.predictor.conftest import mnist1d_test_inputs

pytestmark = pytest.mark.filterwarnings("ignore:.*torch.jit.*:FutureWarning")  # torch.jit.load's deprecation note


@pytest.mark.parametrize("calibrator", ["ts_nll", "dirichlet", "ets", "vector", None])
def test_export_reproduces_predict_proba(mnist1d_run, tmp_path, calibrator):
    x, _ = mnist1d_test_inputs(mnist1d_run)
    model = metacal.load(mnist1d_run, calibrator=calibrator, device="cpu")
    path = model.export(tmp_path / "model.pt")
    exported = torch.jit.load(str(path))
    probs = exported(x)
    assert not probs.requires_grad and probs.dtype == torch.float64 and probs.shape == (400, 10)
    assert float((probs - model.predict_proba(x)).abs().max()) <= 1e-6


def test_image_export_takes_unit_floats_and_uint8(cifar_run, cifar10_dir, tmp_path):
    model = metacal.load(cifar_run, calibrator="ets", device="cpu")  # 5 validation images: too few for matrix
    images = torch.from_numpy(cifar10_dir.test_images)  # uint8 (20, 3, 32, 32)
    exported = torch.jit.load(str(model.export(tmp_path / "c10.pt")))
    expected = model.predict_proba(images)
    assert float((exported(images.float() / 255) - expected).abs().max()) <= 1e-6
    assert float((exported(images) - expected).abs().max()) <= 1e-6
    with pytest.raises(Exception, match=r"inputs must have shape \(N, 3, 32, 32\), channels first"):
        exported(images.permute(0, 2, 3, 1).float())


@pytest.mark.parametrize("calibrator", ["hb", "isotonic"])
def test_lookup_calibrators_are_not_exported(mnist1d_run, tmp_path, calibrator):
    model = metacal.load(mnist1d_run, calibrator=calibrator, device="cpu")
    with pytest.raises(ValueError, match=f"^calibrator {calibrator} cannot be exported to TorchScript; use "
                                         "metacal.load"):
        model.export(tmp_path / "model.pt")
    assert not (tmp_path / "model.pt").exists()


def test_a_network_that_cannot_be_traced_is_one_line(mnist1d_run, tmp_path):
    model = metacal.load(mnist1d_run, device="cpu")

    class Untraceable(torch.nn.Module):
        def forward(self, x):
            return {"no": x}  # a dict output: tracing refuses it

    model.network = Untraceable()
    with pytest.raises(ValueError, match="^the network cannot be exported to TorchScript"):
        model.export(tmp_path / "model.pt")
    assert not (tmp_path / "model.pt").exists()
