"""Bad input → one clear line on stderr and exit code 2, never a traceback."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("overrides, fragments", [
    (["optim.lrr=0.1"], ["unknown config key 'optim.lrr'", "valid keys in optim"]),
    (["optim.lr=abc"], ["'optim.lr'", "abc"]),
    (["loss.name=focall"], ["unknown loss 'focall'", "did you mean focal", "full list:"]),
    (["model.name=resnet999"], ["unknown model 'resnet999'", "full list:"]),
    (["data.name=imagenet"], ["unknown dataset 'imagenet'", "available:", "mnist1d"]),
    (["learner=gamma_net", "meta.objective=ecee"], ["unknown objective 'ecee'", "sece"]),
    (["loss.name=focal", "loss.params.gama=2"], ["loss.params (focal)", "gama"]),
    (["model.options.widthh=3"], ["model (mlp)", "widthh"]),
    (["learner=loss"], ["learner loss needs", "ce_learnable_l2"]),
    (["learner=gamma_net", "loss.name=label_smoothing"],
     ["a γ-Net needs a loss that takes a per-sample gamma=", "LabelSmoothingCE does not"]),
    (["learner=gamma_net", "loss.name=focal", "meta.horizon=trajectory", "meta.horizon_decay=1.5"],
     ["meta: horizon decay must be in [0, 1], got 1.5"]),
    (["learner=loss", "meta.horizon=trajectory", "loss.name=ce_learnable_l2"],
     ["meta: horizon 'trajectory' learns the γ-Net's bias", "learner: gamma_net"]),
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


LOSSES_LIST = "full list: python -c 'import metacal.losses as m; print(m.available())'"
TORCHVISION_LIST = "full list: python -c 'import torchvision.models as m; print(m.list_models(m))'"


@pytest.mark.parametrize("overrides, start, end", [
    (["model.name=torchvision:resnet19"], "error: unknown torchvision model 'resnet19'; did you mean resnet18, ",
     TORCHVISION_LIST),
    (["model.name=convnext_tiny"], "error: unknown model 'convnext_tiny'; did you mean torchvision:convnext_tiny",
     "full list: python -c 'import metacal.models as m; print(m.available())'"),
    (["loss.name=focall"], "error: unknown loss 'focall'; did you mean focal, adafocal, focal_gra? ", LOSSES_LIST),
    (["data.name=imagenet"], "error: unknown dataset 'imagenet'; did you mean tiny_imagenet, image_folder? available: "
     "arrays, cifar10, ", "svhn, tiny_imagenet"),
    (["learner=gamma_net", "meta.objective=secee"], "error: unknown objective 'secee'; did you mean sece, sbece, dece? "
     "available: avuc, ", "sbece_label, sece"),
    (["schedule.name=cosin"], "error: config key 'schedule.name': unknown value 'cosin'; did you mean cosine? "
     "available: step, cosine, constant", ""),
    (["learner=gamma_net", "meta.backend=jvpp"], "error: config key 'meta.backend': unknown value 'jvpp'; did you "
     "mean jvp? available: ", ""),
])
def test_unknown_names_suggest_the_closest_then_the_full_list(overrides, start, end, write_config, run_cli,
                                                               tmp_path):
    """Every registry's unknown name: the closest names first, then the short list or where the full one is;
    one line of at most 200 characters, exit 2, no run directory."""
    args = ["--config", write_config("bad"), "--run-dir", tmp_path / "run", "--set", *overrides]
    code, out, err = run_cli(args)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith(start) and lines[0].endswith(end) and len(lines[0]) <= 200, lines[0]
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("listing, member", [(LOSSES_LIST, "focal_gra"), (TORCHVISION_LIST, "convnext_tiny")])
def test_the_full_list_command_runs(listing, member):
    """The command an unknown-name error points to prints the names (run as a user would paste it)."""
    argv = shlex.split(listing.removeprefix("full list: "))
    assert argv[:2] == ["python", "-c"]
    proc = subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0 and f"'{member}'" in proc.stdout, proc.stderr
