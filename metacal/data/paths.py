"""Where datasets are looked for and where generated data is cached.

Order for a dataset without an explicit ``root``: ``$METACAL_DATA`` (if set), then the cache folder,
``$XDG_CACHE_HOME/metacal`` (the XDG base-directory rule; ``~/.cache/metacal`` when XDG_CACHE_HOME is unset,
empty or relative); datasets installed system-wide (Debian's ``/usr/share/datasets``) where a loader knows
them. An explicit ``root`` is authoritative: only it is searched. Downloads and generated data (MNIST-1D and
its shift suite) go to ``$METACAL_DATA``, else the cache folder.

``METACAL_NO_SYSTEM_DATASETS=1`` leaves the system-wide locations out of every search, so a machine that
has a dataset installed can check what a fresh machine without it does (CI's second pass: the tests that
need the data skip, the loaders raise their "not found" error).
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "METACAL_DATA"
NO_SYSTEM_ENV_VAR = "METACAL_NO_SYSTEM_DATASETS"
XDG_ENV_VAR = "XDG_CACHE_HOME"


def system_datasets_hidden() -> bool:
    """``$METACAL_NO_SYSTEM_DATASETS`` is set to something other than empty, ``0``, ``false`` or ``no``."""
    return os.environ.get(NO_SYSTEM_ENV_VAR, "").strip().lower() not in ("", "0", "false", "no")


def cache_home() -> Path:
    """``$XDG_CACHE_HOME/metacal``; ``~/.cache/metacal`` when XDG_CACHE_HOME is unset, empty or relative (the
    XDG spec says to ignore a relative path)."""
    xdg = os.environ.get(XDG_ENV_VAR, "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "metacal"


def data_home() -> Path:
    """``$METACAL_DATA`` if set, else :func:`cache_home` (where downloads and caches go)."""
    env = os.environ.get(ENV_VAR)
    return Path(env).expanduser() if env else cache_home()


def candidate_roots(root: str | os.PathLike | None) -> list[Path]:
    """Directories to search: ``[root]`` when given, else ``$METACAL_DATA`` and :func:`cache_home`."""
    if root is not None:
        return [Path(root).expanduser()]
    roots = []
    env = os.environ.get(ENV_VAR)
    if env:
        roots.append(Path(env).expanduser())
    roots.append(cache_home())
    return roots


def download_root(root: str | os.PathLike | None) -> Path:
    """Where ``download=True`` puts files: ``root`` when given, else :func:`data_home`."""
    return Path(root).expanduser() if root is not None else data_home()
