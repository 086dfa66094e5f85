"""The installed Fashion-MNIST (apt-get install dataset-fashion-mnist), when present."""

from __future__ import annotations

import pytest
import torch

import metacal.data as data
from metacal.data.fashion_mnist import find_fashion_mnist_files


@pytest.fixture(scope="module")
def bundle():
    try:
        find_fashion_mnist_files()
    except data.DataNotFoundError as err:
        pytest.skip(f"Fashion-MNIST is not installed here: {err}")
    return data.build("fashion_mnist", seed=0)


def test_sizes_and_official_labels(bundle):
    assert bundle.sizes() == {"train": 48_000, "val": 6_000, "meta_val": 6_000, "test": 10_000}
    base = bundle.train.dataset
    assert len(base) == 60_000
    # first labels of train-labels-idx1-ubyte and t10k-labels-idx1-ubyte (Ankle boot, T-shirt, ...)
    assert base.targets[:10].tolist() == [9, 0, 0, 3, 0, 2, 7, 2, 5, 5]
    assert bundle.test.targets[:10].tolist() == [9, 2, 1, 1, 6, 1, 4, 6, 5, 7]
    assert torch.equal(base.targets.bincount(), torch.full((10,), 6000))
    assert torch.equal(bundle.test.targets.bincount(), torch.full((10,), 1000))


def test_normalisation_matches_data(bundle):
    pixels = bundle.train.dataset.images.float() / 255
    normed = (pixels - bundle.mean[0]) / bundle.std[0]
    assert abs(normed.mean().item()) < 1e-3 and abs(normed.std().item() - 1) < 1e-3
    x, y = bundle.test[0]
    assert x.shape == (1, 28, 28) and int(y) == 9
    torch.testing.assert_close(x, (bundle.test.dataset.images[0].float() / 255 - 0.2860) / 0.3530)
