"""scripts/ holds launchers: each file is at most 40 lines, and the ones whose code lives in experiments/ (not
installed) find it from any working directory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
INTO_EXPERIMENTS = sorted(p.name for p in SCRIPTS.glob("*.py") if "from experiments" in p.read_text())


@pytest.mark.parametrize("script", sorted(p.name for p in SCRIPTS.glob("*.py")))
def test_a_script_is_a_launcher(script):
    assert len((SCRIPTS / script).read_text().splitlines()) <= 40, f"{script}: its code belongs in experiments/"


@pytest.mark.parametrize("script", INTO_EXPERIMENTS)
def test_launchers_into_experiments_run_from_anywhere(script, tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPTS / script), "--help"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("usage:"), done.stderr[-2000:]


def test_the_moved_analyses_are_launched():
    assert {"auto_vs_grid.py", "bench_auto.py", "bench_meta_step.py"} <= set(INTO_EXPERIMENTS)
