"""Bad input under ``torchrun --nproc_per_node 2``: the launcher exits 1 with its own report (ChildFailedError, the
rank's ``exitcode  : 2`` inside), and metacal's one-line error is said once, by rank 0, before that report."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from train_tiny import TINY, deep_merge

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
# torchrun's own lines before it starts the workers: its log records and the OMP_NUM_THREADS banner
STARTUP = re.compile(r"^([WI]\d{4} .*torch/distributed/run\.py|\*{10,}$|Setting OMP_NUM_THREADS)")


@pytest.mark.slow
def test_bad_config_under_torchrun_is_one_line_once_before_the_launchers_report(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text(yaml.safe_dump(deep_merge(TINY, {"optim": {"lrr": 0.1}})))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(REPO / "scripts" / "train.py"), "--config", str(config), "--run-dir", str(tmp_path / "run")]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    ours = [line for line in lines if not STARTUP.match(line)]
    error = ("error: unknown config key 'optim.lrr' (did you mean 'optim.lr'?); valid keys in optim: name, lr, "
             "momentum, weight_decay, nesterov, betas, eps, backbone_lr_scale")
    assert ours[0] == error, proc.stderr[-3000:]
    assert lines.count(error) == 1, proc.stderr[-3000:]  # rank 1 does not say it again
    assert str(REPO / "metacal") not in proc.stderr  # no traceback through metacal's code, before or after
    assert "ChildFailedError" in proc.stderr and re.search(r"exitcode\s*: 2 ", proc.stderr)  # docs/training.md's words
    assert not (tmp_path / "run").exists()
