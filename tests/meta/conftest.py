"""Meta tests run tiny networks: one intra-op thread is much faster than two on the shared 2-core machine
(thread hand-off dominates 12-sample batches). Restored after each test."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _single_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
