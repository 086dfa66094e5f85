"""metacal.atomic_io: complete files after a write, no temporary left behind, symlink pointers replaced,
a failed write described in one line."""

from __future__ import annotations

import errno
import os

import numpy as np

from metacal.atomic_io import describe_write_failure, point_symlink, write_text_atomic, write_with_atomic


def test_writes_replace_the_file_and_leave_no_temporary(tmp_path):
    path = tmp_path / "metrics.json"
    write_text_atomic(path, "old")
    write_text_atomic(path, "néw")
    assert path.read_text(encoding="utf-8") == "néw"
    write_with_atomic(tmp_path / "a.npz", lambda buffer: np.savez(buffer, x=np.arange(3)))
    assert np.load(tmp_path / "a.npz")["x"].tolist() == [0, 1, 2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npz", "metrics.json"]


def test_point_symlink_replaces_an_old_link(tmp_path):
    for name in ("ckpt-1", "ckpt-2"):
        (tmp_path / name).mkdir()
    point_symlink(tmp_path / "latest", "ckpt-1")
    point_symlink(tmp_path / "latest", "ckpt-2")
    assert os.readlink(tmp_path / "latest") == "ckpt-2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-1", "ckpt-2", "latest"]


def test_a_failed_write_is_one_line_with_the_free_space(tmp_path):
    err = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    text = describe_write_failure(err, tmp_path)
    assert text.startswith(f"{os.strerror(errno.ENOSPC)} (") and text.endswith(f" free on {tmp_path})")
    assert "\n" not in describe_write_failure(RuntimeError("a\nb"), tmp_path)
