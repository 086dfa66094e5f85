"""The dataset registry and :func:`build` (contract: ``build(name, root=None, seed=0, **options)``)."""

from __future__ import annotations

import inspect
from typing import Any

from metacal.registry import Registry

from .bundle import DataBundle

DATASETS: Registry[DataBundle] = Registry("dataset")


def build(name: str, root=None, seed: int = 0, **options: Any) -> DataBundle:
    """Build a registered dataset. Unknown names raise ``UnknownNameError``; unknown options ValueError."""
    builder = DATASETS.get(name)
    accepted = [p for p in inspect.signature(builder).parameters if p not in ("root", "seed")]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ValueError(f"dataset {name!r} has no option(s) {', '.join(unknown)}; "
                         f"valid options: {', '.join(accepted)}")
    return builder(root=root, seed=seed, **options)


def available() -> list[str]:
    return DATASETS.available()
