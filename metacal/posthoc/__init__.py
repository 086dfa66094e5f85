"""Post-hoc calibration fitted on held-out predictions: temperature scaling and histogram binning."""

from .histogram import HistogramBinning
from .temperature import TemperatureScaling, default_grid, fit_temperature_nll

__all__ = ["HistogramBinning", "TemperatureScaling", "default_grid", "fit_temperature_nll"]
