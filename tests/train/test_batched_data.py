"""``data.batched`` (whole batches by tensor indexing) trains exactly as the per-sample path (``false``): the same
batches in the same order and the same tensors, so history.json and metrics.json agree to the bit (times
aside), for a plain step and the FLγ-SECE meta step (whose meta-val stream is batched too)."""

from __future__ import annotations

import json

import pytest
from train_tiny import METHODS, TINY, deep_merge

from metacal.train import load_config, train
from metacal.train.run_dir import prepare_run_dir
from tests.installed import requires_fashion_mnist

#: keys that hold wall-clock times (they differ between any two runs)
TIMES = ("time_s", "auto_measure_s")


def without_times(tree: object) -> object:
    if isinstance(tree, dict):
        return {k: without_times(v) for k, v in tree.items() if k not in TIMES and not k.endswith("_seconds")}
    if isinstance(tree, list):
        return [without_times(v) for v in tree]
    return tree


def run_both(tmp_path, config: dict) -> list[tuple[object, object]]:
    """(history, metrics) of the run with data.batched true and false."""
    out = []
    for batched in (True, False):
        cfg = load_config(None, base=deep_merge(config, {"data": {"batched": batched}}))
        root = tmp_path / f"batched_{batched}"
        train(cfg, prepare_run_dir(root))
        history = json.loads((root / "history.json").read_text())
        out.append((without_times(history), without_times(json.loads((root / "metrics.json").read_text()))))
    return out




@pytest.mark.parametrize("method", ["ce", "flgamma_sece"])
def test_mnist1d_history_is_identical_with_and_without_batching(tmp_path, method):
    config = deep_merge(deep_merge(TINY, METHODS[method]), {
        "data": {"name": "mnist1d", "root": str(tmp_path / "cache"), "batch_size": 32, "options": {}},
        "model": {"name": "mlp", "options": {"hidden": [32]}}})
    config["data"]["options"] = {"num_samples": 600}
    (new_history, new_metrics), (old_history, old_metrics) = run_both(tmp_path, config)
    assert len(new_history) == 2 and new_history[-1]["train"]["loss"] > 0
    assert new_history == old_history
    assert new_metrics == old_metrics


@requires_fashion_mnist
def test_fashion_mnist_history_is_identical_with_and_without_batching(tmp_path):
    config = deep_merge(TINY, {
        "data": {"name": "fashion_mnist", "batch_size": 64, "options": {"train_subset": 640}},
        "model": {"name": "mlp", "options": {"hidden": [32]}}, "schedule": {"epochs": 1, "milestones": []},
        "run": {"max_steps_per_epoch": None}})
    config["data"]["options"] = {"train_subset": 640}
    (new_history, new_metrics), (old_history, old_metrics) = run_both(tmp_path, config)
    assert new_history[0]["val"]["error"] < 0.5  # it learned something: the comparison is not of empty runs
    assert new_history == old_history
    assert new_metrics == old_metrics
