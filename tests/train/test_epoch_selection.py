"""Epoch selection: the lowest validation ``eval.select_by`` metric wins, and a tie goes to the lower validation
NLL (to the lower error for select_by nll) — with a small validation split the error ties across epochs, and
keeping the first of them kept a worse network. The rule reads only the checkpointed best validation metrics,
so a resumed run decides as an uninterrupted one."""

from __future__ import annotations

import json

import pytest
from train_tiny import read_metrics

import metacal.train.loop as loop
from metacal.train.epoch_eval import improves, selection_key

# validation metrics per epoch: the error ties at epochs 1-3, epoch 2 has the lowest NLL
VAL = [{"error": 0.25, "nll": 1.0}, {"error": 0.25, "nll": 0.9}, {"error": 0.25, "nll": 0.95}]
SHORT = {"schedule": {"epochs": 3, "milestones": [2]}, "logging": {"tensorboard": False, "reliability_every": 0},
         "eval": {"bootstrap": 0}}


def test_ties_are_broken_by_the_second_metric():
    assert selection_key({"error": 0.1, "nll": 0.3, "ece": 0.02}, "error") == (0.1, 0.3)
    assert selection_key({"error": 0.1, "nll": 0.3, "ece": 0.02}, "nll") == (0.3, 0.1)
    assert selection_key({"error": 0.1, "nll": 0.3, "ece": 0.02}, "ece") == (0.02, 0.3)
    best = {"error": 0.25, "nll": 0.9}
    assert improves({"error": 0.25, "nll": 0.8}, best, "error")  # tie on error, lower NLL: the later epoch
    assert not improves({"error": 0.25, "nll": 0.9}, best, "error")  # a full tie keeps the earlier one
    assert improves({"error": 0.2, "nll": 5.0}, best, "error")  # the select_by metric comes first
    assert improves({"error": 0.2, "nll": 0.9}, {"error": 0.25, "nll": 0.9}, "nll")  # nll tie: lower error
    assert improves({"error": 1.0, "nll": 9.0}, None, "error") and improves({"error": 1.0, "nll": 9.0}, {}, "error")
    assert not improves({"error": float("nan"), "nll": 0.1}, None, "error")  # a NaN score never wins


@pytest.fixture
def tied_validation(monkeypatch):
    """The trainer's validation summaries with error and NLL replaced by :data:`VAL`, epoch by epoch (the
    validation split has 40 samples, the test split 120)."""
    real = loop.summarize
    seen = []

    def summarize(pred, *args, **kwargs):
        out = real(pred, *args, **kwargs)
        if pred.labels.numel() == 40:
            out.update(VAL[len(seen)])
            seen.append(out)
        return out

    monkeypatch.setattr(loop, "summarize", summarize)
    return seen


@pytest.mark.slow
def test_a_tie_on_error_keeps_the_later_epoch_with_lower_nll(tied_validation, write_config, run_cli, tmp_path):
    run_dir = tmp_path / "run"
    code, out, err = run_cli(["--config", write_config("tie", SHORT), "--run-dir", run_dir])
    assert code == 0, err
    metrics = read_metrics(run_dir)
    assert metrics["epoch"] == 2 and metrics["val"]["error"] == 0.25 and metrics["val"]["nll"] == 0.9
    marked = [line.split()[1] for line in out.splitlines() if line.startswith("epoch ") and line.endswith(" *")]
    assert marked == ["1/3", "2/3"]
    assert ("finished: selected epoch 2 of 3 — lowest validation error (eval.select_by=error; on a tie, the lower "
            "validation NLL)") in out
    state = json.loads((run_dir / "checkpoints" / "best" / "train_state.json").read_text())
    assert state["best_epoch"] == 2


@pytest.mark.slow
def test_a_resumed_run_breaks_ties_from_its_checkpoint(tied_validation, write_config, run_cli, tmp_path):
    run_dir = tmp_path / "run"
    config = write_config("tie", {**SHORT, "schedule": {"epochs": 1, "milestones": [2]}})
    assert run_cli(["--config", config, "--run-dir", run_dir])[0] == 0
    assert read_metrics(run_dir)["epoch"] == 1
    code, out, err = run_cli(["--run-dir", run_dir, "--resume", "--set", "schedule.epochs=3"])
    assert code == 0, err
    assert read_metrics(run_dir)["epoch"] == 2 and read_metrics(run_dir)["val"]["nll"] == 0.9
