"""scripts/gpu_check.py on a machine without CUDA: one line and exit 0; ``--dry-run`` lists well-formed commands
whose training configs load with their overrides."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from experiments.benchmark.gpu_check import FAMILIES, PRECISIONS, checks, main

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: the check would run")
def test_skips_in_one_line_without_cuda():
    out = subprocess.run([sys.executable, "scripts/gpu_check.py"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0
    assert out.stdout.strip().splitlines() == ["gpu_check: no CUDA device here; nothing checked"]


def test_dry_run_loads_every_config_and_lists_every_check(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["--dry-run", "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    todo = checks(tmp_path)
    assert len(lines) == len(todo) == len(FAMILIES) * len(PRECISIONS) + 7
    assert sum("run.mixed_precision=bf16" in line for line in lines) == len(FAMILIES)
    assert sum("meta.backend=higher" in line for line in lines) == 2
    assert any("accelerate.commands.launch --num_processes 1" in line for line in lines)
    expects = [c.expect for c in todo if "SIGTERM" in c.name or "--resume" in c.name]
    assert expects == [75, 0]
    from metacal.train.config import config_exists

    for check in todo:  # every script it names exists, and every config (a file, or a dataset × method pair)
        assert all((ROOT / arg).exists() for arg in check.argv if arg.endswith(".py"))
        assert all(config_exists(ROOT / arg) for arg in check.argv if arg.endswith(".yaml"))


def test_page_records_every_check_and_the_targets_from_the_benchmarks(tmp_path, monkeypatch):
    """With CUDA faked and every check's command replaced, the page lists each check's exit and derives the
    three GPU targets by hand: CE loop 2.0 + 0.4 s over 375 × 5 ms = 1.28× (not met); FLγ-SECE 5.0 / 2.4 s =
    2.08× (met); jvp 2.2× focal (met)."""
    import json

    import experiments.benchmark.gpu_check as gpu_check

    regime = "configs/fashion_mnist_resnet_overconfident"
    row = {"steps_timed": 100, "steps_per_epoch": 375, "other_s": 0.5, "reads_per_step": 0.0}
    epoch = {"rows": [{**row, "config": f"{regime}/ce.yaml", "method": "ce", "loader_s": 0.4, "step_s": 2.0,
                       "epoch_s": 2.9},
                      {**row, "config": f"{regime}/flgamma_sece.yaml", "method": "flgamma_sece", "loader_s": 0.4,
                       "step_s": 4.6, "epoch_s": 5.5}],
             "loaders": [{"config": f"{regime}/ce.yaml", "per_sample_s": 2.0, "batched_s": 0.1, "speedup": 20.0}]}
    meta = {"plain_s": 0.005, "focal_s": 0.0052, "ratio_to_focal": {"jvp": 2.2, "higher": 4.0, "head": 1.3}}
    kernels = {"unit": "device activities", "bench": {"plain": 310.0, "jvp": 1490.0}, "trainer": {"ce": 402.4}}
    outputs = {"bench_epoch": "timing…\n" + json.dumps(epoch), "bench_meta_step": json.dumps(meta),
               "kernels": json.dumps(kernels),
               "cuda_graphs": json.dumps({"steps": {"plain": {"eager_ms": 5.0, "graph_ms": 1.0, "speedup": 5.0},
                                                    "jvp": {"eager_ms": 24.0, "capture_failed": "RuntimeError: x"}}})}
    ran = []

    def fake_run(check):
        ran.append(check.name)
        code = check.expect if check.name != "focal bf16" else 1
        return code, 1.0, outputs.get(check.name, "")

    monkeypatch.setattr(gpu_check, "run", fake_run)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Fake GPU")
    page = tmp_path / "performance_gpu.md"
    assert main(["--out", str(tmp_path / "runs"), "--output", str(page), "--jobs", "3"]) == 1  # focal bf16 failed
    todo = checks(tmp_path / "runs")
    assert sorted(ran) == sorted(c.name for c in todo)
    assert ran[:4] == ["bench_meta_step", "bench_epoch", "kernels", "cuda_graphs"]
    text = page.read_text()
    assert "Device: Fake GPU" in text and "ran 3 at a time" in text
    assert "2.40 s of training loop" in text and "1.28× (target ≤ 1.25: NOT met)" in text
    assert "5.00 / 2.40 s = 2.08× (target ≤ 2.5: met)" in text
    assert "2.20× (median over rounds of the paired ratio; target ≤ 2.5: met)" in text
    assert "| focal bf16 | 0 | 1 | 1.0 | FAILED |" in text
    assert "| bench_meta_step jvp | 1490 |" in text and "| trainer ce | 402 |" in text
    assert "| plain | 5.00 | 1.00 | 5.0 |" in text and "| jvp | 24.00 | — | not captured: RuntimeError: x |" in text
    assert sum(line.endswith("| ok |") for line in text.splitlines()) == len(todo) - 1
    assert text.index("| bench_meta_step |") < text.index("| ce no |") < text.index("| SIGTERM mid-run → 75 |")

