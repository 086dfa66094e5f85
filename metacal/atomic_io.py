"""Crash-safe file writes: temporary name in the same directory → fsync → ``os.replace`` → fsync(dir).

After a kill at any moment the destination holds either its previous complete content or the new
complete content, never a prefix. Used for every file of a run directory that a later step reads
(config.yaml, metrics.json, history.json, predictions/*.npz) and for the checkpoint pointers.
"""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path
from typing import Callable


def fsync_dir(path: Path) -> None:
    """Make a rename/creation inside ``path`` durable (no-op where directories cannot be opened)."""
    try:
        fd = os.open(str(path), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())


def fsync_tree(root: Path) -> None:
    """fsync every file and directory below ``root`` (children before parents)."""
    for dirpath, _, filenames in os.walk(root, topdown=False):
        for name in filenames:
            fsync_file(Path(dirpath) / name)
        fsync_dir(Path(dirpath))


def write_bytes_atomic(path: Path, data: bytes) -> None:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    fsync_dir(path.parent)


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_with_atomic(path: Path, writer: Callable[[io.BytesIO], None]) -> None:
    """``writer(buffer)`` fills an in-memory buffer that is then written atomically (e.g. ``np.savez``)."""
    buffer = io.BytesIO()
    writer(buffer)
    write_bytes_atomic(path, buffer.getvalue())


def point_symlink(link: Path, target_name: str) -> None:
    """Atomically make ``link`` a relative symlink to the sibling ``target_name`` (replaces an old link)."""
    link = Path(link)
    tmp = link.with_name(f".{link.name}.tmp-{os.getpid()}")
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    os.symlink(target_name, tmp)
    os.replace(tmp, link)
    fsync_dir(link.parent)


def write_errors() -> tuple[type[BaseException], ...]:
    """What a failed write (full disk, quota, I/O error) raises: OSError, or the RuntimeError / SafetensorError
    that torch.save and safetensors turn it into."""
    try:
        from safetensors import SafetensorError
    except ImportError:  # older safetensors
        return (OSError, RuntimeError)
    return (OSError, RuntimeError, SafetensorError)


def free_space(path: Path) -> str:
    """Free space of the filesystem holding ``path`` (``123.4 MB``), or ``unknown``."""
    try:
        free = float(shutil.disk_usage(path).free)
    except OSError:
        return "unknown"
    for unit in ("bytes", "KB", "MB", "GB"):
        if free < 1024 or unit == "GB":
            return f"{free:.0f} {unit}" if unit == "bytes" else f"{free:.1f} {unit}"
        free /= 1024
    return "unknown"


def describe_write_failure(err: BaseException, directory: Path) -> str:
    """``No space left on device (12.0 KB free on DIR)``: the cause of a failed write and the space left."""
    if isinstance(err, OSError) and err.strerror:
        cause = err.strerror
    else:
        cause = f"{type(err).__name__}: {' '.join(str(err).split())[:200]}"
    return f"{cause} ({free_space(directory)} free on {directory})"
