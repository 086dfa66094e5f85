"""Bad input → one clear line on stderr and exit code 2, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("overrides, fragments", [
    (["optim.lrr=0.1"], ["unknown config key 'optim.lrr'", "valid keys in optim"]),
    (["optim.lr=abc"], ["'optim.lr'", "abc"]),
    (["loss.name=focall"], ["unknown loss 'focall'", "available:", "focal"]),
    (["model.name=resnet999"], ["unknown model 'resnet999'", "available:", "mlp"]),
    (["data.name=imagenet"], ["unknown dataset 'imagenet'", "available:", "mnist1d"]),
    (["meta.enabled=true", "meta.objective=ecee"], ["unknown objective 'ecee'", "sece"]),
    (["loss.name=focal", "loss.params.gama=2"], ["loss.params (focal)", "gama"]),
    (["model.options.widthh=3"], ["model (mlp)", "widthh"]),
    (["meta.enabled=true", "meta.learner=loss"], ["meta.learner=loss", "ce_learnable_l2"]),
    (["meta.enabled=true", "meta.learner=gamma_net", "loss.name=label_smoothing"],
     ["meta.learner=gamma_net", "'label_smoothing' ignores it"]),
])
def test_config_errors_are_one_line_exit_2(overrides, fragments, write_config, run_cli, tmp_path):
    config = write_config("bad")
    args = ["--config", config, "--run-dir", tmp_path / "run"]
    for item in overrides:
        args += ["--set", item]
    code, out, err = run_cli(args)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for fragment in fragments:
        assert fragment in lines[0]
    assert "Traceback" not in err
    assert not (tmp_path / "run").exists()  # nothing left behind: the same command works once fixed


def test_script_exit_code_and_stderr(tmp_path):
    """The real script in a fresh interpreter: exit status 2 and a single stderr line."""
    config = tmp_path / "c.yaml"
    config.write_text("data: {name: mnist1d}\nmodel: {name: mlp}\noptim: {lr: 0.1}\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "train.py"), "--config", str(config),
                           "--set", "optim.momentm=0.5", "--run-dir", str(tmp_path / "run")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("error: unknown config key 'optim.momentm' (did you mean 'optim.momentum'?); "
                                   "valid keys in optim: name, lr, momentum, weight_decay, nesterov, betas, eps, "
                                   "backbone_lr_scale")
    assert not (tmp_path / "run").exists()
