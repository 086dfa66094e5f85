"""Making, checking and clearing the run directory: where one training run keeps everything it produces.

Its layout, and the reader that reports use, are metacal/run/layout.py.

An existing non-empty directory is never reused unless ``overwrite`` (wipes it) or ``resume``. The
directory must be writable: this is checked up front (a probe file), so a read-only or impossible path
fails before any training with one clear message. Messages name the settings as the caller spells them
(``--resume`` on the command line, ``resume=True`` from Python: :mod:`metacal.wording`).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from metacal.run.layout import RunPaths
from metacal.wording import current


def default_run_dir(config_path: str | Path | None, parent: str | Path = "runs") -> Path:
    """``runs/<config-stem>-<YYYYmmdd-HHMMSS>``."""
    stem = Path(config_path).stem if config_path else "run"
    return Path(parent) / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"


def has_checkpoint(root: str | Path) -> bool:
    """A complete checkpoint to resume from exists (see :func:`metacal.train.checkpoint.find_latest`)."""
    from .checkpoint import find_latest

    return find_latest(RunPaths(Path(root)).checkpoints) is not None


def check_writable(path: Path) -> None:
    """Create and delete a probe file in ``path``; an OSError becomes one clear PermissionError line."""
    probe = path / f".write-test-{os.getpid()}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise PermissionError(f"run directory {path} is not writable ({err.strerror or err}); "
                              f"choose another {current().name('run_dir')} or fix its permissions") from None


def clear_run_dir(path: Path) -> None:
    """Delete everything inside ``path`` (``--overwrite``), keeping the directory itself."""
    for entry in Path(path).iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def remove_if_empty(path: Path) -> None:
    """Remove ``path`` if it is an empty directory: a run that failed before writing leaves no trace."""
    try:
        if path.is_dir() and not any(path.iterdir()):
            path.rmdir()
    except OSError:
        pass


def prepare_run_dir(root: str | Path, resume: bool = False, overwrite: bool = False,
                    defer_overwrite: bool = False) -> RunPaths:
    """Check the directory may be used, create it, and return its paths.

    * new or empty directory: created;
    * ``resume``: must exist and hold a complete checkpoint — kept as is;
    * ``overwrite``: an existing directory's content is deleted first — or, with ``defer_overwrite``,
      left for the caller to :func:`clear_run_dir` once the run is known to start (the CLI does so);
    * otherwise an existing non-empty directory is an error (FileExistsError).
    In every case the directory must be writable (PermissionError otherwise).
    """
    said = current()
    if resume and overwrite:
        raise ValueError(f"{said.arg('resume')} and {said.arg('overwrite')} exclude each other")
    path = Path(root)
    if resume:
        if not path.is_dir():
            raise FileNotFoundError(f"cannot resume: run directory {path} does not exist")
        if not has_checkpoint(path):
            from .checkpoint import no_checkpoint_message

            raise FileNotFoundError(no_checkpoint_message(path))
        check_writable(path)
        return RunPaths(path)
    if path.exists() and not path.is_dir():
        raise FileExistsError(f"run directory {path} exists and is not a directory")
    if path.is_dir() and any(path.iterdir()):
        if not overwrite:
            raise FileExistsError(f"run directory {path} already exists; pass {said.arg('resume')} to continue it "
                                  f"or {said.arg('overwrite')} to replace it")
        check_writable(path)
        if not defer_overwrite:
            clear_run_dir(path)
        return RunPaths(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise PermissionError(f"cannot create run directory {path} ({err.strerror or err}); "
                              f"choose another {said.name('run_dir')}") from None
    check_writable(path)
    return RunPaths(path)


def shared_run_dir(root: str | Path, accelerator, resume: bool = False, overwrite: bool = False,
                   user_errors: tuple[type[BaseException], ...] = (OSError, ValueError)) -> RunPaths:
    """:func:`prepare_run_dir` (with ``defer_overwrite``) on the main process only; every process gets the
    same paths, or the same error (FileExistsError, FileNotFoundError, PermissionError, else ConfigError)."""
    from accelerate.utils import broadcast_object_list

    from .config import ConfigError

    payload: list = [None, None]
    if accelerator.is_main_process:
        try:
            paths = prepare_run_dir(root, resume=resume, overwrite=overwrite, defer_overwrite=True)
            payload = [str(paths.root), None]
        except user_errors as err:
            payload = [None, f"{type(err).__name__}: {err}"]
    if accelerator.num_processes > 1:
        broadcast_object_list(payload)
    if payload[1] is not None:
        kind, _, message = payload[1].partition(": ")
        raise {"FileExistsError": FileExistsError, "FileNotFoundError": FileNotFoundError,
               "PermissionError": PermissionError}.get(kind, ConfigError)(message)
    return RunPaths(Path(payload[0]))
