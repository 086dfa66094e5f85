"""scripts/gpu_check.py on a machine without CUDA: one line and exit 0; ``--dry-run`` lists well-formed commands
whose training configs load with their overrides."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from experiments.benchmark.gpu_check import FAMILIES, PRECISIONS, checks, main

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: the check would run")
def test_skips_in_one_line_without_cuda():
    out = subprocess.run([sys.executable, "scripts/gpu_check.py"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0
    assert out.stdout.strip().splitlines() == ["gpu_check: no CUDA device here; nothing checked"]


def test_dry_run_loads_every_config_and_lists_every_check(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["--dry-run", "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    todo = checks(tmp_path)
    assert len(lines) == len(todo) == len(FAMILIES) * len(PRECISIONS) + 5
    assert sum("run.mixed_precision=bf16" in line for line in lines) == len(FAMILIES)
    assert sum("meta.backend=higher" in line for line in lines) == 2
    assert any("accelerate.commands.launch --num_processes 1" in line for line in lines)
    expects = [c.expect for c in todo if "SIGTERM" in c.name or "--resume" in c.name]
    assert expects == [75, 0]
    from metacal.train.config import config_exists

    for check in todo:  # every script it names exists, and every config (a file, or a dataset × method pair)
        assert all((ROOT / arg).exists() for arg in check.argv if arg.endswith(".py"))
        assert all(config_exists(ROOT / arg) for arg in check.argv if arg.endswith(".yaml"))
