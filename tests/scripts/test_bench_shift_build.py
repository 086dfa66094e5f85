"""Smoke test of scripts/bench_shift_build.py on a tiny MNIST-1D (no timing assertions: the script is the
benchmark; this checks that it builds every set in a temporary folder, reports it and refuses bad settings)."""

import json

from script_loader import load_script


def test_bench_shift_build_json(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("METACAL_DATA", str(tmp_path))  # the benchmark must write elsewhere: its own temporary folder
    assert load_script("bench_shift_build").main(["--num-samples", "100", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["num_samples"], result["seed"], result["sets"]) == (100, 0, 25)
    assert result["wall_s"] > 0 and result["bytes"] > 25 * 100 * 40 * 4 and result["cores"] >= 1
    assert list(tmp_path.iterdir()) == []


def test_bench_shift_build_bad_settings(capsys):
    assert load_script("bench_shift_build").main(["--num-samples", "5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--num-samples must be >= 10" in err
