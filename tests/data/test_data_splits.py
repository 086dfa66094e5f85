"""The seeded 8:1:1 split of the official training set."""

from __future__ import annotations

import pytest
import torch

import metacal.data as data
from metacal.data.splits import split_indices


def as_set(t: torch.Tensor) -> set:
    return set(t.tolist())


@pytest.mark.parametrize("n, sizes", [(60_000, (48_000, 6_000, 6_000)), (50_000, (40_000, 5_000, 5_000)),
                                      (73_257, (58_605, 7_326, 7_326)), (1_001, (801, 100, 100))])
def test_sizes_disjoint_and_cover(n, sizes):
    s = split_indices(n, seed=0)
    assert (len(s.train), len(s.val), len(s.meta_val)) == sizes
    assert not (as_set(s.train) & as_set(s.val) or as_set(s.train) & as_set(s.meta_val)
                or as_set(s.val) & as_set(s.meta_val))
    assert as_set(s.train) | as_set(s.val) | as_set(s.meta_val) == set(range(n))


def test_same_seed_same_split_regardless_of_global_rng():
    torch.manual_seed(123)
    a = split_indices(1000, seed=5)
    torch.manual_seed(999)
    torch.rand(10)
    b = split_indices(1000, seed=5)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    # the documented recipe: val = positions [800, 900) of randperm with a generator seeded by the seed
    perm = torch.randperm(1000, generator=torch.Generator().manual_seed(5))
    assert as_set(a.val) == as_set(perm[800:900]) and as_set(a.meta_val) == as_set(perm[900:])


def test_different_seeds_differ():
    a, b = split_indices(1000, seed=0), split_indices(1000, seed=1)
    assert as_set(a.val) != as_set(b.val) and as_set(a.meta_val) != as_set(b.meta_val)
    # but they are both random halves of the data: overlap of val sets near the chance level 10%
    overlap = len(as_set(a.val) & as_set(b.val)) / 100
    assert overlap < 0.3


def test_fold_meta_val_and_custom_fractions():
    plain, folded = split_indices(1000, seed=2), split_indices(1000, seed=2, fold_meta_val=True)
    assert len(folded.meta_val) == 0 and torch.equal(folded.val, plain.val)
    assert as_set(folded.train) == as_set(plain.train) | as_set(plain.meta_val)
    s = split_indices(1000, split=(0.7, 0.2, 0.1), seed=0)
    assert (len(s.train), len(s.val), len(s.meta_val)) == (700, 200, 100)
    s = split_indices(1000, split=(0.9, 0.1, 0.0), seed=0)
    assert (len(s.train), len(s.val), len(s.meta_val)) == (900, 100, 0)


@pytest.mark.parametrize("bad", [(0.8, 0.1), (0.8, 0.1, 0.2), (1.1, -0.05, -0.05), (0.0, 0.5, 0.5), "abc"])
def test_bad_fractions_raise(bad):
    with pytest.raises(ValueError, match="split"):
        split_indices(100, split=bad)


def test_bundle_split_options(cifar10_dir):
    a = data.build("cifar10", root=cifar10_dir.root, seed=0)
    b = data.build("cifar10", root=cifar10_dir.root, seed=0)
    c = data.build("cifar10", root=cifar10_dir.root, seed=1)
    assert torch.equal(a.val.index, b.val.index) and torch.equal(a.train.index, b.train.index)
    assert not torch.equal(a.val.index, c.val.index)
    f = data.build("cifar10", root=cifar10_dir.root, seed=0, fold_meta_val=True)
    assert (len(f.train), len(f.val), len(f.meta_val)) == (45, 5, 0)
    assert as_set(f.train.index) == as_set(a.train.index) | as_set(a.meta_val.index)
    # split_seed fixes the split while seed varies
    d = data.build("cifar10", root=cifar10_dir.root, seed=7, split_seed=0)
    assert torch.equal(d.val.index, a.val.index)
    g = data.build("cifar10", root=cifar10_dir.root, split=(0.6, 0.2, 0.2))
    assert g.sizes() == {"train": 30, "val": 10, "meta_val": 10, "test": 20}
