"""MNIST-1D generated locally by mnist1d.make_dataset and cached."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import metacal.data as data
import metacal.data.mnist1d as m1d


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory):
    return tmp_path_factory.mktemp("mnist1d_cache")


def test_shapes_sizes_and_oracle(cache_root):
    from mnist1d.data import get_dataset_args, make_dataset

    b = data.build("mnist1d", root=cache_root, seed=5, num_samples=500)
    assert b.sizes() == {"train": 320, "val": 40, "meta_val": 40, "test": 100}
    assert (b.input_shape, b.in_channels, b.num_classes) == ((1, 40), 1, 10)
    x, y = b.train[0]
    assert x.shape == (1, 40) and x.dtype == torch.float32 and y.dtype == torch.int64
    # independent: the package's own generator with its defaults, our sample count and seed
    args = get_dataset_args()
    args.num_samples, args.seed = 500, 5
    ref = make_dataset(args)
    np.testing.assert_allclose(b.test.dataset.inputs[:, 0].numpy(), ref["x_test"], rtol=0, atol=1e-6)
    assert b.test.targets.tolist() == ref["y_test"].tolist()
    assert b.train.dataset.targets.tolist() == ref["y"].tolist()


def test_cache_hit_and_global_rng_untouched(cache_root, monkeypatch):
    np.random.seed(11)
    random.seed(11)
    expected_np, expected_py = np.random.rand(), random.random()
    np.random.seed(11)
    random.seed(11)
    a = data.build("mnist1d", root=cache_root, seed=6, num_samples=300)
    assert np.random.rand() == expected_np and random.random() == expected_py
    files = list((cache_root / "mnist1d").glob("*.npz"))
    assert files, "generated arrays were not cached"

    def no_generation(args):
        raise AssertionError("cache miss: generated again")

    monkeypatch.setattr(m1d, "generate", no_generation)
    b = data.build("mnist1d", root=cache_root, seed=6, num_samples=300)
    assert torch.equal(a.train.dataset.inputs, b.train.dataset.inputs)
    with pytest.raises(AssertionError, match="cache miss"):  # a different seed is a different cache entry
        data.build("mnist1d", root=cache_root, seed=7, num_samples=300)


def test_seeds_differ(cache_root):
    a = data.build("mnist1d", root=cache_root, seed=1, num_samples=200, cache=False)
    b = data.build("mnist1d", root=cache_root, seed=2, num_samples=200, cache=False)
    assert not torch.equal(a.test.dataset.inputs, b.test.dataset.inputs)
    with pytest.raises(ValueError, match="unknown mnist1d generator argument"):
        data.build("mnist1d", num_samples=200, generator_overrides={"noise": 1.0})
