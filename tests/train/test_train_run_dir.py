"""Run-directory rules: never reuse a non-empty directory unless told; resume needs a complete checkpoint."""

from __future__ import annotations

import json
import re

import pytest

from metacal.train.run_dir import clear_run_dir, default_run_dir, has_checkpoint, prepare_run_dir


def test_default_name_is_config_stem_and_timestamp():
    path = default_run_dir("configs/cifar10/flgamma_sece.yaml")
    assert path.parent.name == "runs"
    assert re.fullmatch(r"flgamma_sece-\d{8}-\d{6}", path.name)


def test_new_empty_existing_and_overwrite(tmp_path):
    fresh = prepare_run_dir(tmp_path / "a" / "b")
    assert fresh.root.is_dir() and fresh.latest == tmp_path / "a" / "b" / "checkpoints" / "latest"
    assert prepare_run_dir(tmp_path / "a" / "b").root.is_dir()  # still empty: fine to use
    (fresh.root / "metrics.json").write_text("{}")
    with pytest.raises(FileExistsError, match="pass resume=True to continue it or overwrite=True to replace it"):
        prepare_run_dir(fresh.root)
    again = prepare_run_dir(fresh.root, overwrite=True)
    assert again.root.is_dir() and not any(again.root.iterdir())


def test_resume_requires_a_complete_checkpoint(tmp_path):
    paths = prepare_run_dir(tmp_path / "run")
    with pytest.raises(FileNotFoundError, match="cannot resume"):
        prepare_run_dir(paths.root, resume=True)
    # a directory without a manifest (a half-written or foreign checkpoint) is not something to resume from
    (paths.checkpoints / "ckpt-000000010").mkdir(parents=True)
    (paths.checkpoints / "ckpt-000000010" / "train_state.json").write_text("{}")
    (paths.checkpoints / ".tmp-ckpt-000000020").mkdir()
    assert not has_checkpoint(paths.root)
    (paths.checkpoints / "ckpt-000000010" / "MANIFEST.json").write_text(
        json.dumps({"files": {}, "global_step": 10, "step_in_epoch": 3}))
    assert has_checkpoint(paths.root) and prepare_run_dir(paths.root, resume=True).root == paths.root
    with pytest.raises(ValueError, match="exclude"):
        prepare_run_dir(paths.root, resume=True, overwrite=True)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        prepare_run_dir(tmp_path / "nowhere", resume=True)


def test_unwritable_or_impossible_run_dir_is_a_permission_error(tmp_path):
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a directory")
    with pytest.raises(PermissionError, match="cannot create run directory"):
        prepare_run_dir(blocker / "run")
    assert blocker.read_text() == "not a directory"


def test_deferred_overwrite_keeps_content_until_cleared(tmp_path):
    root = tmp_path / "run"
    root.mkdir()
    (root / "metrics.json").write_text("{}")
    paths = prepare_run_dir(root, overwrite=True, defer_overwrite=True)
    assert (root / "metrics.json").read_text() == "{}"
    clear_run_dir(paths.root)
    assert root.is_dir() and not any(root.iterdir())
