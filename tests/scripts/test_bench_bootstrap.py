"""Smoke test of scripts/bench_bootstrap.py on a tiny problem (no timing assertions: the script is the
benchmark; this only checks that it runs, reports what it promises and refuses bad settings)."""

import json

from script_loader import load_script


def load():
    return load_script("bench_bootstrap")


def test_bench_bootstrap_json(capsys):
    code = load().main(["--n", "300", "--k", "3", "--bootstrap", "20", "--repeats", "2", "--loop-samples", "1",
                        "--json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["n"], result["k"], result["bootstrap"], result["threads"]) == (300, 3, 20, 1)
    assert len(result["batched_wall_s"]) == 2 and len(result["batched_cpu_s"]) == 2
    assert result["batched_wall_median_s"] > 0 and result["loop_wall_s"] > 0
    assert set(result["skipped_cpu_s"]) == {"sece", "kde_ece", "smece"}


def test_bench_bootstrap_bad_settings(capsys):
    assert load().main(["--bootstrap", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "must be >= 1" in err
