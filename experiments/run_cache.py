"""A disk cache of per-run numbers, so that a results page regenerates in seconds after its discussion is edited and a
page over a growing sweep only scores the runs that are new. The regime pages (experiments/regimes/numbers_cache.py)
and the prediction-set pages (experiments/conformal/numbers_cache.py) build on it, each with its own folder.

An entry is a JSON file named by the sha256 of: the run's resolved path; the size and modification time (ns) of its
``predictions/val.npz``, ``predictions/test.npz`` and ``metrics.json`` (a retrained run rewrites all three); what the
page asked for (calibrators, shift suite, …); and a fingerprint of the source files the numbers are computed by (an
edit to any of them misses). Entries live under ``$XDG_CACHE_HOME/metacal/`` (metacal.data.paths.cache_home) and can
be deleted at any time.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

T = TypeVar("T")

RUN_FILES = ("predictions/val.npz", "predictions/test.npz", "metrics.json")


def source_fingerprint(files: Iterable[Path]) -> str:
    """sha256 over the names and contents of ``files`` (in the order given)."""
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode() + b"\0" + f.read_bytes())
    return digest.hexdigest()


def run_key(run_dir: Path | str, *asked: Any) -> str:
    """The entry name of a run's numbers: its resolved path, the stats of its RUN_FILES, and ``asked`` (JSON-able:
    what the page asked for and the code fingerprint)."""
    root = Path(run_dir).resolve()
    stats = []
    for name in RUN_FILES:
        st = os.stat(root / name)
        stats.append((name, st.st_size, st.st_mtime_ns))
    return hashlib.sha256(json.dumps([str(root), stats, *asked]).encode()).hexdigest()


def cached(folder: Path, key: str, compute: Callable[[], T], dump: Callable[[T], Any], load: Callable[[Any], T]) -> T:
    """``load`` of the entry ``key`` in ``folder`` when it is readable, else ``compute()``, stored through ``dump``.
    A missing, unreadable or corrupt entry is recomputed; the write is atomic (a killed report leaves no half entry)."""
    entry = folder / f"{key}.json"
    try:
        return load(json.loads(entry.read_text()))
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        pass
    found = compute()
    folder.mkdir(parents=True, exist_ok=True)
    tmp = entry.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(dump(found)))
    os.replace(tmp, entry)
    return found
