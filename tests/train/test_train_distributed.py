"""Two CPU processes (torchrun, gloo): rank agreement under meta steps, and equivalence with one process.

1. FLγ-SECE (jvp backend), 6 meta steps with the global batch split across 2 ranks (each rank also reads
   its own disjoint half of the meta-val batch): the backbone (through DDP) and the γ-Net (meta grads
   averaged by metacal.distributed) must be bit-identical on both ranks — and the γ-Net must have moved.
2. Plain CE with a BatchNorm-free MLP, momentum SGD, 5 steps: with the global batch of 32 split 16 + 16,
   DDP's averaged gradient equals the single-process gradient of the same 32 samples, so the parameters
   match a 1-process run up to float32 summation order: tolerance atol 1e-6 (observed ≤ 1e-7).
3. The automatic γ (learner: auto), 3 updates: each rank measures its half of the meta-val sample, the
   summed gap gives every rank the same γ.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from train_tiny import TINY, deep_merge

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
MLP = {"model": {"name": "mlp", "options": {"hidden": [32]}}}
ONE_EPOCH = {"schedule": {"epochs": 1, "milestones": [1]}, "eval": {"test_every_epoch": False}}
META = deep_merge(TINY, {**MLP, **ONE_EPOCH, "loss": {"name": "focal"}, "run": {"max_steps_per_epoch": 6},
                         "learner": "gamma_net", "meta": {"objective": "sece", "backend": "jvp", "lr": 0.01}})
PLAIN = deep_merge(TINY, {**MLP, **ONE_EPOCH, "loss": {"name": "ce"}, "run": {"max_steps_per_epoch": 5}})
AUTO = deep_merge(TINY, {**MLP, **ONE_EPOCH, "loss": {"name": "focal", "params": {"gamma": 1.0}},
                         "run": {"max_steps_per_epoch": 6},
                         "learner": "auto", "auto": {"first_step": 1.0, "start": 1.0, "updates_per_epoch": 3,
                                                     "band": 0.0}})


def write(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def two_process_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ddp")
    configs = [write(tmp / "meta.yaml", META), write(tmp / "plain.yaml", PLAIN), write(tmp / "auto.yaml", AUTO)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(REPO), str(HERE)])}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(HERE / "ddp_worker.py"), str(tmp / "out"), *map(str, configs)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tmp


def load(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, weights_only=True)


@pytest.mark.slow
def test_meta_steps_keep_ranks_identical(two_process_runs):
    out = two_process_runs / "out" / "meta"
    r0, r1 = load(out / "rank0.pt"), load(out / "rank1.pt")
    assert int(r0["world_size"]) == 2 and r0.keys() == r1.keys()
    assert any(k.startswith("gamma_net.") for k in r0)
    for name in r0:
        assert torch.equal(r0[name], r1[name]), name
    # evaluation gathered every example exactly once (uneven last batches padded, then trimmed)
    metrics = json.loads((out / "metrics.json").read_text())
    assert (metrics["val"]["n"], metrics["test"]["n"]) == (40, 120)
    # the meta steps did something: the γ-Net bias left its initial value τ·γ0 = 0.01
    assert abs(float(r0["gamma_net.bias"]) - 0.01) > 1e-4
    # what the run said it ran on, kept in runtime.json: two gloo processes (accelerate: device cpu:0), no warning
    sessions = json.loads((out / "runtime.json").read_text())["sessions"]
    assert [(s["num_processes"], s["device"], s["backend"], s["distributed_type"], s["warning"])
            for s in sessions] == [(2, "cpu:0", "gloo", "MULTI_CPU", None)]


@pytest.mark.slow
def test_plain_steps_match_single_process_with_same_global_batch(two_process_runs, tmp_path):
    from metacal.train.config import load_config
    from metacal.train.loop import make_accelerator, train
    from metacal.train.run_dir import prepare_run_dir

    cfg = load_config(two_process_runs / "plain.yaml")
    single = train(cfg, prepare_run_dir(tmp_path / "single"), accelerator=make_accelerator(cfg))
    expected = {f"model.{k}": v for k, v in single.model.state_dict().items()}
    for rank in (0, 1):
        got = load(two_process_runs / "out" / "plain" / f"rank{rank}.pt")
        for name, value in expected.items():
            torch.testing.assert_close(got[name], value, rtol=0, atol=1e-6, msg=name)
    # and the 5 steps moved the parameters far beyond that tolerance (same initialisation as train())
    from accelerate.utils import set_seed
    from metacal.train import components

    set_seed(cfg.run.seed)
    initial = components.build_model(cfg, components.build_data(cfg)).state_dict()
    moved = max(float((expected[f"model.{k}"] - v).abs().max()) for k, v in initial.items())
    assert moved > 1e-2


@pytest.mark.slow
def test_automatic_gamma_is_one_value_on_every_rank(two_process_runs):
    """learner auto: each rank measures its half of meta-val; the summed gap gives both the same γ."""
    out = two_process_runs / "out" / "auto"
    r0, r1 = load(out / "rank0.pt"), load(out / "rank1.pt")
    assert int(r0["auto.updates"]) == int(r1["auto.updates"]) == 3
    assert float(r0["auto.value"]) == float(r1["auto.value"]) != 1.0  # one γ, and it moved (band 0)
    assert float(r0["auto.gap"]) == float(r1["auto.gap"])
    for name in r0:
        torch.testing.assert_close(r0[name], r1[name], rtol=0, atol=0)
