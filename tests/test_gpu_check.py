"""scripts/gpu_check.py on a machine without CUDA: one line and exit 0; ``--dry-run`` lists well-formed commands
whose training configs load with their overrides."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from experiments.benchmark.gpu_check import BENCHMARKS, FAMILIES, GRAPHED, PRECISIONS, checks, main

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
    extra = 3  # accelerate launch, SIGTERM, resume
    assert len(lines) == len(todo) == len(FAMILIES) * len(PRECISIONS) + len(GRAPHED) + len(BENCHMARKS) + extra
    assert sum("run.cuda_graphs=true" in line for line in lines) == len(GRAPHED)
    assert sum("run.mixed_precision=bf16" in line for line in lines) == len(FAMILIES)
    assert sum("meta.backend=higher" in line for line in lines) == 3  # fp32, bf16, CUDA graphs
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
    2.08× (met); jvp 2.2× focal (met); and again with CUDA graphs: FLγ-SECE 2.0 / CE 1.0 s replayed = 2.00×
    (met), 2.0 / 2.4 s against eager CE = 0.83×, a replayed jvp step 3.0 / 1.0 ms = 3.00× a replayed focal one
    (not met). Both jvp lines give the arithmetic ratio of the FLOP count beside them (2.66×), both FLγ-SECE / CE
    lines that of the trainer's iterations (5.3 / 2.0 GFLOP = 2.65×)."""
    import json

    import experiments.benchmark.flops as gpu_check_flops
    import experiments.benchmark.gpu_check as gpu_check

    regime = "configs/fashion_mnist_resnet_overconfident"
    row = {"steps_timed": 100, "steps_per_epoch": 375, "other_s": 0.5, "reads_per_step": 0.0}
    epoch = {"rows": [{**row, "config": f"{regime}/ce.yaml", "method": "ce", "loader_s": 0.4, "step_s": 2.0,
                       "epoch_s": 2.9},
                      {**row, "config": f"{regime}/flgamma_sece.yaml", "method": "flgamma_sece", "loader_s": 0.4,
                       "step_s": 4.6, "epoch_s": 5.5},
                      {**row, "config": f"{regime}/ce.yaml", "method": "ce", "graphs": True, "loader_s": 0.4,
                       "step_s": 0.6, "epoch_s": 1.5},
                      {**row, "config": f"{regime}/flgamma_sece.yaml", "method": "flgamma_sece", "graphs": True,
                       "loader_s": 0.4, "step_s": 1.6, "epoch_s": 2.5}],
             "loaders": [{"config": f"{regime}/ce.yaml", "per_sample_s": 2.0, "batched_s": 0.1, "speedup": 20.0}]}
    meta = {"plain_s": 0.005, "focal_s": 0.0052, "ratio_to_focal": {"jvp": 2.2, "higher": 4.0, "head": 1.3}}
    kernels = {"unit": "device activities", "bench": {"plain": 310.0, "jvp": 1490.0}, "trainer": {"ce": 402.4}}
    ratios = dict(zip(gpu_check_flops.STEPS, (1.0, 1.0, 2.0, 2.66, 1.34, 3.42, 4.42, 6.74)))
    flops = {"flops": {n: int(2e9 * r) for n, r in ratios.items()}, "ratio_to_focal": ratios,
             "trainer": {"ce": 2.0e9, "focal": 2.0e9, "flgamma_sece": 5.3e9}}
    outputs = {"bench_epoch": "timing…\n" + json.dumps(epoch), "bench_meta_step": json.dumps(meta),
               "kernels": json.dumps(kernels), "flops": json.dumps(flops),
               "cuda_graphs": json.dumps({"steps": {"plain": {"eager_ms": 5.0, "graph_ms": 1.0, "speedup": 5.0},
                                                    "focal": {"eager_ms": 5.5, "graph_ms": 1.0, "speedup": 5.5},
                                                    "jvp": {"eager_ms": 24.0, "graph_ms": 3.0, "speedup": 8.0},
                                                    "head": {"eager_ms": 24.0, "capture_failed": "RuntimeError: x"}}}),
               "graph_equivalence": json.dumps({"cases": {"jvp": {"steps": 12, "replayed": 9, "bitwise_equal": True,
                                                                  "max_rel_diff": 0.0}}})}
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
    assert ran[:6] == ["bench_meta_step", "bench_epoch", "kernels", "flops", "cuda_graphs", "graph_equivalence"]
    text = page.read_text()
    assert "Device: Fake GPU" in text and "ran 3 at a time" in text
    assert "2.40 s of training loop" in text and "1.28× (target ≤ 1.25: NOT met)" in text
    assert "5.00 / 2.40 s = 2.08× (target ≤ 2.5: met; arithmetic 2.65× per iteration)" in text
    arithmetic = "; arithmetic 2.66× (FLOPs, experiments.benchmark.flops))"
    assert f"2.20× (median over rounds of the paired ratio; target ≤ 2.5: met{arithmetic}" in text
    assert "both replayed: 2.00 / 1.00 s = 2.00× (target ≤ 2.5: met; arithmetic 2.65× per iteration)" in text
    assert "| flgamma_sece | 5.300 | 2.65 |" in text
    assert "FLγ-SECE replayed / CE eager (training loop): 2.00 / 2.40 s = 0.83×" in text
    assert f"both replayed from a CUDA graph: 3.00× (medians; target ≤ 2.5: NOT met{arithmetic}" in text
    assert "| meta step, `jvp` | 5.320 | 2.66 |" in text and "| plain CE step | 2.000 | 1.00 |" in text
    assert "| jvp | 12 | 9 | yes | 0.0e+00 |" in text
    assert "`configs/fashion_mnist_resnet_overconfident/ce.yaml` (CUDA graphs) | 100 / 375 | 0.40 | 0.60 |" in text
    assert "| focal bf16 | 0 | 1 | 1.0 | FAILED |" in text
    assert "| bench_meta_step jvp | 1490 |" in text and "| trainer ce | 402 |" in text
    assert "| plain | 5.00 | 1.00 | 5.0 |" in text and "| head | 24.00 | — | not captured: RuntimeError: x |" in text
    assert sum(line.endswith("| ok |") for line in text.splitlines()) == len(todo) - 1
    assert text.index("| bench_meta_step |") < text.index("| ce no |") < text.index("| SIGTERM mid-run → 75 |")



def test_the_graphed_training_checks_are_not_refused(tmp_path, monkeypatch):
    """Their configs pass run.cuda_graphs' checks (asked as on a CUDA machine: capture exists)."""
    from metacal import losses, models
    from metacal.train import cuda_graphs, load_config

    monkeypatch.setattr(cuda_graphs, "capture_for", lambda device: object())
    graphed = [c for c in checks(tmp_path) if c.name.endswith("CUDA graphs")]
    assert len(graphed) == len(GRAPHED)
    for check in graphed:
        cfg = load_config(ROOT / check.config, check.overrides)
        assert cfg.run.cuda_graphs
        model = models.build(cfg.model.name, num_classes=10, in_channels=1, **cfg.model.options)
        loss = losses.build(cfg.loss.name, **cfg.loss.params)
        assert cuda_graphs.graph_problem(cfg, torch.device("cpu"), 1, model, loss, True) is None, check.name
