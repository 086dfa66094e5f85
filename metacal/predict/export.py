"""A calibrated model as one file: raw inputs → normalisation → network → calibrator → probabilities.

    python -m metacal.predict RUN --export model.pt2     # torch.export: needs torch only, not metacal
    probs = torch.export.load("model.pt2").module()(x)   # N×K float64, rows summing to 1
    python -m metacal.predict RUN --export model.onnx    # ONNX (pip install 'metacal[export]' to write it)
    probs = onnxruntime.InferenceSession("model.onnx").run(None, {"x": x})[0]

``x`` is float32 shaped (N, *input_shape), any N ≥ 1: for images channels first in [0, 1] (uint8 images: divide
by 255 first), normalised inside by the run's mean and std; for other data the numbers as
:meth:`metacal.predict.model.CalibratedModel.predict_proba` takes them. Another shape or dtype is refused by the
loaded program itself. The network is captured by ``torch.export`` on CPU in eval mode with the batch dimension
dynamic, and with it the calibrator module itself (:class:`metacal.posthoc.base.Calibrator`, its ``forward`` in
float64: log-probabilities, exponentiated here), or none (softmax). Every calibrator whose spec says ``exportable``
goes: temperature scaling (ts_nll, ts_ece, ts_perturbed), ensemble TS (ets), vector and matrix scaling, Dirichlet
calibration, one's own. Histogram binning and isotonic regression are lookups that are not exported (one-line
ValueError). The ONNX file is converted from the
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
from metacal.posthoc import registry
from metacal.posthoc.base import Calibrator

#: file suffix → format
FORMATS = {".pt2": "torch.export", ".onnx": "ONNX"}
#: modules torch.onnx.export imports to write an ONNX file
ONNX_MODULES = ("onnx", "onnxscript")
INSTALL = "pip install 'metacal[export]'"


class Exported(nn.Module):
    """Raw float32 inputs → calibrated float64 probabilities (module docstring): the calibrator's log-probabilities,
    exponentiated, or the softmax without one."""

    def __init__(self, network: nn.Module, calibrator: Calibrator | None, image: bool, mean: list[float],
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
        z = self.network(x).to(torch.float64)
        return torch.softmax(z, dim=1) if self.calibrator is None else self.calibrator(z).exp()


def exportable() -> list[str]:
    """The calibrators whose ``forward`` is a tensor map (their spec says so), in the registry's order."""
    return [name for name in registry.available() if registry.spec(name).exportable]


def check_exportable(name: str | None) -> None:
    """One-line ValueError unless calibrator ``name`` (None: softmax) has a tensor map."""
    if name is not None and not registry.spec(name).exportable:
        raise ValueError(f"calibrator {name} cannot be exported; use metacal.load (exportable: "
                         f"{', '.join(exportable())}, none)")


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


def exported_program(model: Any) -> torch.export.ExportedProgram:
    """``model`` (a :class:`metacal.predict.model.CalibratedModel`) captured by ``torch.export`` with a dynamic
    batch dimension; a network that cannot be captured is a one-line ValueError."""
    check_exportable(model.calibrator_name)
    head = None if model.calibrator is None else copy.deepcopy(model.calibrator).cpu().eval()
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
    """Write ``model`` (a :class:`metacal.predict.model.CalibratedModel`) to ``path``: ``.pt2`` (torch.export) or
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
