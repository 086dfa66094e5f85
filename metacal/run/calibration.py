"""A run's fitted post-hoc calibrators, ``calibration/<name>.pt``: :func:`metacal.posthoc.registry.save_state`'s
dict written with ``torch.save`` (atomically), read back with ``torch.load(weights_only=True)``.

The trainer writes ``calibration/ts_nll.pt`` (the temperature scaling of metrics.json's ``test_after_ts``);
any other calibrator of :mod:`metacal.posthoc.registry` is fitted on ``predictions/val.npz`` the first time a
run is loaded with it (:func:`metacal.load`) and saved, so later loads refit nothing.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import torch

from metacal.atomic_io import write_with_atomic
from metacal.posthoc import registry
from metacal.registry import unknown_name

FOLDER = "calibration"


def calibrator_path(root: str | Path, name: str) -> Path:
    return Path(root) / FOLDER / f"{name}.pt"


def check_calibrator_name(name: str) -> None:
    """One-line ValueError (did-you-mean) unless ``name`` is a registered post-hoc calibrator."""
    if name not in registry.CALIBRATORS:
        raise ValueError(unknown_name("post-hoc calibrator", name, registry.available()) + " (or none)")


def save_calibrator(root: str | Path, name: str, fitted: Any) -> Path:
    """Write ``calibration/<name>.pt`` atomically; returns its path."""
    path = calibrator_path(root, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = registry.save_state(name, fitted)
    write_with_atomic(path, lambda buffer: torch.save(state, buffer))
    return path


def load_calibrator(root: str | Path, name: str) -> Any | None:
    """The calibrator saved in ``calibration/<name>.pt`` (None when there is none); an unreadable file is a
    one-line ValueError."""
    path = calibrator_path(root, name)
    if not path.is_file():
        return None
    try:
        state = torch.load(io.BytesIO(path.read_bytes()), map_location="cpu", weights_only=True)
        return registry.load_state(name, state)
    except Exception as err:  # noqa: BLE001 - any unpickling or state error means the same thing here
        raise ValueError(f"{path} cannot be read as a saved {name} calibrator ({type(err).__name__}: "
                         f"{str(err).splitlines()[0] if str(err) else ''}); delete it to refit") from None
