"""The model you ship: a finished run loaded as a calibrated classifier (:func:`load`), on CPU or GPU, without
the data it was trained on.

    model = metacal.load("runs/<name>")            # temperature scaling fitted on the run's validation split
    probs = model.predict_proba(x)                 # N×K float64; model.predict(x): N int64 labels
    sets = model.predict_set(x, alpha=0.1, method="aps")   # N×K bool, ≥ 90% hold the true label

``predict_proba`` and ``predict`` answer in the kind of ``x``: a torch tensor gives CPU tensors, anything else
(a numpy array, a list) numpy arrays — float64 N×K probabilities, int64 labels — so a numpy pipeline stays numpy.

The network is rebuilt from config.yaml and predictor.json (:mod:`metacal.run.predictor_info`) with the weights of
``checkpoints/best`` (:func:`metacal.predict.network.build_network`). The calibrator is ``calibration/<name>.pt``;
one not saved yet (any name of :mod:`metacal.posthoc.registry`) is fitted on ``predictions/val.npz`` and saved
there, so it is fitted once (:mod:`metacal.run.calibration`). A run trained before predictor.json existed is
rebuilt once with its data (:func:`metacal.predict.network.load_run`), and its predictor.json written.

Inputs ``x`` are always raw, in the dataset's raw format (:mod:`metacal.data.model_inputs`): images (C, H, W)
as uint8 0..255 or float in [0, 1], shaped (N, C, H, W), (N, H, W, C) or, for C = 1, (N, H, W) — the model
normalises them; other data (N, *input_shape) numbers as given. Normalised (model-ready) tensors are not
accepted: feed those to ``model.network`` directly. A wrong shape or dtype is a one-line ValueError.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Union

import numpy as np
import torch
from torch import nn

from metacal.data.model_inputs import InputSpec, model_inputs
from metacal.posthoc import registry
from metacal.posthoc.choice import DEFAULTS
from metacal.posthoc.temperature import TemperatureScaling
from metacal.predictions import Predictions, load_predictions
from metacal.run.calibration import check_calibrator_name, load_calibrator, save_calibrator
from metacal.run.predictor_info import PredictorInfo, predictor_info, read_predictor, write_predictor

from .network import RunError, batched_logits, build_network, check_run_dir, load_run, resolve_device


#: what predict_proba and predict return: a CPU tensor for tensor inputs, else a numpy array
Output = Union[torch.Tensor, np.ndarray]


def like_input(x: Any, result: torch.Tensor) -> Output:
    """``result`` (a CPU tensor) as the caller's kind: a tensor when ``x`` is one, else a numpy array."""
    return result if isinstance(x, torch.Tensor) else result.numpy()


