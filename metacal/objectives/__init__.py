"""Differentiable calibration objectives on logits (meta-validation / secondary losses); see docs/conventions.md#objectives.

Every objective takes N×K logits and N integer targets and returns a scalar tensor, differentiable w.r.t. the
logits. By name: ``build(name, **params)`` returns a callable ``obj(logits, targets)``; ``available()``.
"""

from __future__ import annotations

from .avuc import avuc, savuc
from .dece import dece
from .mdca import mdca
from .mmce import mmce
from .registry import OBJECTIVES, Objective, build
from .sbece import sbece, sbece_label
from .sece import sece, sece_from_confidence
from .soft_accuracy import soft_rank_accuracy

# The interface (docs/conventions.md#interfaces) names both the function ``metacal.objectives.sece(logits,
# targets)`` and the path ``metacal.objectives.sece.sece_from_confidence``. The package attribute ``sece`` is
# the function (it shadows the submodule for attribute access and ``import metacal.objectives.sece as m``), so the function also
# carries the confidence-level entry point; ``from metacal.objectives.sece import ...`` works as usual.
sece.sece_from_confidence = sece_from_confidence  # type: ignore[attr-defined]


def available() -> list[str]:
    return OBJECTIVES.available()


__all__ = [
    "OBJECTIVES",
    "Objective",
    "build",
    "available",
    "sece",
    "sece_from_confidence",
    "dece",
    "sbece",
    "sbece_label",
    "avuc",
    "savuc",
    "mmce",
    "mdca",
    "soft_rank_accuracy",
]
