"""Shared test settings: seeded, one intra-op thread (tests use tiny tensors; on a 2-core machine one
thread avoids oversubscription and is many times faster), matplotlib without a screen, and the trainer's
process-wide malloc setting (``run.malloc_retain``) left out of the pytest process, so that no test's
memory behaviour depends on which trainer test ran before it; tests/train/test_runtime.py checks that
setting in fresh processes, and the CLI tests run real training processes with it."""

import os

os.environ.setdefault("MPLBACKEND", "Agg")

import pytest  # noqa: E402
import torch  # noqa: E402


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
