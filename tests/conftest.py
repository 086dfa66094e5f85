"""Shared test settings: seeded, one intra-op thread (tests use tiny tensors; on a 2-core machine one
thread avoids oversubscription and is many times faster), matplotlib without a screen."""

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
