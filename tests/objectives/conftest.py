"""Objectives tests use tiny tensors: one intra-op thread avoids thread contention on the shared 2-core machine."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _single_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
