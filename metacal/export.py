"""A calibrated model as one TorchScript file: raw inputs → normalisation → network → calibrator → probabilities.

    exported = torch.jit.load("model.pt")          # needs torch only, not metacal
    probs = exported(x)                            # N×K float64, rows summing to 1

``x`` is a CPU tensor shaped (N, *input_shape), channels first: for images float32 in [0, 1] (uint8 0..255 is
accepted too and scaled by 1/255), normalised inside by the run's mean and std; for other data the numbers as
:meth:`metacal.predictor.CalibratedModel.predict_proba` takes them. The network is traced
(``torch.jit.trace``) on CPU in eval mode; the calibrator is a pure tensor map: temperature scaling (ts_nll,
ts_ece, ts_perturbed), ensemble TS (ets), vector and matrix scaling, Dirichlet calibration, or none (softmax).
Histogram binning and isotonic regression are lookups that are not exported (one-line ValueError).
"""

from __future__ import annotations

import copy
import io
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

from metacal.atomic_io import write_bytes_atomic
from metacal.posthoc.affine import AffineCalibrator
from metacal.posthoc.ensemble_ts import EnsembleTemperatureScaling
from metacal.posthoc.temperature import TemperatureScaling


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
    """Raw inputs → calibrated probabilities (module docstring)."""

    def __init__(self, network: nn.Module, calibrator: nn.Module, shape: list[int], image: bool,
                 mean: list[float], std: list[float]) -> None:
        super().__init__()
        self.network = network
        self.calibrator = calibrator
        self.shape = shape
        self.image = image
        channels = [-1, 1, 1] if image else [1]
        self.register_buffer("mean", torch.tensor(mean if image else [0.0], dtype=torch.float32).view(channels))
        self.register_buffer("std", torch.tensor(std if image else [1.0], dtype=torch.float32).view(channels))
        dims = ", ".join(str(v) for v in shape)
        self.shape_error = f"inputs must have shape (N, {dims})" + (", channels first" if image else "")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != len(self.shape) + 1 or list(x.shape[1:]) != self.shape:
            raise ValueError(self.shape_error)
        if x.dtype == torch.uint8:
            x = x.to(torch.float32) * (1.0 / 255)
        else:
            x = x.to(torch.float32)
        if self.image:
            x = (x - self.mean) / self.std
        return self.calibrator(self.network(x).to(torch.float32).to(torch.float64))


EXPORTABLE = ("ts_nll", "ts_ece", "ts_perturbed", "ets", "vector", "matrix", "dirichlet")


def check_exportable(name: str | None) -> None:
    """One-line ValueError unless calibrator ``name`` (None: softmax) has a tensor map."""
    if name is not None and name not in EXPORTABLE:
        raise ValueError(f"calibrator {name} cannot be exported to TorchScript; use metacal.load (exportable: "
                         f"{', '.join(EXPORTABLE)}, none)")


def calibrator_module(name: str | None, fitted: Any) -> nn.Module:
    """The TorchScript-ready map of a fitted calibrator; HB, isotonic → one-line ValueError."""
    check_exportable(name)
    if fitted is None:
        return Softmax()
    if isinstance(fitted, TemperatureScaling):
        return Temperature(fitted.temperature)
    if isinstance(fitted, EnsembleTemperatureScaling):
        return Ensemble(fitted.temperature, fitted.weights)
    if isinstance(fitted, AffineCalibrator) and fitted.weight is not None and fitted.bias is not None:
        return Affine(fitted.weight, fitted.bias, fitted.log_probs)
    raise ValueError(f"calibrator {name} ({type(fitted).__name__}) has no TorchScript map; use metacal.load")


def export_model(model: Any, path: str | Path) -> Path:
    """Write ``model`` (a :class:`metacal.predictor.CalibratedModel`) to ``path`` as TorchScript; returns the
    path. One-line ValueError for a calibrator without a tensor map or a network that cannot be traced."""
    head = calibrator_module(model.calibrator_name, model.calibrator)
    spec = model.input_spec
    network = copy.deepcopy(model.network).cpu().eval().requires_grad_(False)  # inference only
    example = torch.zeros(2, *spec.input_shape)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch.jit's deprecation notes
            warnings.simplefilter("ignore", torch.jit.TracerWarning)  # shape checks traced as constants
            traced = torch.jit.trace(network, example)
            scripted = torch.jit.script(Exported(traced, head, list(spec.input_shape), spec.kind == "image",
                                                 list(spec.mean), list(spec.std)))
            buffer = io.BytesIO()
            torch.jit.save(scripted, buffer)
    except Exception as err:  # noqa: BLE001 - tracing fails in many ways; each means the same to the user
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"the network cannot be exported to TorchScript ({first}); use metacal.load") from None
    path = Path(path)
    write_bytes_atomic(path, buffer.getvalue())
    return path
