"""The generic ``train_subset`` data option: a seeded subset of the train split, drawn after the 8:1:1 split."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import metacal.data as data

REPO = Path(__file__).resolve().parents[2]
GM = {"n_train": 1000, "n_test": 50}  # gaussian_mixture: 1000 → 800 / 100 / 100


def test_sizes_and_other_splits_unchanged():
    full = data.build("gaussian_mixture", seed=3, **GM)
    cut = data.build("gaussian_mixture", seed=3, train_subset=120, **GM)
    assert cut.sizes() == {"train": 120, "val": 100, "meta_val": 100, "test": 50}
    for split in ("val", "meta_val", "test"):
        assert torch.equal(getattr(cut, split).index, getattr(full, split).index)
    assert cut.info["train_subset"] == 120 and "train_subset" not in full.info


def test_subset_is_the_documented_permutation_prefix():
    full = data.build("gaussian_mixture", seed=3, **GM)
    cut = data.build("gaussian_mixture", seed=3, train_subset=120, **GM)
    perm = torch.randperm(800, generator=torch.Generator().manual_seed(3))  # the split's seed
    expected = full.train.index[perm[:120].sort().values]
    assert torch.equal(cut.train.index, expected)
    assert cut.train.dataset is not None and not isinstance(cut.train.dataset, data.DataSubset)  # one level
    # items and targets come from the same underlying samples
    assert torch.equal(cut.train.targets, torch.as_tensor(full.train.dataset.targets)[expected])
    x_cut, y_cut = cut.train[7]
    x_full, y_full = full.train.dataset[int(expected[7])]
    assert torch.equal(x_cut, x_full) and int(y_cut) == int(y_full)


def test_nested_and_seeded_by_the_split_seed():
    small = data.build("gaussian_mixture", seed=3, train_subset=50, **GM)
    large = data.build("gaussian_mixture", seed=3, train_subset=300, **GM)
    assert set(small.train.index.tolist()) < set(large.train.index.tolist())
    a = data.build("gaussian_mixture", seed=0, split_seed=7, train_subset=50, **GM)
    b = data.build("gaussian_mixture", seed=1, split_seed=7, train_subset=50, **GM)
    assert torch.equal(a.train.index, b.train.index)  # same split seed → same subset
    c = data.build("gaussian_mixture", seed=4, train_subset=50, **GM)
    assert len(set(c.train.index.tolist()) & set(small.train.index.tolist())) < 25


def test_full_size_keeps_every_training_sample():
    full = data.build("gaussian_mixture", seed=2, **GM)
    same = data.build("gaussian_mixture", seed=2, train_subset=800, **GM)
    assert torch.equal(same.train.index, full.train.index)


@pytest.mark.parametrize("bad", [0, -5, 801, 2.5, True, "100"])
def test_out_of_range_is_one_line_error(bad):
    with pytest.raises(ValueError) as info:
        data.build("gaussian_mixture", seed=0, train_subset=bad, **GM)
    message = str(info.value)
    assert "\n" not in message and "train_subset" in message and "[1, 800]" in message


def test_image_datasets_and_mnist1d_get_it_too(fashion_gz_dir):
    """Through image_bundle (Fashion-MNIST from IDX files: 50 → 40 train) and mnist1d's own builder."""
    full = data.build("fashion_mnist", root=fashion_gz_dir.root, seed=1)
    cut = data.build("fashion_mnist", root=fashion_gz_dir.root, seed=1, train_subset=10)
    assert (len(full.train), len(cut.train)) == (40, 10)
    assert torch.equal(cut.val.index, full.val.index) and torch.equal(cut.test.index, full.test.index)
    x, y = cut.train[0]
    pos = int(cut.train.index[0])
    expected = (fashion_gz_dir.train_images[pos, 0].astype(np.float32) / 255 - 0.2860) / 0.3530
    assert torch.allclose(x[0], torch.from_numpy(expected), atol=1e-5)
    assert int(y) == int(fashion_gz_dir.train_labels[pos])
    pytest.importorskip("mnist1d")
    m = data.build("mnist1d", seed=0, num_samples=500, train_subset=33)
    assert m.sizes() == {"train": 33, "val": 40, "meta_val": 40, "test": 100}


def test_unknown_option_lists_train_subset():
    with pytest.raises(ValueError, match="train_subset"):
        data.build("gaussian_mixture", seed=0, train_subsett=3, **GM)


def test_cli_bad_train_subset_exit_2(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("data: {name: gaussian_mixture, options: {n_train: 100, n_test: 10}}\nmodel: {name: mlp}\n")
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "train.py"), "--config", str(config),
                           "--set", "data.options.train_subset=81", "--run-dir", str(tmp_path / "run")],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "train_subset must be an integer in [1, 80]" in lines[0], proc.stderr
