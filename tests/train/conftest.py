"""Tiny configs for end-to-end trainer tests (seconds each: a few hundred samples, MLP, 1–2 epochs)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from train_tiny import TINY, deep_merge

@pytest.fixture
def write_config(tmp_path):
    """write_config(name, **sections) → path of TINY merged with the given sections."""

    def write(name: str, overrides: dict | None = None) -> Path:
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(deep_merge(TINY, overrides or {})))
        return path

    return write


@pytest.fixture
def run_cli(capsys):
    """run_cli(args) → (exit code, stdout, stderr) of the trainer CLI, in process."""
    from metacal.train.cli import main

    def run(args: list[str]) -> tuple[int, str, str]:
        code = main([str(a) for a in args])
        out = capsys.readouterr()
        return code, out.out, out.err

    return run
