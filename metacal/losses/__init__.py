"""Training losses ("inner objectives"), pluggable by name: ``build(name, **params)``, ``available()``.

Every loss follows the contract in :mod:`metacal.losses.base`.
"""

from __future__ import annotations

from typing import Any

from .base import Loss, reduce
from .registry import LOSSES
from . import focal  # noqa: F401  (registers ce, focal)
from . import learnable_l2  # noqa: F401  (ce_learnable_l2)


def build(name: str, **params: Any) -> Loss:
    """Build a registered loss; an unknown name raises with the list of valid ones."""
    return LOSSES.build(name, **params)


def available() -> list[str]:
    return LOSSES.available()


__all__ = ["Loss", "LOSSES", "build", "available", "reduce"]
