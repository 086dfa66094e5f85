"""Smoke test of scripts/bench_meta_step.py on a tiny batch (no timing assertions: the script is the
benchmark; this only checks that it runs and reports what it promises)."""

import importlib.util
import json
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_meta_step.py"


def test_bench_script_json(capsys, tmp_path):
    spec = importlib.util.spec_from_file_location("bench_meta_step", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "performance.md"
    code = bench.main(["--reps", "3", "--warmup", "0", "--batch", "8", "--meta-batch", "8",
                       "--memory", "saved", "--malloc", "glibc", "--json", "--output", str(out)])
    assert code == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(result["meta_s"]) == {"higher", "jvp", "head"}
    assert result["plain_s"] > 0 and result["focal_s"] > 0
    assert result["hypergrad_rel_diff"] < 1e-4
    assert set(result["reference_s"]) == {"floor", "higher_recompute", "jvp_trajectory"}
    assert result["higher_over_floor"] > 0 and result["higher_recompute_over_jvp"] > 0
    assert result["trajectory_over_jvp"] > 1  # the trajectory level adds work to the jvp meta step
    assert result["peak_mem_mb"]["higher"] > result["peak_mem_mb"]["jvp"]
    text = out.read_text()
    assert "| meta step, `jvp` |" in text and "python scripts/bench_meta_step.py" in text
    assert "| reference: focal step + meta-val fwd/bwd (floor) |" in text and "one tangent pass" in text
    # every ratio is the median over rounds of the within-round ratio (raw per-round times in the JSON)
    times = result["times_s"]
    assert all(len(v) == 3 for v in times.values())
    rounds = [{n: t[r] for n, t in times.items()} for r in range(3)]
    med = lambda f: sorted(f(r) for r in rounds)[1]  # noqa: E731  (median of 3)
    assert result["tangent_pass_focal"] == pytest.approx(med(lambda t: (t["jvp"] - t["floor"]) / t["focal"]))
    assert result["tangent_pass_for_2x_focal"] == pytest.approx(
        med(lambda t: (t["higher"] / 2 - t["floor"]) / t["focal"]))
    assert result["higher_over_jvp"] == pytest.approx(med(lambda t: t["higher"] / t["jvp"]))
    assert result["ratio_to_focal"]["head"] == pytest.approx(med(lambda t: t["head"] / t["focal"]))
    assert result["targets_met"]["jvp ≥ 2× faster than higher"] == (result["higher_over_jvp"] >= 2.0)
    assert set(result["minor_faults_per_step"]) == set(times) and result["malloc"] == "glibc"
    assert all(f >= 0 for f in result["minor_faults_per_step"].values())
    assert "page faults/step |" in text and "`--malloc glibc`" in text
    assert bench.main(["--reps", "0"]) == 2


@pytest.mark.parametrize("argv, says", [
    (["--model", "nope"], "unknown model 'nope'"),
    (["--model", "torchvision:nope"], "unknown torchvision model 'nope'"),
    (["--objective", "nope"], "unknown objective 'nope'; available: avuc, dece"),
    (["--device", "nope"], "--device 'nope' is not a device"),
    pytest.param(["--device", "cuda"], "--device cuda: no CUDA device on this machine",
                 marks=pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")),
    (["--threads", "0"], "--threads must be positive, got 0"),
    (["--batch", "0"], "--reps, --batch, --meta-batch, --classes, --size must be positive"),
])
def test_bad_options_are_one_line_before_anything_is_set(capsys, argv, says):
    """Refused before the thread count or the allocator is touched (the options ask for another valid count)."""
    spec = importlib.util.spec_from_file_location("bench_meta_step", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    threads = torch.get_num_threads()
    other = ["--threads", str(threads + 1)] if "--threads" not in argv else []
    assert bench.main([*argv, "--no-write", *other]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith("error: ") and says in captured.err
    assert torch.get_num_threads() == threads
