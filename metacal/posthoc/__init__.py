"""Post-hoc calibration fitted on held-out predictions: temperature scaling (also ensemble and perturbation
temperature scaling), histogram binning, vector and matrix scaling, Dirichlet calibration (ODIR) and
one-vs-rest isotonic regression, each a :class:`Calibrator` (``base``); ``registry`` names them, ``choice`` says
which ones a command fits."""

from .base import Calibrator, CalibratorSpec
from .dirichlet import DirichletCalibration
from .ensemble_ts import EnsembleTemperatureScaling
from .histogram import HistogramBinning
from .isotonic import IsotonicCalibration
from .matrix import MatrixScaling
from .perturbed_ts import PerturbationTemperatureScaling
from .registry import (
    CALIBRATORS, apply_calibrator, available, calibrate, fit_calibrator, fitted_params, load_state, register,
    save_state, spec,
)
from .temperature import TemperatureScaling, default_grid, fit_temperature_nll
from .vector import VectorScaling

__all__ = [
    "Calibrator", "CalibratorSpec", "DirichletCalibration", "EnsembleTemperatureScaling", "HistogramBinning",
    "IsotonicCalibration", "MatrixScaling", "PerturbationTemperatureScaling", "TemperatureScaling", "VectorScaling",
    "default_grid", "fit_temperature_nll", "CALIBRATORS", "apply_calibrator", "available", "calibrate",
    "fit_calibrator", "fitted_params", "load_state", "register", "save_state", "spec",
]  # fmt: skip