class CalibratedModel:
    """A run's network (eval mode) and post-hoc calibrator; see the module docstring for the inputs."""

    def __init__(self, network: nn.Module, info: PredictorInfo, calibrator_name: str | None, calibrator: Any,
                 batch_size: int, device: torch.device, root: Path | None = None) -> None:
        self.network = network
        self.info = info
        self.calibrator_name = calibrator_name
        self.calibrator = calibrator
        self.batch_size = int(batch_size)
        self.device = device
        self.root = root
        self._set_predictors: dict[Any, Any] = {}  # conformal predictors fitted by predict_set, per setting

    @property
    def classes(self) -> list[str] | None:
        return self.info.classes

    @property
    def num_classes(self) -> int:
        return self.info.num_classes

    @property
    def input_spec(self) -> InputSpec:
        return self.info.inputs

    @property
    def temperature(self) -> float | None:
        """T of a temperature-scaling calibrator (ts_nll, ts_ece, ts_perturbed); None for the others."""
        return float(self.calibrator.temperature) if isinstance(self.calibrator, TemperatureScaling) else None

    def use_calibrator(self, name: str | None) -> "CalibratedModel":
        """Switch to the run's calibrator ``name`` (None: softmax): ``calibration/<name>.pt``, or fitted on
        predictions/val.npz and saved there; returns self."""
        if name is not None:
            check_calibrator_name(name)
            if self.root is None:
                raise ValueError("this model has no run directory to read or fit a calibrator from")
        self.calibrator = None if name is None else run_calibrator(self.root, name, self.num_classes)
        self._set_predictors = {}  # fitted through the previous calibrator
        self.calibrator_name = name
        return self

    def to(self, device: str | torch.device) -> "CalibratedModel":
        """Move the network to ``device`` (the calibrator works on CPU); returns self."""
        self.device = resolve_device(device)
        self.network.to(self.device)
        return self

    def inputs(self, x: Any) -> torch.Tensor:
        """Model-ready float32 inputs of raw ``x`` (CPU)."""
        return model_inputs(self.info.inputs, x)

    def logits(self, x: Any) -> torch.Tensor:
        """float32 logits (CPU, N×K) of raw ``x``, in batches of the run's ``data.eval_batch_size``."""
        return self.network_logits(self.inputs(x))

    def network_logits(self, inputs: torch.Tensor) -> torch.Tensor:
        """float32 logits (CPU, N×K) of model-ready ``inputs`` (:meth:`inputs`), in the run's batches."""
        return batched_logits(self.network, inputs, self.batch_size, self.device, self.num_classes)

    def calibrate(self, logits: torch.Tensor) -> torch.Tensor:
        """float64 probabilities of ``logits`` under the calibrator (softmax without one)."""
        z = logits.detach().cpu().double()
        if self.calibrator is None or z.shape[0] == 0:
            return torch.softmax(z, dim=1)
        pred = Predictions.from_logits(z, torch.zeros(z.shape[0], dtype=torch.int64))
        return registry.apply_calibrator(str(self.calibrator_name), self.calibrator, pred).double()

    def predict_proba(self, x: Any) -> Output:
        """Calibrated probabilities (N×K float64) of raw ``x``: a CPU tensor when ``x`` is a tensor, else a numpy
        array."""
        return like_input(x, self.calibrate(self.logits(x)))

    def predict(self, x: Any) -> Output:
        """Predicted labels (N int64), the most probable class after calibration: a CPU tensor when ``x`` is a
        tensor, else a numpy array."""
        return like_input(x, self.calibrate(self.logits(x)).argmax(dim=1))

    def predict_set(self, x: Any, alpha: float = 0.1, method: str = "aps", mondrian: bool = False,
                    randomized: bool = True, seed: int = 0, weighted: bool = False) -> Output:
        """Prediction sets of raw ``x``: a boolean N×K mask whose rows hold the true label with probability
        ≥ 1 − ``alpha`` on data exchangeable with the run's validation split (split conformal, score ``method``:
        ``thr``, ``aps`` or ``raps``; ``mondrian``: per-class quantiles). The quantile is fitted once per setting on
        predictions/val.npz through this model's calibrator (metacal.conformal). Randomised scores draw one U per
        row from ``seed``: the same rows in another order or batch may get other U. ``weighted``: ``x`` is a sample
        of a covariate-shifted distribution, and each row gets a quantile weighted by a domain classifier's
        likelihood ratio between the validation split and ``x`` (Tibshirani et al. 2019; pass the whole sample at
        once, since the ratio is fitted on it)."""
        from metacal.conformal.evaluation import SetRequest, shift_weights

        request = SetRequest(method, alpha, mondrian, randomized, seed=seed, weighted=weighted).check()
        fitted = replace(request, weighted=False)  # one fitted predictor serves the weighted sets too
        if fitted not in self._set_predictors:
            if self.root is None:
                raise RunError("predict_set needs the run directory's predictions/val.npz to calibrate the sets")
            val = load_predictions(self.root / "predictions" / "val.npz")
            request.check_size(int(val.labels.shape[0]), f"{self.root}/predictions/val.npz")
            logits = val.logits if val.logits is not None else val.probs.clamp_min(1e-300).log()
            self._set_predictors[fitted] = (request.predictor().fit(self.calibrate(logits), val.labels), val.probs)
        predictor, val_probs = self._set_predictors[fitted]
        logits = self.logits(x)
        weights = shift_weights(weighted, val_probs, torch.softmax(logits.double(), 1))
        return like_input(x, predictor.predict_set(self.calibrate(logits), weights=weights).cpu())

    def export(self, path: str | Path) -> Path:
        """Write one file mapping raw float32 inputs to calibrated probabilities: ``.pt2`` (torch.export) or
        ``.onnx`` (:func:`metacal.predict.export.export_model`)."""
        from .export import export_model

        return export_model(self, path)

    def __repr__(self) -> str:
        where = f"{self.root}, " if self.root is not None else ""
        return (f"CalibratedModel({where}{self.info.model}, K={self.num_classes}, "
                f"calibrator={self.calibrator_name}, device={self.device})")


