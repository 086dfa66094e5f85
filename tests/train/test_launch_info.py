"""The start-of-run banner, runtime.json, the warning when a launcher asked for more processes than the run
got, and a run's stderr without torch's ``torch.jit.script is deprecated`` warning."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
import yaml
from train_tiny import TINY, deep_merge

from metacal import machine
from metacal.train import launch_info

REPO = Path(__file__).resolve().parents[2]
ACCELERATE_ENV = {"ACCELERATE_USE_CPU": "True", "ACCELERATE_MIXED_PRECISION": "no"}
ACCELERATE_ARGV = ["/usr/bin/python3", "/usr/bin/accelerate", "launch", "--cpu", "--num_processes", "2",
                   "scripts/train.py", "--config", "c.yaml"]


@pytest.mark.parametrize("env, parent, expected", [
    ({"WORLD_SIZE": "2"}, [], 2),  # torchrun, accelerate's multi-process launchers: the count itself
    ({"WORLD_SIZE": "1", **ACCELERATE_ENV, "MASTER_ADDR": "x"}, ACCELERATE_ARGV, None),  # asked for one
    ({**ACCELERATE_ENV, "MASTER_ADDR": "127.0.0.1"}, ACCELERATE_ARGV, 2),  # the silent single process
    ({**ACCELERATE_ENV, "MASTER_ADDR": "127.0.0.1"}, ["accelerate", "launch", "--num-processes=3", "t.py"], 3),
    ({**ACCELERATE_ENV, "MASTER_ADDR": "127.0.0.1"}, [], 0),  # more than one, number unknown (no /proc)
    (ACCELERATE_ENV, ["accelerate", "launch", "--num_processes", "1", "t.py"], None),
    (ACCELERATE_ENV, [], None),  # accelerate launch of one process: no MASTER_ADDR
    ({"MASTER_ADDR": "127.0.0.1"}, ACCELERATE_ARGV, None),  # not launched by accelerate: nothing to say
    ({}, [], None),
])
def test_requested_processes(env, parent, expected):
    assert launch_info.requested_processes(env, parent) == expected


def test_mismatch_warning_names_the_cpu_command():
    argv = [str(REPO / "scripts" / "train.py"), "--config", "my run.yaml", "--set", "optim.lr=0.05"]
    text = launch_info.mismatch_warning(1, 2, argv)
    relative = os.path.relpath(REPO / "scripts" / "train.py")
    assert text == ("warning: the launcher asked for 2 processes but this run has 1 (accelerate launch starts a "
                    "single process when it finds no GPUs); on CPU use: torchrun --nproc_per_node 2 "
                    f"{relative} --config 'my run.yaml' --set optim.lr=0.05")
    assert "asked for several processes" in launch_info.mismatch_warning(1, 0, argv)
    assert "--nproc_per_node N " in launch_info.mismatch_warning(1, 0, argv)
    assert launch_info.mismatch_warning(2, 2, argv) is None and launch_info.mismatch_warning(1, None, argv) is None


def test_banner_of_a_single_cpu_process():
    from accelerate import Accelerator

    info = launch_info.describe(Accelerator(cpu=True))
    assert info == {"num_processes": 1, "device": "cpu", "distributed_type": "NO", "backend": None,
                    "mixed_precision": "no"}
    assert launch_info.banner(info) == "runtime: 1 process, device cpu, no distributed backend"
    two = {**info, "num_processes": 2, "distributed_type": "MULTI_CPU", "backend": "gloo"}
    assert launch_info.banner(two) == "runtime: 2 processes, device cpu, distributed backend gloo (MULTI_CPU)"


def test_runtime_json_appends_one_session_per_start(tmp_path):
    path, info = tmp_path / "runtime.json", {"num_processes": 1, "device": "cpu"}
    launch_info.record(path, info, resumed=False)
    launch_info.record(path, {**info, "num_processes": 2}, resumed=True)
    sessions = json.loads(path.read_text())["sessions"]
    assert [(s["num_processes"], s["resumed"]) for s in sessions] == [(1, False), (2, True)]
    assert {"torch", "accelerate", "python", "started"} <= set(sessions[0])
    # the CPU kernel path, read from torch: runs on AVX2 and AVX-512 paths round differently (README, quickstart)
    assert sessions[0]["cpu_kernels"] == torch.backends.cpu.get_cpu_capability() != ""
    # and the CPU model: the same kernel path on AMD and on Intel trained the quickstart to different numbers
    assert sessions[0]["cpu"] == machine.cpu_model() != ""


def test_preload_forward_ad_leaves_the_warning_filters_as_they_were():
    from metacal.meta.hypergrad_jvp import preload_forward_ad

    before = list(warnings.filters)
    preload_forward_ad()
    assert warnings.filters == before


@pytest.mark.slow
def test_accelerate_launch_of_two_cpu_processes_warns_and_records(tmp_path):
    """The real ``accelerate launch --cpu --num_processes 2``: one process trains (said by the banner and in
    runtime.json) and one stderr line warns, naming the torchrun command; a FLγ-SECE run (jvp backend: forward
    AD) prints no ``torch.jit.script is deprecated`` warning."""
    config = tmp_path / "meta.yaml"
    config.write_text(yaml.safe_dump(deep_merge(TINY, {
        "model": {"name": "mlp", "options": {"hidden": [16]}}, "schedule": {"epochs": 1, "milestones": [1]},
        "loss": {"name": "focal"}, "logging": {"tensorboard": False}, "run": {"max_steps_per_epoch": 3},
        "learner": "gamma_net", "meta": {"objective": "sece", "backend": "jvp"}})))
    run_dir = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "MASTER_ADDR", "RANK")}
    env.update(PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--cpu", "--num_processes", "2", "--num_machines",
           "1", "--mixed_precision", "no", "--dynamo_backend", "no", "scripts/train.py", "--config", str(config),
           "--run-dir", str(run_dir)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "runtime: 1 process, device cpu, no distributed backend" in proc.stdout.splitlines()
    warned = [line for line in proc.stderr.splitlines() if line.startswith("warning: the launcher")]
    assert warned == [f"warning: the launcher asked for 2 processes but this run has 1 (accelerate launch starts a "
                      f"single process when it finds no GPUs); on CPU use: torchrun --nproc_per_node 2 "
                      f"scripts/train.py --config {config} --run-dir {run_dir}"]
    assert "torch.jit.script" not in proc.stderr and "Traceback" not in proc.stderr
    (session,) = json.loads((run_dir / "runtime.json").read_text())["sessions"]
    assert (session["num_processes"], session["device"], session["backend"]) == (1, "cpu", None)
    assert session["requested_processes"] == 2 and session["warning"] == warned[0]
    assert session["resumed"] is False
