"""Shared test settings: seeded, one intra-op thread (tests use tiny tensors; on a 2-core machine one
thread avoids oversubscription and is many times faster), matplotlib without a screen, and the trainer's
process-wide malloc setting (``run.malloc_retain``) left out of the pytest process, so that no test's
memory behaviour depends on which trainer test ran before it; tests/train/test_runtime.py checks that
setting in fresh processes, and the CLI tests run real training processes with it."""

import os

os.environ.setdefault("MPLBACKEND", "Agg")

import json  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from tests.data.conftest import cifar10_dir  # noqa: E402, F401  (tiny CIFAR-10 in its real format, for cifar_run)


@pytest.fixture(autouse=True)
def _seeded_single_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(autouse=True)
def _no_process_wide_malloc_setting(monkeypatch):
    import metacal.train.process_settings

    monkeypatch.setattr(metacal.train.process_settings, "retain_freed_memory", lambda: False)


def train_tiny_run(tmp_path: Path, name: str, data: dict, model: dict, epochs: int = 2) -> Path:
    """A finished CE run (``epochs`` epochs, seed 0, one thread, no TensorBoard) of ``data`` and ``model`` in
    ``tmp_path/name``, trained through the CLI."""
    from metacal.train.cli import main as train_main

    config = {"data": {"batch_size": 32, "eval_batch_size": 64, **data}, "model": model, "loss": {"name": "ce"},
              "optim": {"lr": 0.05}, "schedule": {"epochs": epochs, "milestones": [epochs]},
              "eval": {"bootstrap": 0}, "run": {"seed": 0, "torch_threads": 1},
              "logging": {"tensorboard": False, "progress_bar": False, "reliability_every": 0}}
    path = tmp_path / f"{name}.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    run_dir = tmp_path / name
    assert train_main(["--config", str(path), "--run-dir", str(run_dir)]) == 0
    return run_dir


@pytest.fixture(scope="session")
def mnist1d_run(tmp_path_factory) -> Path:
    """A finished MNIST-1D run (2,000 generated samples, MLP [32], 2 epochs), shared by the evaluation and
    predictor tests (which add files under shift/ and calibration/, never change what training wrote)."""
    tmp = tmp_path_factory.mktemp("mnist1d_run")
    return train_tiny_run(tmp, "m1d", {"name": "mnist1d", "root": str(tmp / "cache"),
                                       "options": {"num_samples": 2000}}, {"name": "mlp", "options": {"hidden": [32]}})


@pytest.fixture(scope="session")
def cifar_run(tmp_path_factory, cifar10_dir) -> Path:  # noqa: F811
    """A finished run on the tiny CIFAR-10 files (MLP [16], no augmentation)."""
    tmp = tmp_path_factory.mktemp("cifar_run")
    return train_tiny_run(tmp, "c10", {"name": "cifar10", "root": str(cifar10_dir.root), "options": {"augment": False}},
                          {"name": "mlp", "options": {"hidden": [16]}})