def load(run_dir: str | Path, calibrator: str | None = DEFAULTS["predict"],
         device: str | torch.device | None = None) -> CalibratedModel:
    """The finished run in ``run_dir`` as a :class:`CalibratedModel` with ``calibrator`` (a name of
    :mod:`metacal.posthoc.registry`, or None for the uncalibrated softmax) on ``device`` (default: CUDA when
    available). One-line errors (:class:`~metacal.predict.network.RunError`, ValueError, ConfigError) for a
    directory that is not a finished run with a checkpoint, a network trained from Python, an unknown calibrator."""
    from metacal.train.components import PYTHON
    from metacal.train.config import load_saved_config

    root = check_run_dir(run_dir)
    cfg = load_saved_config(root / "config.yaml")
    if cfg.model.name.startswith(PYTHON):
        raise RunError(f"{root} was trained from Python (metacal.fit) with a network of your own class "
                       f"({cfg.model.name[len(PYTHON):]}); build it yourself and load the weights into it: "
                       f"metacal.train.init_weights.load_initial_weights(model, {str(root)!r})")
    if calibrator is not None:
        check_calibrator_name(calibrator)
    where = resolve_device(device)
    info = read_predictor(root)
    if info is None:  # a run trained before predictor.json: rebuild it once with its data
        try:
            run = load_run(root, where)
        except (ValueError, FileNotFoundError) as err:
            raise RunError(f"{root} has no predictor.json (trained by an older metacal) and its data could not be "
                           f"rebuilt to write one: {str(err).splitlines()[0]}") from None
        info, network = predictor_info(cfg, run.bundle), run.model
        _save_quietly(lambda: write_predictor(root, info))
    else:
        network = build_network(root, cfg, info, where)
    model = CalibratedModel(network, info, None, None, int(cfg.data.eval_batch_size), where, root)
    return model.use_calibrator(calibrator)


def run_calibrator(root: Path, name: str, num_classes: int) -> Any:
    """The run's calibrator ``name``: read from ``calibration/<name>.pt``, else fitted once on
    predictions/val.npz and saved there (a read-only run directory only costs the saving)."""
    fitted = load_calibrator(root, name)
    if fitted is not None:
        return fitted
    val = load_predictions(root / "predictions" / "val.npz")
    if val.num_classes != num_classes:
        raise RunError(f"{root}: predictions/val.npz has K = {val.num_classes} classes, predictor.json "
                       f"K = {num_classes}")
    fitted = registry.fit_calibrator(name, val)
    _save_quietly(lambda: save_calibrator(root, name, fitted))
    return fitted


def _save_quietly(write: Any) -> None:
    """Run ``write()``; a run directory that cannot be written (read-only copy) only costs the cache."""
    try:
        write()
    except OSError as err:
        print(f"metacal.load: could not save into the run directory ({err.strerror or err}); "
              "the next load will fit again", file=sys.stderr)
