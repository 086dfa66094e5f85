"""scripts/bench_models.py: bad options are one line and exit 2 before anything runs; a one-step run prints one
row per model with its parameter count (no timing assertions: the script is the benchmark)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from script_loader import load_script

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("argv, says", [
    (["--batch", "0"], "--batch, --steps and --repeats must be positive"),
    (["--repeats", "-1"], "--batch, --steps and --repeats must be positive"),
    (["--threads", "0"], "--threads needs positive ints, got '0'"),
    (["--models", "mlp,nope"], "unknown benchmark model(s) ['nope']; choose from ['small_resnet', 'cnn1d', 'mlp']"),
    (["--option", "nope"], "--option must look like model:key=value, got 'nope'"),
    (["--models", "mlp", "--option", "mlp:widthh=3"], "model 'mlp' has no option(s) widthh"),
])
def test_bad_options_are_one_line_exit_2(capsys, argv, says):
    threads = torch.get_num_threads()
    assert load_script("bench_models").main([*argv, "--steps", "1"] if "--steps" not in argv else argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and says in err
    assert torch.get_num_threads() == threads


def test_one_step_prints_a_row_per_model_with_its_parameter_count():
    from metacal import models

    out = subprocess.run([sys.executable, str(REPO / "scripts" / "bench_models.py"), "--models", "mlp,cnn1d",
                          "--batch", "4", "--steps", "1", "--repeats", "1", "--threads", "1"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = out.stdout.strip().splitlines()[1:]
    expected = {"mlp": models.build("mlp", 10, 1, input_shape=(1, 28, 28)), "cnn1d": models.build("cnn1d", 10, 1)}
    assert [r.split()[0] for r in rows] == ["mlp", "cnn1d"]
    for row in rows:
        name, _, params = row.split()[:3]
        assert int(params) == sum(p.numel() for p in expected[name].parameters())
