"""``predictor.json``: what using a run's network needs besides its weights, so that it can be rebuilt and fed
without the dataset it was trained on (:mod:`metacal.predict.model`).

    {"model": "mlp", "model_options": {...}, "num_classes": 10, "classes": ["0", ...] or null,
     "inputs": {"kind": "image" | "vector", "input_shape": [C, H, W], "mean": [...], "std": [...]}}

``model`` and ``model_options`` repeat config.yaml's ``model.name`` and ``model.options``; ``inputs`` is the
bundle's :class:`~metacal.data.model_inputs.InputSpec` (how raw inputs become model inputs). The trainer writes
it next to config.yaml (main process, atomically); :func:`metacal.load` writes it for runs trained before.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metacal.atomic_io import write_text_atomic
from metacal.data.model_inputs import InputSpec, input_spec

FILE = "predictor.json"


@dataclass(frozen=True)
class PredictorInfo:
    """predictor.json's content. ``input_shape`` / ``in_channels`` / ``num_classes`` let it stand for the data
    bundle where a model is built (:func:`metacal.train.components.build_model`)."""

    model: str
    model_options: dict[str, Any]
    num_classes: int
    classes: list[str] | None
    inputs: InputSpec

    @property
    def input_shape(self) -> tuple[int, ...]:
        return self.inputs.input_shape

    @property
    def in_channels(self) -> int:
        return int(self.inputs.input_shape[0])

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "model_options": self.model_options, "num_classes": self.num_classes,
                "classes": self.classes, "inputs": self.inputs.to_dict()}


def predictor_info(cfg: Any, bundle: Any) -> PredictorInfo:
    """The record of a run with config ``cfg`` trained on ``bundle``."""
    classes = None if bundle.classes is None else [str(c) for c in bundle.classes]
    return PredictorInfo(str(cfg.model.name), _plain(dict(cfg.model.options)), int(bundle.num_classes), classes,
                         input_spec(bundle))


def write_predictor(root: str | Path, info: PredictorInfo) -> Path:
    """Write ``root/predictor.json`` atomically; returns its path."""
    path = Path(root) / FILE
    write_text_atomic(path, json.dumps(info.to_dict(), indent=2) + "\n")
    return path


def read_predictor(root: str | Path) -> PredictorInfo | None:
    """``root/predictor.json`` (None when the run has none); an unreadable file is a one-line ValueError."""
    path = Path(root) / FILE
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
        return PredictorInfo(str(record["model"]), dict(record.get("model_options") or {}),
                             int(record["num_classes"]), record.get("classes"), InputSpec.from_dict(record["inputs"]))
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path} is not a readable predictor file ({type(err).__name__}: {err}); delete it and "
                         "load the run again to rewrite it from the run's data") from None


def _plain(value: Any) -> Any:
    """JSON-ready copy of config values (tuples become lists)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
