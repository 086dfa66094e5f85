"""``metacal.data.from_datasets``: map-style datasets of (input, label) → the bundle every dataset builder returns."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import Dataset, TensorDataset

import metacal.data as data
from metacal.data.splits import split_indices


class Pairs(Dataset):
    """(x, y) items without a ``targets`` attribute: labels are read by indexing every item."""

    def __init__(self, n: int, k: int, offset: int = 0) -> None:
        self.x = torch.arange(n * 3, dtype=torch.float32).reshape(n, 3) + offset
        self.y = torch.arange(n) % k
        self.reads = 0

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i):
        self.reads += 1
        return self.x[i], int(self.y[i])


def test_default_split_is_the_seeded_8_1_1():
    train = Pairs(100, 4)
    b = data.from_datasets(train, seed=6)
    idx = split_indices(100, seed=6)
    assert b.sizes() == {"train": 80, "val": 10, "meta_val": 10} and b.test is None
    assert torch.equal(b.train.index, idx.train) and torch.equal(b.meta_val.index, idx.meta_val)
    assert (b.num_classes, b.input_shape, b.classes) == (4, (3,), ["0", "1", "2", "3"])
    assert train.reads >= 100  # no targets attribute: every label was read once
    x, y = b.val[0]
    assert torch.equal(x, train.x[int(idx.val[0])])


def test_given_parts_take_nothing_from_train():
    train, val, test = Pairs(100, 4), Pairs(7, 4, offset=1000), Pairs(9, 4, offset=2000)
    b = data.from_datasets(train, val=val, test=test, seed=1)
    # val given → train is split 0.9 : 0 : 0.1 (the meta-val share of 8:1:1 only)
    assert b.sizes() == {"train": 90, "val": 7, "meta_val": 10, "test": 9}
    assert b.val is val and b.test is test
    assert torch.equal(b.meta_val.index, split_indices(100, (0.9, 0.0, 0.1), seed=1).meta_val)
    both = data.from_datasets(train, val=val, meta_val=Pairs(5, 4), seed=1)
    assert both.sizes() == {"train": 100, "val": 7, "meta_val": 5}


def test_train_subset_and_eval_view():
    targets = torch.arange(50) % 5
    augmented, plain = TensorDataset(torch.ones(50, 2), targets), TensorDataset(torch.zeros(50, 2), targets)
    augmented.targets = plain.targets = targets  # labels without loading items
    b = data.from_datasets(augmented, eval_train=plain, train_subset=12, seed=0)
    assert b.sizes() == {"train": 12, "val": 5, "meta_val": 5}
    assert float(b.train[0][0].sum()) == 2.0  # the train part reads the augmented view, val / meta-val the plain one
    assert float(b.val[0][0].sum()) == 0.0 and float(b.meta_val[0][0].sum()) == 0.0


@pytest.mark.parametrize("make, fragment", [
    (lambda: (TensorDataset(torch.zeros(4, 2), torch.tensor([0, 1, 0, 5])), {"num_classes": 3}),
     "custom: train labels[3] = 5 is outside 0..2 (num_classes 3)"),
    (lambda: (TensorDataset(torch.zeros(4, 2), torch.eye(4)[:, :2]), {}), "one-hot"),
    (lambda: (TensorDataset(torch.zeros(4, 2), torch.tensor([0.0, 1.0, 0.25, 1.0])), {}), "non-integer label 0.25"),
    (lambda: ([(torch.zeros(2), 0), (torch.zeros(2), 1)] * 5, {}), None),
    (lambda: ([("text", 0), ("more", 1)] * 5, {}), "items must be (input tensor, integer label) pairs"),
])
def test_bad_datasets_are_one_line(make, fragment):
    dataset, kwargs = make()
    if fragment is None:  # a plain list of (tensor, int) pairs is a valid map-style dataset
        assert data.from_datasets(dataset, **kwargs).num_classes == 2
        return
    with pytest.raises(data.DataFormatError) as info:
        data.from_datasets(dataset, **kwargs)
    assert "\n" not in str(info.value) and fragment in str(info.value)
