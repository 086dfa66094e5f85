"""A disk cache of the regime study's per-run numbers, so that a page regenerates in seconds after its discussion is
edited, and a page over a growing sweep only scores the runs that are new.

Fitting the post-hoc calibrators on a run's validation predictions and scoring every variant takes about half a
second per run (ensemble TS dominates); the noisy-labels page reads over a thousand runs. An entry is keyed by the
sha256 of: the run's resolved path; the size and modification time (ns) of its ``predictions/val.npz``,
``predictions/test.npz`` and ``metrics.json``; the calibrators asked for; and the source of every module the numbers
depend on (experiments/regimes/numbers.py, metacal/posthoc, metacal/metrics, metacal/predictions.py). Retraining a
run, or editing any of that code, therefore misses the cache. Entries live in ``$XDG_CACHE_HOME/metacal/
regime_numbers`` (metacal.data.paths.cache_home) and can be deleted at any time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path

import metacal.metrics
import metacal.posthoc
import metacal.predictions
from metacal.data.paths import cache_home
from metacal.run.layout import Run

from . import numbers

RUN_FILES = ("predictions/val.npz", "predictions/test.npz", "metrics.json")


def default_dir() -> Path:
    return cache_home() / "regime_numbers"


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """sha256 of the sources the numbers are computed by."""
    files = [Path(numbers.__file__), Path(metacal.predictions.__file__)]
    for package in (metacal.posthoc, metacal.metrics):
        files += sorted(Path(package.__file__).parent.glob("*.py"))
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode() + b"\0" + f.read_bytes())
    return digest.hexdigest()


def key(run: Run, calibrators: tuple[str, ...]) -> str:
    root = Path(run.path).resolve()
    stats = []
    for name in RUN_FILES:
        st = os.stat(root / name)
        stats.append((name, st.st_size, st.st_mtime_ns))
    text = json.dumps([str(root), stats, list(calibrators), code_fingerprint()])
    return hashlib.sha256(text.encode()).hexdigest()


def cached_run_numbers(run: Run, calibrators: tuple[str, ...], folder: Path) -> numbers.RunNumbers:
    """:func:`numbers.run_numbers` of ``run``, from ``folder`` when its entry is current, else computed and stored.
    A missing, unreadable or stale entry is recomputed; the write is atomic (a killed report leaves no half entry)."""
    entry = folder / f"{key(run, calibrators)}.json"
    try:
        return numbers.RunNumbers(**json.loads(entry.read_text()))
    except (OSError, ValueError, TypeError):
        pass
    found = numbers.run_numbers(run, calibrators)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = entry.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(dataclasses.asdict(found)))
    os.replace(tmp, entry)
    return found

