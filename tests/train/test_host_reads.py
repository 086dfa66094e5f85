"""The training iterations read nothing back to the host: losses, γ and meta-step diagnostics stay on the device
until a logging point (a periodic checkpoint, a stop signal, the epoch's end).

Counted scope (experiments/benchmark/host_reads.py): the body of the training loop — the stepper's step, the
finiteness bookkeeping, the running sums, TensorBoard, the progress bar and the stop-signal check — from the
moment a batch arrives until the loop asks for the next one. The data loading and the epoch-end evaluation are
outside it. Counted calls: ``Tensor.item``, ``tolist``, ``__float__``, ``__int__``, ``__bool__``, ``cpu``."""

from __future__ import annotations

import pytest
from train_tiny import METHODS, TINY, deep_merge

from experiments.benchmark.host_reads import HostReadCounter, counted_steps
from metacal.train import load_config
from metacal.train.run_dir import prepare_run_dir

#: 800 training samples in batches of 8: 100 iterations in the one epoch; TensorBoard on (its per-step meta
#: diagnostics are buffered), no periodic checkpoint.
MANY_STEPS = {"data": {"batch_size": 8, "options": {"n_train": 1000}}, "meta": {"batch_size": 8},
              "schedule": {"epochs": 1, "milestones": []}, "logging": {"tensorboard": True}}
AUTO = {"loss": {"name": "focal", "params": {"gamma": 1.0}},
        "learner": "auto", "auto": {"first_step": 1.0, "start": 1.0, "updates_per_epoch": 1}}
CASES = {"ce": METHODS["ce"], "flgamma_sece": METHODS["flgamma_sece"], "auto_gamma": AUTO}
#: at most one host read per 20 iterations
MAX_READS_PER_STEP = 0.05


def count_reads(tmp_path, method: dict) -> HostReadCounter:
    from metacal.train import train

    cfg = load_config(None, base=deep_merge(deep_merge(TINY, method), MANY_STEPS))
    with counted_steps(HostReadCounter()) as counter:
        train(cfg, prepare_run_dir(tmp_path / "run"))
    return counter


@pytest.mark.parametrize("name", sorted(CASES))
def test_training_steps_read_at_most_once_per_twenty_steps(tmp_path, name):
    counter = count_reads(tmp_path, CASES[name])
    assert counter.steps == 100
    assert counter.per_step() <= MAX_READS_PER_STEP, dict(counter.calls)
