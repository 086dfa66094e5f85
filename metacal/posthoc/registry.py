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
| ets | ETS | logits | ensemble temperature scaling: T, then simplex weights, both by squared error |
| ts_perturbed | TS-pert. | logits + perturbed | temperature scaling by NLL on clean + perturbed predictions |

Each row is a :class:`~metacal.posthoc.base.CalibratorSpec` of a :class:`~metacal.posthoc.base.Calibrator` subclass
(:func:`register`; one of one's own is one more ``register`` call, after these). "logits" calibrators get
``Predictions.logits_for_scaling()`` (ln p when a file holds only probabilities).
``ts_perturbed`` also needs ``Predictions.perturbed`` (the npz keys ``perturbed_logits``, ``perturbed_labels``);
:func:`available` with ``for_predictions=`` lists only the calibrators a given Predictions can fit, and
asking for ``ts_perturbed`` on predictions without that companion is a one-line ValueError.
:func:`save_state` / :func:`load_state` store and rebuild a fitted calibrator without refitting.
"""

from __future__ import annotations

from typing import Any

import torch

from metacal.predictions import Predictions
from metacal.registry import Registry

from .base import PROBS, VAL_PERTURBED, Calibrator, CalibratorSpec
from .dirichlet import DirichletCalibration
from .ensemble_ts import EnsembleTemperatureScaling
from .histogram import HistogramBinning
from .isotonic import IsotonicCalibration
from .matrix import MatrixScaling
from .perturbed_ts import PerturbationTemperatureScaling
from .temperature import TemperatureScaling
from .vector import VectorScaling

CALIBRATORS: Registry[CalibratorSpec] = Registry("post-hoc calibrator", listing="metacal.posthoc")
_ORDER: list[str] = []


def register(spec: CalibratorSpec) -> CalibratorSpec:
    """Add ``spec`` to :data:`CALIBRATORS`, after the calibrators registered before it (:func:`available`'s
    order); a spec whose build does not make a :class:`~metacal.posthoc.base.Calibrator` is refused."""
    made = spec()
    if not isinstance(made, Calibrator):
        raise TypeError(f"post-hoc calibrator {spec.name!r} builds a {type(made).__name__}, not a "
                        "metacal.posthoc.base.Calibrator")
    CALIBRATORS.register(spec.name)(spec)  # type: ignore[arg-type]
    _ORDER.append(spec.name)
    return spec


register(CalibratorSpec("ts_nll", "TS", "temperature scaling (NLL)", lambda m: TemperatureScaling("nll")))
register(CalibratorSpec("ts_ece", "TS-ECE", "temperature scaling (ECE grid)",
                        lambda m: TemperatureScaling("ece_grid", num_bins=m)))
register(CalibratorSpec("hb", "HB", "histogram binning (top label)", lambda m: HistogramBinning(m, mode="top"),
                        input=PROBS, exportable=False))
register(CalibratorSpec("vector", "VS", "vector scaling", lambda m: VectorScaling(),
                        min_samples=VectorScaling.min_samples))
register(CalibratorSpec("matrix", "MS-ODIR", "matrix scaling (ODIR)", lambda m: MatrixScaling(),
                        min_samples=MatrixScaling.min_samples))
register(CalibratorSpec("dirichlet", "Dir-ODIR", "Dirichlet calibration (ODIR)", lambda m: DirichletCalibration(),
                        min_samples=DirichletCalibration.min_samples))
register(CalibratorSpec("isotonic", "Iso", "isotonic regression (one-vs-rest)", lambda m: IsotonicCalibration(),
                        input=PROBS, exportable=False, min_samples=IsotonicCalibration.min_samples))
register(CalibratorSpec("ets", "ETS", "ensemble temperature scaling", lambda m: EnsembleTemperatureScaling()))
register(CalibratorSpec("ts_perturbed", "TS-pert.", "perturbation temperature scaling",
                        lambda m: PerturbationTemperatureScaling(), fit_data=VAL_PERTURBED, shift_aware=True))

NO_PERTURBED = ("{description} needs perturbed validation predictions: evaluate a run directory with --shift "
                "(python -m metacal.evaluate runs/<r> --shift corruptions), or add perturbed_logits and "
                "perturbed_labels to VAL.npz")


def available(for_predictions: Predictions | None = None) -> list[str]:
    """Every calibrator name, in the order of the table above (the evaluate CLI's column order); with
    ``for_predictions``, only those that can be fitted on it (``ts_perturbed`` needs ``.perturbed``)."""
    if for_predictions is None:
        return list(_ORDER)
    return [name for name in _ORDER if not spec(name).needs_perturbed or for_predictions.perturbed is not None]


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


def _check_predictions(**named: Any) -> None:
    """One-line TypeError when a caller passes tensors (logits, probabilities) where Predictions belong."""
    for arg, value in named.items():
        if not isinstance(value, Predictions):
            raise TypeError(f"{arg} must be a metacal.predictions.Predictions, got {type(value).__name__}; wrap logits "
                            f"and labels as Predictions.from_logits(logits, labels)")


def _inputs(name: str, pred: Predictions) -> torch.Tensor:
    return pred.probs if spec(name).input == PROBS else pred.logits_for_scaling()


def fit_calibrator(name: str, val: Predictions, num_bins: int = 15) -> Calibrator:
    """The calibrator ``name`` fitted on ``val`` (checks the sample count and, for ``ts_perturbed``, that
    ``val.perturbed`` exists first)."""
    _check_predictions(val=val)
    check_fit_size(name, val.labels.shape[0], val.num_classes)
    if not spec(name).needs_perturbed:
        return spec(name)(num_bins).fit(_inputs(name, val), val.labels)
    if val.perturbed is None:
        raise ValueError(NO_PERTURBED.format(description=spec(name).description))
    if val.perturbed.num_classes != val.num_classes:
        raise ValueError(f"perturbed predictions have K = {val.perturbed.num_classes} classes, the clean ones "
                         f"K = {val.num_classes}")
    return spec(name)(num_bins).fit(_inputs(name, val), val.labels, _inputs(name, val.perturbed),
                                    val.perturbed.labels)


def apply_calibrator(name: str, fitted: Calibrator, pred: Predictions) -> torch.Tensor:
    """Calibrated probabilities (N×K) of ``pred`` under ``fitted`` (a calibrator of kind ``name``)."""
    _check_predictions(pred=pred)
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
    _check_predictions(val=val, test=test)
    return apply_calibrator(name, fit_calibrator(name, val, num_bins), test)


def fitted_params(fitted: Calibrator) -> dict[str, float]:
    """The fitted hyperparameters worth printing (the calibrator's own :meth:`~Calibrator.fitted_params`): T
    (temperature scaling, also on perturbed data), T and the weights w_ts, w_raw, w_uniform (ETS), λ and μ (ODIR
    maps); else {}."""
    return fitted.fitted_params()


def save_state(name: str, fitted: Calibrator) -> dict[str, Any]:
    """``fitted.state_dict()`` (plain floats, strings and CPU tensors) plus ``"calibrator": name``; enough for
    :func:`load_state` to rebuild the same ``transform`` without refitting (``torch.save`` can store it)."""
    spec(name)
    return {"calibrator": name, **fitted.state_dict()}


def load_state(name: str, state: dict[str, Any]) -> Calibrator:
    """The calibrator ``name`` rebuilt from :func:`save_state`'s dict; a state saved for another name is a
    one-line ValueError."""
    saved = state.get("calibrator", name)
    if saved != name:
        raise ValueError(f"state was saved for calibrator {saved!r}, not {name!r}")
    calibrator = spec(name)()
    calibrator.load_state_dict({key: value for key, value in state.items() if key != "calibrator"})
    return calibrator
