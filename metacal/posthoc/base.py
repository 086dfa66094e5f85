"""What every post-hoc calibrator is: a :class:`Calibrator` (an ``nn.Module``) and the :class:`CalibratorSpec` that
names it in :mod:`metacal.posthoc.registry`.

A calibrator is fitted once on held-out predictions and then maps a classifier's outputs to calibrated ones:

* ``fit(x, labels)`` → self, with ``x`` logits or probabilities (``spec.input`` says which);
* ``forward(x)`` (the module call) → N×K log-probabilities: a tensor map with no host read, which
  ``torch.export`` captures into a calibrated model's file where ``spec.exportable`` (metacal/predict/export.py);
* ``transform(x)`` → N×K probabilities, the inputs checked first (numpy arrays and lists too): what the metrics,
  the reports and :func:`metacal.load` use, computed as each calibrator always has;
* ``state_dict()`` / ``load_state_dict()``: the fitted numbers (:meth:`Calibrator.fitted_state`), the format of a
  run's ``calibration/<name>.pt``;
* ``fitted_params()``: the fitted hyperparameters worth printing (T, λ, μ, the ETS weights).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn

LOGITS, PROBS = "logits", "probs"  # what a calibrator is fitted on and maps
VAL, VAL_PERTURBED = "val", "val+perturbed"  # its fit data: validation predictions, or with their perturbed copy


class Calibrator(nn.Module):
    """The base of every post-hoc calibrator (module docstring); subclasses give ``fit``, ``transform``,
    ``fitted_state`` and ``load_fitted_state``, and a tensor map ``forward`` where they can be exported."""

    def fit(self, x: torch.Tensor, labels: torch.Tensor) -> "Calibrator":
        raise NotImplementedError

    def transform(self, x: torch.Tensor) -> torch.Tensor:
        """Calibrated probabilities of ``x`` (rows sum to 1)."""
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Calibrated log-probabilities of ``x``; a lookup calibrator takes the log of :meth:`transform`."""
        return torch.log(self.transform(x))

    def fitted_state(self) -> dict[str, Any]:
        """The fitted numbers (plain floats, strings, CPU tensors): what ``state_dict()`` holds."""
        raise NotImplementedError

    def load_fitted_state(self, state: dict[str, Any]) -> None:
        """Take the numbers of :meth:`fitted_state` back; a one-line ValueError for a state that does not fit."""
        raise NotImplementedError

    def fitted_params(self) -> dict[str, float]:
        """The fitted hyperparameters worth printing; none by default."""
        return {}

    # nn.Module's state_dict() and load_state_dict() hold the fitted state, keyed as the calibrator has always saved
    def _save_to_state_dict(self, destination: dict[str, Any], prefix: str, keep_vars: bool) -> None:
        for key, value in self.fitted_state().items():
            destination[prefix + key] = value

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, local_metadata: Any, strict: bool,
                              missing_keys: list[str], unexpected_keys: list[str], error_msgs: list[str]) -> None:
        self.load_fitted_state({key[len(prefix):]: value for key, value in state_dict.items()
                                if key.startswith(prefix)})


def at_least_one(num_classes: int) -> int:
    """The fewest fitting samples of a calibrator with no parameter per class."""
    return 1


@dataclass(frozen=True)
class CalibratorSpec:
    """How to build and describe one calibrator; calling it builds an unfitted one (``num_bins`` for the binned).

    ``label``: short column title ("ECE after <label>"); ``input``: what fit and forward take, :data:`LOGITS` or
    :data:`PROBS`; ``fit_data``: :data:`VAL`, or :data:`VAL_PERTURBED` (the validation predictions with their
    perturbed copy, ``Predictions.perturbed``); ``shift_aware``: fitted to suit shifted inputs, so chosen by name,
    not by ``all``; ``exportable``: ``forward`` is a tensor map torch.export captures; ``min_samples``: K → the
    fewest fitting samples accepted."""

    name: str
    label: str
    description: str
    build: Callable[[int], Calibrator]
    input: str = LOGITS
    fit_data: str = VAL
    shift_aware: bool = False
    exportable: bool = True
    min_samples: Callable[[int], int] = at_least_one

    @property
    def needs_perturbed(self) -> bool:
        return self.fit_data == VAL_PERTURBED

    def __call__(self, num_bins: int = 15) -> Calibrator:
        return self.build(num_bins)
