"""Helpers of the predictor tests; the tiny finished runs (MNIST-1D vectors, CIFAR-10 images) are the session's
(tests/conftest.py)."""

from __future__ import annotations

import shutil
from pathlib import Path


# mnist1d_run, cifar_run: the session's tiny finished runs (tests/conftest.py)


def copy_run(run: Path, to: Path) -> Path:
    """A copy of a finished run (its checkpoint links kept) that a test may change."""
    shutil.copytree(run, to, symlinks=True)
    return to


def mnist1d_test_inputs(run: Path):
    """The raw test inputs (N, 1, 40) and labels of an MNIST-1D run (its raw format is the model-ready one)."""
    import torch

    from metacal.predict.network import load_run

    test = load_run(run, "cpu").bundle.test
    return torch.stack([test[i][0] for i in range(len(test))]), torch.as_tensor(test.targets, dtype=torch.int64)
