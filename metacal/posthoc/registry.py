"""The post-hoc calibrators by name, so that the evaluate CLI and the results pages can list, fit and apply
them alike: ``fit_calibrator(name, val)`` then ``apply_calibrator(name, fitted, test)``, or both at once with
:func:`calibrate`, on :class:`metacal.predictions.Predictions` (docs/conventions.md#posthoc).

| name | label | fitted on | map |
|---|---|---|---|
| ts_nll | TS | logits | temperature scaling, T by NLL |
| ts_ece | TS-ECE | logits | temperature scaling, T by ECE grid (``num_bins`` bins) |
| hb | HB | probs | top-label histogram binning (``num_bins`` bins) |
| vector | VS | logits | vector scaling |
| matrix | MS-ODIR | logits | matrix scaling, ODIR with λ = μ by 5-fold CV |
| dirichlet | Dir-ODIR | logits (ln p) | Dirichlet calibration, ODIR with λ = μ by 5-fold CV |
| isotonic | Iso | probs | one-vs-rest isotonic regression, renormalised |

"logits" calibrators get ``Predictions.logits_for_scaling()`` (ln p when a file holds only probabilities).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from metacal.predictions import Predictions
from metacal.registry import Registry

from .dirichlet import DirichletCalibration
from .histogram import HistogramBinning
from .isotonic import IsotonicCalibration
from .matrix import MatrixScaling
from .temperature import TemperatureScaling
from .vector import VectorScaling


@dataclass(frozen=True)
class CalibratorSpec:
    """How to build, fit and describe one calibrator; calling it builds an unfitted calibrator."""

    name: str
    label: str  # short column title ("ECE after <label>")
    description: str
    input: str  # "logits" or "probs": what fit() and transform() take
    build: Callable[[int], Any]  # num_bins → unfitted calibrator
    min_samples: Callable[[int], int]  # K → fewest fitting samples accepted

    def __call__(self, num_bins: int = 15) -> Any:
        return self.build(num_bins)


CALIBRATORS: Registry[CalibratorSpec] = Registry("post-hoc calibrator", listing="metacal.posthoc")
_ORDER: list[str] = []


def _add(spec: CalibratorSpec) -> None:
    CALIBRATORS.register(spec.name)(spec)  # type: ignore[arg-type]
    _ORDER.append(spec.name)


def _at_least_one(k: int) -> int:
    return 1


_add(CalibratorSpec("ts_nll", "TS", "temperature scaling (NLL)", "logits", lambda m: TemperatureScaling("nll"),
                    _at_least_one))
_add(CalibratorSpec("ts_ece", "TS-ECE", "temperature scaling (ECE grid)", "logits",
                    lambda m: TemperatureScaling("ece_grid", num_bins=m), _at_least_one))
_add(CalibratorSpec("hb", "HB", "histogram binning (top label)", "probs",
                    lambda m: HistogramBinning(m, mode="top"), _at_least_one))
_add(CalibratorSpec("vector", "VS", "vector scaling", "logits", lambda m: VectorScaling(),
                    VectorScaling.min_samples))
_add(CalibratorSpec("matrix", "MS-ODIR", "matrix scaling (ODIR)", "logits", lambda m: MatrixScaling(),
                    MatrixScaling.min_samples))
_add(CalibratorSpec("dirichlet", "Dir-ODIR", "Dirichlet calibration (ODIR)", "logits",
                    lambda m: DirichletCalibration(), DirichletCalibration.min_samples))
_add(CalibratorSpec("isotonic", "Iso", "isotonic regression (one-vs-rest)", "probs",
                    lambda m: IsotonicCalibration(), IsotonicCalibration.min_samples))


def available() -> list[str]:
    """Every calibrator name, in the order of the table above (the evaluate CLI's column order)."""
    return list(_ORDER)


def spec(name: str) -> CalibratorSpec:
    """The spec of ``name``; an unknown name raises :class:`metacal.registry.UnknownNameError` listing the
    valid ones."""
    return CALIBRATORS.get(name)  # type: ignore[return-value]


def check_fit_size(name: str, num_samples: int, num_classes: int) -> None:
    """One-line ValueError unless ``num_samples`` fitting samples suffice for ``name`` at K = ``num_classes``."""
    need = spec(name).min_samples(num_classes)
    if num_samples < need:
        raise ValueError(f"{spec(name).description} needs at least {need} fitting samples for K = {num_classes}, "
                         f"got N = {num_samples}")


def _inputs(name: str, pred: Predictions) -> torch.Tensor:
    return pred.logits_for_scaling() if spec(name).input == "logits" else pred.probs


def fit_calibrator(name: str, val: Predictions, num_bins: int = 15) -> Any:
    """The calibrator ``name`` fitted on ``val`` (checks the sample count first)."""
    check_fit_size(name, val.labels.shape[0], val.num_classes)
    return spec(name)(num_bins).fit(_inputs(name, val), val.labels)


def apply_calibrator(name: str, fitted: Any, pred: Predictions) -> torch.Tensor:
    """Calibrated probabilities (N×K) of ``pred`` under ``fitted`` (a calibrator of kind ``name``)."""
    if pred.num_classes != fitted_num_classes(fitted, pred.num_classes):
        raise ValueError(f"{spec(name).description} was fitted for K = {fitted_num_classes(fitted, 0)} classes, "
                         f"got predictions with K = {pred.num_classes}")
    return fitted.transform(_inputs(name, pred))


def fitted_num_classes(fitted: Any, default: int) -> int:
    """K a fitted calibrator was fitted for (``default`` for class-count-free maps: TS, top-label HB)."""
    k = getattr(fitted, "num_classes", None)
    return default if k is None else int(k)


def calibrate(name: str, val: Predictions, test: Predictions, num_bins: int = 15) -> torch.Tensor:
    """Probabilities of ``test`` after the calibrator ``name`` fitted on ``val``."""
    return apply_calibrator(name, fit_calibrator(name, val, num_bins), test)


def fitted_params(fitted: Any) -> dict[str, float]:
    """The fitted hyperparameters worth printing: T (temperature scaling), λ and μ (ODIR maps); else {}."""
    if isinstance(fitted, TemperatureScaling):
        return {"temperature": float(fitted.temperature)}
    if isinstance(fitted, (MatrixScaling, DirichletCalibration)):
        return {"reg_lambda": fitted.reg_lambda_used, "reg_mu": fitted.reg_mu_used}
    return {}
