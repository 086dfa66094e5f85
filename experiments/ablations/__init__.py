"""Ablation studies (``python scripts/ablate.py NAME [--quick] [--out DIR]``), one module per study:
bins, gamma_map, objective, backend, calibratable, ground_truth, ci_coverage, shift, grad_weighting, gamma_oracle,
meta_signal, meta_horizon.

Shared pieces: ``runner`` (train method variants through metacal.train), ``page`` (Markdown + CSV + figures),
``study`` (options, registry), ``true_calibration`` and ``estimators`` (ground truth on gaussian_mixture),
``correlation`` (Pearson r).
"""

from . import (  # noqa: F401  (register the studies)
    backend,
    bins,
    calibratable,
    ci_coverage,
    gamma_map,
    gamma_oracle,
    grad_weighting,
    ground_truth,
    meta_horizon,
    meta_signal,
    objective,
    shift,
)
from .study import STUDIES, StudyOptions


def available() -> list[str]:
    return STUDIES.available()


__all__ = ["STUDIES", "StudyOptions", "available"]
