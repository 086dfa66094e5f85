"""``data.name: arrays``: features and labels from an .npz file, through the registry (shapes, labels, class
names, the seeded 8:1:1 split, standardisation) and every bad file as one line naming it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import metacal.data as data
from metacal.data.splits import split_indices


def write_npz(path: Path, **arrays) -> Path:
    np.savez(path, **arrays)
    return path


@pytest.fixture
def features():
    """50 training rows of (2, 3) features, labels 0..3 in turn, 12 test rows, and class names."""
    rng = np.random.default_rng(5)
    return {"x_train": rng.normal(size=(50, 2, 3)).astype(np.float64), "y_train": np.arange(50) % 4,
            "x_test": rng.normal(size=(12, 2, 3)).astype(np.float32), "y_test": np.arange(12) % 4,
            "classes": np.array(["ant", "bee", "cat", "dog"])}


def test_registry_build_shapes_labels_split(tmp_path, features):
    path = write_npz(tmp_path / "f.npz", **features)
    b = data.build("arrays", root=str(path), seed=3)
    assert b.sizes() == {"train": 40, "val": 5, "meta_val": 5, "test": 12}  # 50 → 40 / 5 / 5
    assert (b.num_classes, b.input_shape, b.classes) == (4, (2, 3), ["ant", "bee", "cat", "dog"])
    idx = split_indices(50, seed=3)  # the documented permutation of the split's seed
    for part in ("train", "val", "meta_val"):
        assert torch.equal(getattr(b, part).index, getattr(idx, part))
    i = int(b.val.index[2])
    x, y = b.val[2]
    assert x.dtype == torch.float32 and torch.equal(x, torch.from_numpy(features["x_train"][i].astype(np.float32)))
    assert int(y) == i % 4
    xt, yt = b.test[11]
    assert torch.equal(xt, torch.from_numpy(features["x_test"][11])) and int(yt) == 11 % 4
    assert torch.equal(b.train.targets, torch.as_tensor(idx.train % 4))


def test_no_test_arrays_means_no_test_set(tmp_path, features):
    path = write_npz(tmp_path / "f.npz", x_train=features["x_train"], y_train=features["y_train"])
    b = data.build("arrays", root=path, seed=0)
    assert b.test is None and b.sizes() == {"train": 40, "val": 5, "meta_val": 5}
    assert b.classes == ["0", "1", "2", "3"]


def test_one_dim_features_and_whole_float_labels(tmp_path):
    path = write_npz(tmp_path / "f.npz", x_train=np.linspace(0, 1, 20), y_train=np.arange(20, dtype=float) % 2)
    b = data.build("arrays", root=path)
    assert b.input_shape == (1,) and b.num_classes == 2
    x, y = b.train[0]
    assert x.shape == (1,) and y.dtype == torch.int64


def test_standardize_uses_train_split_statistics_only(tmp_path, features):
    x = features["x_train"].copy()
    x[:, 1, 2] = 7.0  # a constant feature: centred to 0, divided by 1
    path = write_npz(tmp_path / "f.npz", x_train=x, y_train=features["y_train"], x_test=features["x_test"],
                     y_test=features["y_test"])
    b = data.build("arrays", root=path, seed=1, standardize=True)
    rows = x[split_indices(50, seed=1).train.numpy()].astype(np.float32)
    mean, std = rows.mean(axis=0), rows.std(axis=0)
    std[1, 2] = 1.0
    train = torch.stack([b.train[i][0] for i in range(len(b.train))])
    assert torch.allclose(train.mean(0), torch.zeros(2, 3), atol=1e-5)
    assert torch.allclose(train.std(0, unbiased=False)[0], torch.ones(3), atol=1e-5)
    assert float(train[:, 1, 2].abs().max()) == 0.0
    j = int(b.val.index[0])  # val and test are scaled with the train split's numbers, not their own
    assert np.allclose(b.val[0][0].numpy(), (x[j].astype(np.float32) - mean) / std, atol=1e-5)
    assert np.allclose(b.test[3][0].numpy(), (features["x_test"][3] - mean) / std, atol=1e-5)


def test_train_subset_and_python_entry_point(tmp_path, features):
    path = write_npz(tmp_path / "f.npz", **features)
    full = data.build("arrays", root=path, seed=2)
    cut = data.build("arrays", root=path, seed=2, train_subset=7)
    assert cut.sizes() == {"train": 7, "val": 5, "meta_val": 5, "test": 12}
    assert set(cut.train.index.tolist()) < set(full.train.index.tolist())
    for part in ("val", "meta_val"):
        assert torch.equal(getattr(cut, part).index, getattr(full, part).index)
    mem = data.arrays_bundle(features["x_train"], features["y_train"], features["x_test"], features["y_test"],
                             classes=features["classes"], seed=2, train_subset=7)  # the same bundle from memory
    assert torch.equal(mem.train.index, cut.train.index) and mem.classes == cut.classes
    assert torch.equal(mem.train[3][0], cut.train[3][0])


def test_num_classes_option_allows_a_class_without_training_samples(tmp_path):
    path = write_npz(tmp_path / "f.npz", x_train=np.zeros((10, 2)), y_train=np.array([0, 2] * 5))
    with pytest.raises(ValueError, match="no sample of class 1"):
        data.build("arrays", root=path)
    assert data.build("arrays", root=path, num_classes=3).num_classes == 3


def test_max_train_samples_points_to_train_subset(tmp_path, features):
    path = write_npz(tmp_path / "f.npz", **features)
    with pytest.raises(ValueError, match="max_train_samples.*train_subset=N"):
        data.build("arrays", root=path, max_train_samples=5)


def one_line(err: BaseException, *fragments: str) -> str:
    message = str(err)
    assert "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


BAD = {  # name → (arrays written, fragments of the one-line message besides the file name)
    "missing_y_train": ({"x_train": np.zeros((10, 2))}, ["no array 'y_train'", "it holds x_train"]),
    "missing_x_train": ({"y_train": np.arange(10) % 2}, ["no array 'x_train'"]),
    "length_mismatch": ({"x_train": np.zeros((10, 2)), "y_train": np.arange(9) % 2},
                        ["x_train has 10 rows but y_train has 9 labels"]),
    "negative_label": ({"x_train": np.zeros((4, 2)), "y_train": np.array([0, 1, -1, 1])},
                       [": y_train[2] = -1 is outside 0..1 (labels count from 0)"]),
    "negative_label_with_class_names": ({"x_train": np.zeros((4, 2)), "y_train": np.array([0, 1, -1, 1]),
                                         "classes": np.array(["a", "b", "c"])},
                                        [": y_train[2] = -1 is outside 0..2 (3 names in classes)"]),
    "stray_label": ({"x_train": np.zeros((20, 2)), "y_train": np.where(np.arange(20) == 17, 12, np.arange(20) % 10)},
                    [": y_train[17] = 12 is outside 0..9 (classes 10..11 never occur); fix the label, or set "
                     "num_classes=13 (data.options.num_classes)"]),
    "test_label_out_of_range": ({"x_train": np.zeros((4, 2)), "y_train": np.array([0, 1, 0, 1]),
                                 "x_test": np.zeros((2, 2)), "y_test": np.array([1, 2])},
                                [": y_test[1] = 2 is outside 0..1 (num_classes 2)"]),
    "non_integer_label": ({"x_train": np.zeros((4, 2)), "y_train": np.array([0, 1, 0.5, 1])},
                          ["non-integer label 0.5 at index 2"]),
    "one_hot_labels": ({"x_train": np.zeros((4, 2)), "y_train": np.eye(4)[:, :2]}, ["shape (4, 2)", "one-hot"]),
    "one_based_labels": ({"x_train": np.zeros((4, 2)), "y_train": np.array([1, 2, 1, 2])},
                         ["no sample of class 0", "labels must be 0..K-1"]),
    "test_without_labels": ({"x_train": np.zeros((4, 2)), "y_train": np.array([0, 1, 0, 1]),
                             "x_test": np.zeros((2, 2))}, ["has x_test but no y_test"]),
    "typo_key": ({"x_train": np.zeros((4, 2)), "y_train": np.array([0, 1, 0, 1]), "y_tset": np.zeros(2)},
                 ["unknown array(s) y_tset"]),
    "nan_feature": ({"x_train": np.array([[0.0], [1.0], [np.nan], [2.0]]), "y_train": np.array([0, 1, 0, 1])},
                    ["non-finite value", "row 2"]),
    "test_feature_shape": ({"x_train": np.zeros((4, 3)), "y_train": np.array([0, 1, 0, 1]),
                            "x_test": np.zeros((2, 4)), "y_test": np.array([0, 1])}, ["feature shape (4,)"]),
    "text_features": ({"x_train": np.array(["a", "b"]), "y_train": np.array([0, 1])}, ["features must be numbers"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_file_is_one_line_naming_it(tmp_path, case):
    arrays, fragments = BAD[case]
    path = write_npz(tmp_path / f"{case}.npz", **arrays)
    with pytest.raises(data.DataFormatError) as info:
        data.build("arrays", root=path)
    one_line(info.value, str(path), *fragments)


def test_unreadable_missing_and_unset_root(tmp_path):
    garbage = tmp_path / "g.npz"
    garbage.write_bytes(b"not a zip archive")
    with pytest.raises(data.DataFormatError) as info:
        data.build("arrays", root=garbage)
    one_line(info.value, str(garbage), "not a readable .npz file", "np.savez")
    with pytest.raises(data.DataNotFoundError) as missing:
        data.build("arrays", root=tmp_path / "nope.npz")
    one_line(missing.value, str(tmp_path / "nope.npz"), "'arrays' not found", "x_train, y_train")
    with pytest.raises(data.DataFormatError) as unset:
        data.build("arrays")
    one_line(unset.value, "needs data.root")
