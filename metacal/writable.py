"""Whether a folder can be made or written at a path, checked before long work starts, without creating it."""

from __future__ import annotations

import os
from pathlib import Path


def folder_problem(path: str | Path) -> str | None:
    """Why no folder can be made or written at ``path`` (one line, naming it), or None.

    The nearest of ``path`` and its parents that exists must be a folder this process may write into and
    enter; nothing is created. (Root passes the permission test everywhere; a folder that still refuses,
    such as one in /proc, fails when it is made.)"""
    path = Path(path)
    for folder in (path, *path.parents):
        if folder.exists():
            if not folder.is_dir():
                return f"{path} cannot be written: {folder} is a file"
            if not os.access(folder, os.W_OK | os.X_OK):
                return f"{path} cannot be written: no permission in {folder}"
            return None
    return None


def page_problem(path: str | Path) -> str | None:
    """Why no file can be written at ``path`` (a page, with its CSVs and figures beside it), or None."""
    path = Path(path)
    if path.is_dir():
        return f"{path} is a folder; give the page's file name"
    problem = folder_problem(path.parent)
    return None if problem is None else f"{path} cannot be written: {problem.split(': ', 1)[1]}"
