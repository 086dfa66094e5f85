"""A calibrated model as one file: raw inputs → normalisation → network → calibrator → probabilities.

    python -m metacal.predict RUN --export model.pt2     # torch.export: needs torch only, not metacal
    probs = torch.export.load("model.pt2").module()(x)   # N×K float64, rows summing to 1
    python -m metacal.predict RUN --export model.onnx    # ONNX (pip install 'metacal[export]' to write it)
    probs = onnxruntime.InferenceSession("model.onnx").run(None, {"x": x})[0]

``x`` is float32 shaped (N, *input_shape), any N ≥ 1: for images channels first in [0, 1] (uint8 images: divide
by 255 first), normalised inside by the run's mean and std; for other data the numbers as
:meth:`metacal.predictor.CalibratedModel.predict_proba` takes them. Another shape or dtype is refused by the
loaded program itself. The network is captured by ``torch.export`` on CPU in eval mode with the batch dimension
dynamic; the calibrator is a pure tensor map in float64: temperature scaling (ts_nll, ts_ece, ts_perturbed),
ensemble TS (ets), vector and matrix scaling, Dirichlet calibration, or none (softmax). Histogram binning and
isotonic regression are lookups that are not exported (one-line ValueError). The ONNX file is converted from the
same captured program (``torch.onnx.export``, which needs ``onnx`` and ``onnxscript``); input ``x``, output
``probs``.

TorchScript (``torch.jit``) is not written: on torch 2.14 ``torch.jit.load`` prints a deprecation warning
pointing to ``torch.export``.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import io
from pathlib import Path
from typing import Any

import torch
from torch import nn

from metacal.atomic_io import write_bytes_atomic
from metacal.posthoc.affine import AffineCalibrator
from metacal.posthoc.ensemble_ts import EnsembleTemperatureScaling
from metacal.posthoc.temperature import TemperatureScaling

#: file suffix → format
FORMATS = {".pt2": "torch.export", ".onnx": "ONNX"}
#: modules torch.onnx.export imports to write an ONNX file
ONNX_MODULES = ("onnx", "onnxscript")
INSTALL = "pip install 'metacal[export]'"


class Softmax(nn.Module):
    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return torch.softmax(z, dim=1)


class Temperature(nn.Module):
    """softmax(z / T)."""

    def __init__(self, temperature: float) -> None:
        super().__init__()
        self.register_buffer("temperature", torch.tensor(float(temperature), dtype=torch.float64))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return torch.softmax(z / self.temperature, dim=1)


class Ensemble(nn.Module):
    """w₁·softmax(z/T) + w₂·softmax(z) + w₃/K (ensemble temperature scaling)."""

    def __init__(self, temperature: float, weights: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("temperature", torch.tensor(float(temperature), dtype=torch.float64))
        self.register_buffer("weights", weights.detach().double().cpu().clone())

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        parts = torch.stack([torch.softmax(z / self.temperature, dim=1), torch.softmax(z, dim=1),
                             torch.full_like(z, 1.0 / z.shape[1])])
        return torch.einsum("j,jnk->nk", self.weights, parts)


class Affine(nn.Module):
    """softmax(W x + b), x = z or log_softmax(z) (vector, matrix scaling; Dirichlet calibration)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor, log_probs: bool) -> None:
        super().__init__()
        self.register_buffer("weight", weight.detach().double().cpu().clone())
        self.register_buffer("bias", bias.detach().double().cpu().clone())
        self.log_probs = bool(log_probs)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        x = torch.log_softmax(z, dim=1) if self.log_probs else z
        if self.weight.dim() == 1:
            return torch.softmax(x * self.weight + self.bias, dim=1)
        return torch.softmax(x @ self.weight.T + self.bias, dim=1)


