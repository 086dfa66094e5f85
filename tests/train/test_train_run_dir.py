"""Run-directory rules: never reuse a non-empty directory unless told; resume needs a finished epoch."""

from __future__ import annotations

import re

import pytest

from metacal.train.run_dir import default_run_dir, has_checkpoint, prepare_run_dir


def test_default_name_is_config_stem_and_timestamp():
    path = default_run_dir("configs/cifar10/flgamma_sece.yaml")
    assert path.parent.name == "runs"
    assert re.fullmatch(r"flgamma_sece-\d{8}-\d{6}", path.name)


def test_new_empty_existing_and_overwrite(tmp_path):
    fresh = prepare_run_dir(tmp_path / "a" / "b")
    assert fresh.root.is_dir() and fresh.latest == tmp_path / "a" / "b" / "checkpoints" / "latest"
    assert prepare_run_dir(tmp_path / "a" / "b").root.is_dir()  # still empty: fine to use
    (fresh.root / "metrics.json").write_text("{}")
    with pytest.raises(FileExistsError, match="--overwrite"):
        prepare_run_dir(fresh.root)
    again = prepare_run_dir(fresh.root, overwrite=True)
    assert again.root.is_dir() and not any(again.root.iterdir())


def test_resume_requires_a_finished_epoch(tmp_path):
    paths = prepare_run_dir(tmp_path / "run")
    with pytest.raises(FileNotFoundError, match="cannot resume"):
        prepare_run_dir(paths.root, resume=True)
    paths.latest.mkdir(parents=True)
    (paths.latest / "train_state.json").write_text("{}")
    assert has_checkpoint(paths.root) and prepare_run_dir(paths.root, resume=True).root == paths.root
    with pytest.raises(ValueError, match="exclude"):
        prepare_run_dir(paths.root, resume=True, overwrite=True)
