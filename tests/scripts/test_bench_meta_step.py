"""Smoke test of scripts/bench_meta_step.py on a tiny batch (no timing assertions: the script is the
benchmark; this only checks that it runs and reports what it promises)."""

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_meta_step.py"


def test_bench_script_json(capsys, tmp_path):
    spec = importlib.util.spec_from_file_location("bench_meta_step", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "performance.md"
    code = bench.main(["--reps", "1", "--warmup", "0", "--batch", "8", "--meta-batch", "8",
                       "--memory", "saved", "--json", "--output", str(out)])
    assert code == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(result["meta_s"]) == {"higher", "jvp", "head"}
    assert result["plain_s"] > 0 and result["focal_s"] > 0
    assert result["hypergrad_rel_diff"] < 1e-4
    assert set(result["reference_s"]) == {"floor", "higher_recompute"}
    assert result["higher_over_floor"] > 0 and result["higher_recompute_over_jvp"] > 0
    assert result["peak_mem_mb"]["higher"] > result["peak_mem_mb"]["jvp"]
    text = out.read_text()
    assert "| meta step, `jvp` |" in text and "python scripts/bench_meta_step.py" in text
    assert "| reference: focal step + meta-val fwd/bwd (floor) |" in text and "Bound: `higher` / floor" in text
    assert bench.main(["--reps", "0"]) == 2


def test_reference_lookahead_has_the_higher_backends_hypergradient():
    """The benchmark's "higher_recompute" row is the same γ-Net update as the `higher` backend: from one
    state, the γ-Net gradients agree (float64), and its separate real step equals the backend's."""
    import torch

    spec = importlib.util.spec_from_file_location("bench_meta_step", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    torch.set_default_dtype(torch.float64)
    try:
        args = bench.argparse.Namespace(model="small_resnet", classes=4, size=12, batch=6, meta_batch=5,
                                        objective="sece")
        model, gamma_net, objective, data = bench.build_setup(args, torch.device("cpu"))
        ref = bench.Method("higher_recompute", model, gamma_net, objective, data)
        backend = bench.Method("higher", model, gamma_net, objective, data)
        ref.meta_opt.step = lambda: None  # keep the gradients, skip Adam, so γ is the same in the real step
        ref.step()
        backend.step()
        for p, q in zip(ref.gamma_net.parameters(), backend.gamma_net.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-9, atol=1e-12)
        for p, q in zip(ref.model.parameters(), backend.model.parameters()):
            torch.testing.assert_close(p, q, rtol=1e-9, atol=1e-12)
    finally:
        torch.set_default_dtype(torch.float32)
