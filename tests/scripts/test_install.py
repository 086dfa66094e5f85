"""A non-editable install works on its own: a wheel of a copy of the project, built by the test
environment's own pip (an isolated build with a current setuptools, as any user's ``pip install .``),
installed into a fresh venv that sees the test environment's packages (torch & co.) through a ``.pth`` line;
then, from a directory outside the repository, the module entry point, the console scripts and a one-run
sweep whose trainer is ``python -m metacal.train``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
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
    for package in ("metacal", "experiments"):  # experiments/ sits beside metacal/ in a checkout
        shutil.copytree(REPO / package, src / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["OMP_NUM_THREADS"] = "1"
    # The wheel: built by this environment's pip in an isolated build environment, so neither the base
    # interpreter's nor this venv's (possibly old, wheel-less) setuptools matters.
    wheels = tmp_path / "wheels"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", wheels, src], tmp_path, env, timeout=600)
    (wheel,) = wheels.glob("metacal-*.whl")
    tops = {name.split("/", 1)[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"metacal"}, tops  # the library only
    # The venv: its own pip installs the wheel; the dependencies come from this environment's site-packages
    # (a .pth line; --system-site-packages would give the base interpreter's, which need not have torch).
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", venv], tmp_path, env)
    python, bin_dir = venv / "bin" / "python", venv / "bin"
    purelib = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path, env)
    ours = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    (Path(purelib.stdout.strip()) / "test_env_packages.pth").write_text("\n".join(sorted(ours)) + "\n")
    _run([python, "-m", "pip", "install", "--no-deps", "--no-index", "-q", wheel], tmp_path, env)
    outside = tmp_path / "elsewhere"
    outside.mkdir()

    where = _run([python, "-c", "import metacal, sysconfig; print(metacal.__file__); "
                  "print(sysconfig.get_paths()['purelib'])"], outside, env).stdout.split()
    assert Path(where[0]).is_relative_to(Path(where[1])) and Path(where[1]).is_relative_to(venv)
    assert not Path(where[0]).is_relative_to(REPO)

    assert "usage: python -m metacal.train" in _run([python, "-m", "metacal.train", "--help"], outside, env).stdout
    for script in ("metacal-train", "metacal-evaluate", "metacal-predict", "metacal-sweep", "metacal-report"):
        assert f"usage: {script}" in _run([bin_dir / script, "--help"], outside, env).stdout, script

    # the sweep's default trainer is the installed module, not a scripts/ path of a checkout
    config = outside / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY))
    proc = _run([bin_dir / "metacal-sweep", "--configs", config, "--seeds", "0", "--out", outside / "sweep"],
                outside, env)
    assert "-m metacal.train" in proc.stdout and "1 ok, 0 skipped, 0 failed" in proc.stdout
    metrics = json.loads((outside / "sweep" / "tiny" / "seed0" / "metrics.json").read_text())
    assert metrics["finished"] is True and metrics["epoch"] == 1
