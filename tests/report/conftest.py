"""Synthetic run directories in the trainer's format (seeded random logits/labels), for the report tests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from grid_specs import loss_config


def synthetic_predictions(rng: np.random.Generator, n: int, k: int, sharpness: float) -> tuple[np.ndarray, np.ndarray]:
    """Logits whose argmax is right ~70% of the time; ``sharpness`` > 1 makes the model overconfident."""
    labels = rng.integers(0, k, size=n)
    logits = rng.normal(0.0, 1.0, size=(n, k))
    right = rng.random(n) < 0.7
    logits[np.arange(n)[right], labels[right]] += 2.0
    return (logits * sharpness).astype(np.float32), labels.astype(np.int64)


def write_run(
    run_dir: Path,
    seed: int,
    *,
    n: int = 400,
    k: int = 5,
    sharpness: float = 1.0,
    epochs: int = 3,
    epoch_times: list[float] | None = None,
    gamma: bool = False,
    metrics: bool = True,
    predictions: bool = True,
    done: bool = True,
    probs_only: bool = False,
    test_metrics: dict | None = None,
    val_metrics: dict | None = None,
) -> Path:
    """Write config.yaml (its loss: what the run folder's parent, a method stem, trains), predictions/{val,test}.npz,
    metrics.json, history.json, and ``"finished": true`` in metrics.json (``done``).

    metrics.json["test"] is ``test_metrics`` when given (known values), else metacal.metrics.summary;
    metrics.json["val"] is ``val_metrics`` (default {}).
    """
    from metacal.metrics import summary

    run_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1000 + seed)
    config = {"run": {"seed": seed}, "data": {"name": "synthetic"}, "loss": loss_config(run_dir.parent.name)}
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    splits = {}
    for split in ("val", "test"):
        logits, labels = synthetic_predictions(rng, n, k, sharpness)
        splits[split] = (logits, labels)
        if predictions:
            (run_dir / "predictions").mkdir(exist_ok=True)
            if probs_only:
                probs = torch.softmax(torch.from_numpy(logits).double(), dim=1).numpy()
                np.savez(run_dir / "predictions" / f"{split}.npz", probs=probs, labels=labels)
            else:
                np.savez(run_dir / "predictions" / f"{split}.npz", logits=logits, labels=labels)
    if metrics:
        z, y = splits["test"]
        if test_metrics is None:  # what the trainer writes: metacal.metrics.summary of the test predictions
            test_metrics = summary(torch.softmax(torch.from_numpy(z).double(), dim=1), torch.from_numpy(y))
        summ = {"val": dict(val_metrics or {}), "test": dict(test_metrics)}
        (run_dir / "metrics.json").write_text(json.dumps({"epoch": epochs - 1, **summ}))
    times = epoch_times if epoch_times is not None else [1.0 + seed] * epochs
    history = []
    for e, t in enumerate(times):
        rec = {"epoch": e, "time_s": t, "lr": 0.1, "train": {"loss": 1.0 / (e + 1)},
               "val": {"ece": 0.1}, "test": {"ece": 0.1 * (e + 1) + 0.01 * seed, "error": 0.3}}
        if gamma:
            rec["train"].update(gamma_mean=1.0, gamma_std=0.0)
            rec["test"].update(gamma_mean=1.0 + 0.5 * e + seed, gamma_std=0.1 * e)
        history.append(rec)
    (run_dir / "history.json").write_text(json.dumps(history))
    if done:  # what the trainer writes last
        path = run_dir / "metrics.json"
        saved = json.loads(path.read_text()) if path.is_file() else {}
        path.write_text(json.dumps({**saved, "finished": True}))
    return run_dir


@pytest.fixture
def run_writer():
    return write_run


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Tiny tensors: one intra-op thread avoids oversubscription on the shared 2-core machine (restored after)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
