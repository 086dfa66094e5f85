"""A non-editable install works on its own: ``pip install`` of a copy of the project into a fresh venv
(system site packages for torch & co., no network), then, from a directory outside the repository, the
module entry point, the console scripts and a one-run sweep whose trainer is ``python -m metacal.train``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
TINY = {"data": {"name": "gaussian_mixture", "batch_size": 32, "eval_batch_size": 64,
                 "options": {"n_train": 200, "n_test": 60, "dim": 4, "num_classes": 3}},
        "model": {"name": "mlp"}, "loss": {"name": "ce"}, "optim": {"lr": 0.1},
        "schedule": {"epochs": 1, "milestones": [1]},
        "logging": {"progress_bar": False, "tensorboard": False}, "run": {"torch_threads": 1}}


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 240) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.mark.slow
def test_non_editable_install_runs_outside_the_repo(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    shutil.copytree(REPO / "metacal", src / "metacal", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    venv = tmp_path / "venv"
    # no pip inside the venv: ensurepip's bundled setuptools cannot build a wheel offline; the system pip and
    # setuptools (seen through --system-site-packages) install into the venv's own site-packages
    _run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv], tmp_path, dict(os.environ))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["OMP_NUM_THREADS"] = "1"
    python, bin_dir = venv / "bin" / "python", venv / "bin"
    _run([python, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "-q", src],
         tmp_path, env)
    outside = tmp_path / "elsewhere"
    outside.mkdir()

    where = _run([python, "-c", "import metacal, sysconfig; print(metacal.__file__); "
                  "print(sysconfig.get_paths()['purelib'])"], outside, env).stdout.split()
    assert Path(where[0]).is_relative_to(Path(where[1])) and Path(where[1]).is_relative_to(venv)
    assert not Path(where[0]).is_relative_to(REPO)

    assert "usage: python -m metacal.train" in _run([python, "-m", "metacal.train", "--help"], outside, env).stdout
    for script in ("metacal-train", "metacal-evaluate", "metacal-sweep", "metacal-report"):
        assert f"usage: {script}" in _run([bin_dir / script, "--help"], outside, env).stdout, script

    # the sweep's default trainer is the installed module, not a scripts/ path of a checkout
    config = outside / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY))
    proc = _run([bin_dir / "metacal-sweep", "--configs", config, "--seeds", "0", "--out", outside / "sweep"],
                outside, env)
    assert "-m metacal.train" in proc.stdout and "1 ok, 0 skipped, 0 failed" in proc.stdout
    metrics = json.loads((outside / "sweep" / "tiny" / "seed0" / "metrics.json").read_text())
    assert metrics["finished"] is True and metrics["epoch"] == 1
