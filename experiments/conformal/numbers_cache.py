"""The prediction-set pages' per-run numbers through the disk cache of experiments/run_cache.py.

Under shift a run's numbers need its network's logits on every held-out family × severity (25 sets of 10,000 images
on the corruptions suite): the Fashion-MNIST MLP page's 50 runs took 7.5 minutes on two CPU cores, and 9 seconds
from the cache. The key adds to the run's files the shift suite asked for (none with ``--no-shift``) and the source
of experiments/conformal and of the whole ``metacal`` package (the sets, the calibrator, the networks, the shift
suites). Entries: ``$XDG_CACHE_HOME/metacal/conformal_numbers``.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from pathlib import Path
from typing import Any

import metacal
from metacal.data.paths import cache_home

from ..run_cache import cached, run_key, source_fingerprint
from . import numbers
from .study import Study


def default_dir() -> Path:
    return cache_home() / "conformal_numbers"


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """sha256 of experiments/conformal/*.py and metacal/**/*.py."""
    here = sorted(Path(numbers.__file__).parent.glob("*.py"))
    return source_fingerprint(here + sorted(Path(metacal.__file__).parent.rglob("*.py")))


def key(run_dir: Path, study: Study | None) -> str:
    return run_key(run_dir, None if study is None else study.shift, code_fingerprint())


def decode(d: Any) -> numbers.RunSets | None:
    if d is None:
        return None
    shift = {k: {int(severity): cell for severity, cell in by.items()} for k, by in d.pop("shift").items()}
    return numbers.RunSets(**d, shift=shift)


def cached_run_sets(run_dir: Path, study: Study | None, folder: Path) -> numbers.RunSets | None:
    """:func:`numbers.run_sets`, from ``folder`` when its entry is current, else computed and stored; a run without
    its prediction files or metrics.json (not finished) is computed, not stored."""
    try:
        entry = key(run_dir, study)
    except FileNotFoundError:
        return numbers.run_sets(run_dir, study)
    return cached(folder, entry, lambda: numbers.run_sets(run_dir, study),
                  lambda s: None if s is None else dataclasses.asdict(s), decode)
