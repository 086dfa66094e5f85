"""SIGKILL of one rank under ``torchrun --nproc_per_node 2`` (CPU, gloo), then ``--resume`` with 2 processes.

Plain CE, BatchNorm-free MLP, 2 epochs of 4 steps, checkpoints every 2 global steps. Rank 1 SIGKILLs itself
after global step 7 (epoch 2, step 3; hooked_train.py ``kill_rank_at_step=1:7``); rank 0 is untouched. Proves:

* the job stops by itself: torchrun exits non-zero, and rank 0 stops at once — its next collective fails
  (gloo sees the dead peer's closed socket), then torchrun's SIGTERM or the traceback ends it —, so torchrun
  never escalates to SIGKILL after its 30 s grace period (which a rank hung in a collective would need:
  metacal's preemption handler only records a SIGTERM);
* the newest complete checkpoint is the one from before the kill (global step 6, mid-epoch 2); no metrics.json;
* ``--resume`` with 2 processes exits 0 and ends where an uninterrupted 2-process run (no mid-epoch
  checkpoints) ends: every number of metrics.json (val, test, test after TS) and of history.json's per-epoch
  train/val numbers, and the final weights and optimizer state, agree within 1e-6 (observed: bit-identical).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from train_tiny import TINY, assert_same_numbers, deep_merge, read_metrics

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CONFIG = deep_merge(TINY, {"model": {"name": "mlp", "options": {"hidden": [32]}}, "loss": {"name": "ce"},
                           "schedule": {"epochs": 2, "milestones": [1]}, "logging": {"tensorboard": False},
                           "run": {"max_steps_per_epoch": 4, "checkpoint_every_steps": 2}})
KILL = "kill_rank_at_step=1:7"  # rank 1 dies after global step 7; the last checkpoint before it: step 6
TIMEOUT = 240  # seconds per torchrun job; a hang of rank 0 would show up as torchrun's forced SIGKILL (below)


def torchrun(script: Path, *args) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(REPO), str(HERE)])}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(script),
           *map(str, args)]
    start = time.monotonic()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    return proc, time.monotonic() - start


def manifest(checkpoint: Path) -> tuple[int, int]:
    data = json.loads((checkpoint / "MANIFEST.json").read_text())
    return data["global_step"], data["step_in_epoch"]


def final_state(run_dir: Path) -> dict[str, torch.Tensor]:
    """The last epoch checkpoint's backbone weights and SGD momentum buffers."""
    from safetensors.torch import load_file

    latest = run_dir / "checkpoints" / "latest"
    state = {f"model.{k}": v for k, v in load_file(str(latest / "model.safetensors")).items()}
    optimizer = torch.load(latest / "optimizer.bin", weights_only=False, map_location="cpu")
    for index, buffers in optimizer["state"].items():
        state.update({f"optimizer.{index}.{k}": v for k, v in buffers.items() if isinstance(v, torch.Tensor)})
    return state


@pytest.mark.slow
def test_sigkill_one_rank_then_resume_matches_uninterrupted_two_process_run(tmp_path):
    from metacal.train.checkpoint import find_latest

    config = tmp_path / "plain.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    script, reference, run_dir = REPO / "scripts" / "train.py", tmp_path / "reference", tmp_path / "run"

    # (a) uninterrupted, 2 processes, epoch checkpoints only
    proc, _ = torchrun(script, "--config", config, "--run-dir", reference, "--set", "run.checkpoint_every_steps=0")
    assert proc.returncode == 0, proc.stderr[-3000:]

    # (b) rank 1 SIGKILLed mid-epoch 2: the whole job stops, rank 0 by itself
    proc, seconds = torchrun(HERE / "hooked_train.py", KILL, "--config", config, "--run-dir", run_dir)
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert "Signal 9 (SIGKILL) received by PID" in proc.stderr, proc.stderr[-3000:]  # rank 1, really killed
    assert "Unable to shutdown process" not in proc.stderr, proc.stderr[-3000:]  # rank 0 needed no SIGKILL
    assert not (run_dir / "metrics.json").exists()
    assert manifest(find_latest(run_dir / "checkpoints")) == (6, 2)
    assert (run_dir / "checkpoints" / "ckpt-000000004-e0001").is_dir()  # epoch 1's end (also `best`)
    print(f"killed job ended after {seconds:.1f}s")

    # (c) --resume with 2 processes continues from global step 6 and finishes
    proc, _ = torchrun(script, "--run-dir", run_dir, "--resume")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "after epoch 2, step 2 (global step 6)" in proc.stdout, proc.stdout
    sessions = json.loads((run_dir / "runtime.json").read_text())["sessions"]
    assert [(s["num_processes"], s["resumed"]) for s in sessions] == [(2, False), (2, True)]

    expected, got = read_metrics(reference), read_metrics(run_dir)
    assert got["epoch"] == expected["epoch"] and got["finished"]
    for split in ("val", "test", "test_after_ts"):
        assert_same_numbers(expected[split], got[split], 1e-6, split)
    history = [json.loads((r / "history.json").read_text()) for r in (reference, run_dir)]
    assert [h["epoch"] for h in history[1]] == [1, 2]
    for ea, eb in zip(*history):
        for part in ("train", "val", "test"):
            assert_same_numbers(ea[part], eb[part], 1e-6, (ea["epoch"], part))
    a, b = final_state(reference), final_state(run_dir)
    assert a.keys() == b.keys() and any(k.startswith("optimizer.") for k in a)
    for name, value in a.items():
        torch.testing.assert_close(b[name], value, rtol=0, atol=1e-6, msg=name)