class Exported(nn.Module):
    """Raw float32 inputs → calibrated float64 probabilities (module docstring)."""

    def __init__(self, network: nn.Module, calibrator: nn.Module, image: bool, mean: list[float],
                 std: list[float]) -> None:
        super().__init__()
        self.network = network
        self.calibrator = calibrator
        self.image = image
        channels = [-1, 1, 1] if image else [1]
        self.register_buffer("mean", torch.tensor(mean if image else [0.0], dtype=torch.float32).view(channels))
        self.register_buffer("std", torch.tensor(std if image else [1.0], dtype=torch.float32).view(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.image:  # (x − mean) / std per channel, the arithmetic of metacal.data.model_inputs
            x = (x - self.mean) / self.std
        return self.calibrator(self.network(x).to(torch.float64))


EXPORTABLE = ("ts_nll", "ts_ece", "ts_perturbed", "ets", "vector", "matrix", "dirichlet")


def check_exportable(name: str | None) -> None:
    """One-line ValueError unless calibrator ``name`` (None: softmax) has a tensor map."""
    if name is not None and name not in EXPORTABLE:
        raise ValueError(f"calibrator {name} cannot be exported; use metacal.load (exportable: "
                         f"{', '.join(EXPORTABLE)}, none)")


def export_format(path: str | Path) -> str:
    """The format ``path`` asks for by its suffix (:data:`FORMATS`); a one-line ValueError for another suffix, or
    for .onnx when the modules that write ONNX are not installed."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        why = " (TorchScript is no longer written: torch.jit.load is deprecated)" if suffix in (".pt", ".pth") else ""
        raise ValueError(f"cannot export to {Path(path).name}: name a .pt2 file (torch.export) or an .onnx file "
                         f"(ONNX){why}")
    if suffix == ".onnx":
        missing = [m for m in ONNX_MODULES if importlib.util.find_spec(m) is None]
        if missing:
            raise ValueError(f"exporting to ONNX needs the packages {' and '.join(ONNX_MODULES)} (not installed: "
                             f"{', '.join(missing)}): {INSTALL}")
    return FORMATS[suffix]


def calibrator_module(name: str | None, fitted: Any) -> nn.Module:
    """The exportable map of a fitted calibrator; HB, isotonic → one-line ValueError."""
    check_exportable(name)
    if fitted is None:
        return Softmax()
    if isinstance(fitted, TemperatureScaling):
        return Temperature(fitted.temperature)
    if isinstance(fitted, EnsembleTemperatureScaling):
        return Ensemble(fitted.temperature, fitted.weights)
    if isinstance(fitted, AffineCalibrator) and fitted.weight is not None and fitted.bias is not None:
        return Affine(fitted.weight, fitted.bias, fitted.log_probs)
    raise ValueError(f"calibrator {name} ({type(fitted).__name__}) has no tensor map; use metacal.load")


def exported_program(model: Any) -> torch.export.ExportedProgram:
    """``model`` (a :class:`metacal.predictor.CalibratedModel`) captured by ``torch.export`` with a dynamic
    batch dimension; a network that cannot be captured is a one-line ValueError."""
    head = calibrator_module(model.calibrator_name, model.calibrator)
    spec = model.input_spec
    network = copy.deepcopy(model.network).cpu().eval().requires_grad_(False)  # inference only
    module = Exported(network, head, spec.kind == "image", list(spec.mean), list(spec.std)).eval()
    example = torch.zeros(2, *spec.input_shape)  # two rows: a batch of one would be fixed as a constant
    try:
        with torch.no_grad():
            return torch.export.export(module, (example,), dynamic_shapes=({0: torch.export.Dim("batch")},))
    except Exception as err:  # noqa: BLE001 - capture fails in many ways; each means the same to the user
        raise ValueError(f"the network cannot be exported ({_first_line(err)}); use metacal.load") from None


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _onnx_bytes(program: torch.export.ExportedProgram) -> bytes:
    """The ONNX model of ``program`` (input ``x``, output ``probs``), its converter's messages kept quiet."""
    quiet = io.StringIO()
    try:
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            onnx_program = torch.onnx.export(program, dynamo=True, input_names=["x"], output_names=["probs"],
                                             verbose=False)
        return onnx_program.model_proto.SerializeToString()
    except Exception as err:  # noqa: BLE001 - the converter fails in many ways; each means the same to the user
        raise ValueError(f"the network cannot be converted to ONNX ({_first_line(err)}); export a .pt2 file "
                         "instead") from None


def export_model(model: Any, path: str | Path) -> Path:
    """Write ``model`` (a :class:`metacal.predictor.CalibratedModel`) to ``path``: ``.pt2`` (torch.export) or
    ``.onnx``; returns the path. One-line ValueError for another suffix, missing ONNX modules, a calibrator
    without a tensor map or a network that cannot be exported; nothing is written then."""
    kind = export_format(path)
    program = exported_program(model)
    if kind == "ONNX":
        data = _onnx_bytes(program)
    else:
        buffer = io.BytesIO()
        torch.export.save(program, buffer)
        data = buffer.getvalue()
    path = Path(path)
    write_bytes_atomic(path, data)
    return path
