"""Smoke test of scripts/bench_posthoc.py on a tiny problem (no timing assertions: the script is the
benchmark). Both engines must report the same end values, since they minimise the same convex L."""

import json

import numpy as np
import pytest

from script_loader import load_script


def load():
    return load_script("bench_posthoc")


def test_bench_posthoc_json(capsys):
    assert load().main(["--n", "400", "--k", "3", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["n"], result["k"]) == (400, 3)
    assert len(result["rows"]) == 7 + 2
    for row in result["rows"]:
        assert row["newton"] > 0 and row["lbfgs"] > 0
        assert row["newton_value"] == pytest.approx(row["lbfgs_value"], abs=1e-6)


def test_bench_posthoc_reads_predictions(tmp_path, capsys):
    rng = np.random.default_rng(0)
    path = tmp_path / "val.npz"
    np.savez(path, logits=rng.normal(size=(300, 4)) * 2, labels=rng.integers(0, 4, 300))
    assert load().main(["--predictions", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("N = 300, K = 4") and out.count("\n") == 2 + 9


def test_bench_posthoc_bad_settings(capsys):
    assert load().main(["--k", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--k ≥ 2" in err


@pytest.mark.parametrize("content, says", [
    (None, "no such file"),
    ({"x": np.zeros(3)}, "no logits or labels in it"),
    ({"logits": np.zeros((5, 3))}, "no labels in it"),
    ({"logits": np.zeros((5, 3)), "labels": np.zeros(4)}, "logits must be N×K (K ≥ 2) with N labels, got (5, 3) and (4,)"),
    ({"logits": np.zeros(5), "labels": np.zeros(5)}, "logits must be N×K"),
    ({"logits": np.zeros((2, 3)), "labels": np.array([0, 3])}, "labels must be class indices in [0, 3)"),
    ({"logits": np.zeros((0, 3)), "labels": np.zeros(0)}, "labels must be class indices in [0, 3)"),
    (b"not an archive", "not a numpy .npz file"),
], ids=["missing", "other keys", "no labels", "lengths", "1-d logits", "label ≥ K", "empty", "not npz"])
def test_bench_posthoc_bad_predictions_file_is_one_line(tmp_path, capsys, content, says):
    path = tmp_path / "val.npz"
    if isinstance(content, dict):
        np.savez(path, **content)
    elif content is not None:
        path.write_bytes(content)
    assert load().main(["--predictions", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith(f"bench_posthoc: error: --predictions {path}: ") and says in captured.err
