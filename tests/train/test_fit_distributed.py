"""``metacal.fit`` under torchrun with 2 CPU processes (gloo), as the built-in path is tested in
test_train_distributed.py: every rank passes the same datasets and a stock ``nn.Sequential``.

* FLγ-SECE, 6 meta steps: network and γ-Net bit-identical on both ranks, and the γ-Net moved;
* plain CE, 5 momentum-SGD steps on the global batch 32 = 16 + 16: the same parameters as a single-process
  fit on the same data (float32 summation order: atol 1e-6), and they moved far beyond that.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from fit_ddp_worker import RUNS, data, network, state_of

import metacal
from metacal.models import wrap

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


@pytest.mark.slow
def test_fit_under_torchrun_keeps_ranks_in_sync_and_equals_one_process(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(REPO), str(HERE)])}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(HERE / "fit_ddp_worker.py"), str(tmp_path / "out")]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]

    meta = tmp_path / "out" / "meta"
    r0, r1 = (torch.load(meta / f"rank{r}.pt", weights_only=True) for r in (0, 1))
    assert int(r0["world_size"]) == 2 and r0.keys() == r1.keys() and "gamma_net.bias" in r0
    for name in r0:
        assert torch.equal(r0[name], r1[name]), name
    assert abs(float(r0["gamma_net.bias"]) - 0.01) > 1e-4  # the meta steps moved γ's level from τ·γ0 = 0.01
    metrics = json.loads((meta / "metrics.json").read_text())
    assert (metrics["val"]["n"], metrics["test"]["n"], metrics["runtime"]["num_processes"]) == (40, 120, 2)
    sessions = json.loads((meta / "runtime.json").read_text())["sessions"]
    assert [(s["num_processes"], s["backend"]) for s in sessions] == [(2, "gloo")]

    single = metacal.fit(network(), data(400, 0), test=data(120, 1), run_dir=tmp_path / "single",
                         overrides=RUNS["plain"])
    expected = state_of(single)
    initial = {f"model.{k}": v for k, v in wrap(network(), input_shape=(8,)).state_dict().items()}
    assert max(float((expected[k] - v).abs().max()) for k, v in initial.items()) > 1e-2
    for rank in (0, 1):
        got = torch.load(tmp_path / "out" / "plain" / f"rank{rank}.pt", weights_only=True)
        for name, value in expected.items():
            torch.testing.assert_close(got[name], value, rtol=0, atol=1e-6, msg=name)
