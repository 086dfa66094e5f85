"""Shared constants and helpers of the trainer tests (imported by conftest and the tests)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

# 4-class Gaussian mixture, 8-d inputs: 320 train / 40 val / 40 meta-val / 120 test samples.
TINY = {
    "data": {"name": "gaussian_mixture", "batch_size": 32, "eval_batch_size": 64,
             "options": {"n_train": 400, "n_test": 120, "dim": 8, "num_classes": 4}},
    "model": {"name": "mlp"},
    "loss": {"name": "ce"},
    "meta": {"batch_size": 20},
    "optim": {"lr": 0.1},
    "schedule": {"epochs": 2, "milestones": [1]},
    "logging": {"progress_bar": False},
    "run": {"seed": 0, "torch_threads": 1},
}

METHODS = {
    "ce": {"loss": {"name": "ce"}},
    "focal": {"loss": {"name": "focal", "params": {"gamma": 1.0}}},
    "adafocal": {"loss": {"name": "adafocal"}},
    "mixup": {"loss": {"name": "mixup", "params": {"alpha": 1.0}}},
    "ce_dece": {"loss": {"name": "ce_learnable_l2"},
                "learner": "loss", "meta": {"objective": "dece"}},
    "flgamma_sece": {"loss": {"name": "focal"},
                     "learner": "gamma_net", "meta": {"objective": "sece", "backend": "jvp"}},
}


def deep_merge(base: dict, top: dict) -> dict:
    out = dict(base)
    for key, value in top.items():
        out[key] = deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def read_metrics(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


def flat_numbers(tree: object, prefix: str = "") -> dict[str, object]:
    """``{"a": {"b": 1}, "c": [2, 3]}`` → ``{"a.b": 1, "c.0": 2, "c.1": 3}``: the leaves of a JSON tree by
    dotted path, so two trees compare leaf by leaf (``pytest.approx`` refuses nested dicts from pytest 9.2 on)."""
    if isinstance(tree, dict):
        items = tree.items()
    elif isinstance(tree, (list, tuple)):
        items = enumerate(tree)
    else:
        return {prefix: tree}
    out: dict[str, object] = {}
    for key, value in items:
        out.update(flat_numbers(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def assert_same_numbers(expected: dict, got: dict, abs_tol: float, where: object = "") -> None:
    """The two JSON trees have the same leaves; numbers agree within ``abs_tol``, other leaves exactly."""
    want, have = flat_numbers(expected), flat_numbers(got)
    assert have.keys() == want.keys(), (where, sorted(have.keys() ^ want.keys()))
    for key, value in want.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            assert have[key] == pytest.approx(value, abs=abs_tol, nan_ok=True), (where, key)
        else:
            assert have[key] == value, (where, key)
