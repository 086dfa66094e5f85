"""The regime pages' per-run numbers through the disk cache of experiments/run_cache.py.

Fitting the post-hoc calibrators on a run's validation predictions and scoring every variant takes about half a
second per run (ensemble TS dominates); the noisy-labels page reads over a thousand runs. The key adds to the run's
files the calibrators asked for and the source of every module the numbers depend on (experiments/regimes/numbers.py,
metacal/posthoc, metacal/metrics, metacal/predictions.py). Entries: ``$XDG_CACHE_HOME/metacal/regime_numbers``.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from pathlib import Path

import metacal.metrics
import metacal.posthoc
import metacal.predictions
from metacal.data.paths import cache_home
from metacal.run.layout import Run

from ..run_cache import cached, run_key, source_fingerprint
from . import numbers


def default_dir() -> Path:
    return cache_home() / "regime_numbers"


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """sha256 of the sources the numbers are computed by."""
    files = [Path(numbers.__file__), Path(metacal.predictions.__file__)]
    for package in (metacal.posthoc, metacal.metrics):
        files += sorted(Path(package.__file__).parent.glob("*.py"))
    return source_fingerprint(files)


def key(run: Run, calibrators: tuple[str, ...]) -> str:
    return run_key(run.path, list(calibrators), code_fingerprint())


def cached_run_numbers(run: Run, calibrators: tuple[str, ...], folder: Path) -> numbers.RunNumbers:
    """:func:`numbers.run_numbers` of ``run``, from ``folder`` when its entry is current, else computed and stored."""
    return cached(folder, key(run, calibrators), lambda: numbers.run_numbers(run, calibrators),
                  dataclasses.asdict, lambda d: numbers.RunNumbers(**d))
