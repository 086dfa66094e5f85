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
    assert result["peak_mem_mb"]["higher"] > result["peak_mem_mb"]["jvp"]
    text = out.read_text()
    assert "| meta step, `jvp` |" in text and "python scripts/bench_meta_step.py" in text
    assert bench.main(["--reps", "0"]) == 2
