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
    (None, "no such file; pass a .npz with 'labels' and 'logits' or 'probs'"),
    ({"x": np.zeros(3)}, "missing key 'labels' (found: x)"),
    ({"logits": np.zeros((5, 3))}, "missing key 'labels' (found: logits)"),
    ({"logits": np.zeros((5, 3)), "labels": np.zeros(4)}, "'labels' must have shape (5,) to match 'logits' (5, 3), "
                                                           "got (4,)"),
    ({"logits": np.zeros(5), "labels": np.zeros(5)}, "'logits' must be N×K with N ≥ 1 and K ≥ 2, got shape (5,)"),
    ({"logits": np.zeros((2, 3)), "labels": np.array([0, 3])}, "'labels' must lie in [0, 2] for K = 3, got [0, 3]"),
    ({"logits": np.zeros((0, 3)), "labels": np.zeros(0)}, "'logits' must be N×K with N ≥ 1 and K ≥ 2, got shape (0, 3)"),
    (b"not an archive", "cannot read as .npz"),
], ids=["missing", "other keys", "no labels", "lengths", "1-d logits", "label ≥ K", "empty", "not npz"])
def test_bench_posthoc_bad_predictions_file_is_one_line(tmp_path, capsys, content, says):
    """The file is read by metacal.predictions.load_predictions, whose one-line reasons the script prints."""
    path = tmp_path / "val.npz"
    if isinstance(content, dict):
        np.savez(path, **content)
    elif content is not None:
        path.write_bytes(content)
    assert load().main(["--predictions", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith(f"bench_posthoc: error: {path}: ") and says in captured.err


def test_bench_posthoc_reads_probabilities_as_log_probabilities(tmp_path, capsys):
    """A probs-only file (as predictions of a model without logits) is fitted on log p: the same N and K."""
    rng = np.random.default_rng(1)
    z = rng.normal(size=(200, 3))
    path = tmp_path / "val.npz"
    np.savez(path, probs=np.exp(z) / np.exp(z).sum(1, keepdims=True), labels=rng.integers(0, 3, 200))
    assert load().main(["--predictions", str(path), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["n"], result["k"]) == (200, 3)
