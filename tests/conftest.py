"""Shared test settings: deterministic, single-threaded-friendly torch on the 2-core CI machine."""

import os

import matplotlib

matplotlib.use("Agg")
os.environ.setdefault("MPLBACKEND", "Agg")

import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.fixture(autouse=True)
def _seed_everything():
    torch.manual_seed(0)
    yield
