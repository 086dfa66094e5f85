"""metacal.data.raw_inputs: a split's inputs in predict_proba's raw format — normalised by the run's rules they
are exactly what the evaluation loader yields — with their labels."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

import metacal
from metacal.data import build, raw_inputs
from metacal.data.model_inputs import input_spec, model_inputs


def loader_items(split) -> tuple[torch.Tensor, torch.Tensor]:
    items = [split[i] for i in range(len(split))]
    return torch.stack([x for x, _ in items]), torch.as_tensor([int(y) for _, y in items])


def test_in_memory_images_are_the_stored_uint8(cifar10_dir, cifar_run):
    x, y = raw_inputs("cifar10", root=cifar10_dir.root)
    assert x.dtype == np.uint8 and x.shape == (20, 3, 32, 32) and y.dtype == np.int64
    assert np.array_equal(x, cifar10_dir.test_images) and np.array_equal(y, cifar10_dir.test_labels)
    bundle = build("cifar10", root=cifar10_dir.root)
    ready, labels = loader_items(bundle.test)
    assert torch.equal(model_inputs(input_spec(bundle), x), ready) and np.array_equal(y, labels.numpy())
    model = metacal.load(cifar_run, device="cpu")  # trained on these files: its predict_proba takes them as they are
    assert np.array_equal(model.predict_proba(x), model.predict_proba(cifar10_dir.test_images))


def test_vectors_other_splits_and_kept_classes(tmp_path):
    bundle = build("mnist1d", root=tmp_path, num_samples=300)
    x, y = raw_inputs(bundle, "val")
    ready, labels = loader_items(bundle.val)
    assert x.dtype == np.float32 and x.shape == (24, 1, 40)
    assert np.array_equal(x, ready.numpy()) and np.array_equal(y, labels.numpy())
    x, y = raw_inputs("mnist1d", root=tmp_path, num_samples=300, in_classes=[3, 7])
    kept = build("mnist1d", root=tmp_path, num_samples=300, in_classes=[3, 7]).test
    assert set(y.tolist()) == {0, 1} and np.array_equal(x, loader_items(kept)[0].numpy())


def test_image_files_are_decoded_resized_and_cropped(tmp_path):
    rng = np.random.default_rng(0)
    for split in ("train", "test"):
        for name in ("cat", "dog"):
            folder = tmp_path / "imgs" / split / name
            folder.mkdir(parents=True)
            for i in range(10 if split == "train" else 3):
                Image.fromarray(rng.integers(0, 256, (12, 16, 3), dtype=np.uint8)).save(folder / f"{i}.png")
    options = {"resize": 10, "crop": 8, "mean": [0.5], "std": [0.25]}
    x, y = raw_inputs("image_folder", root=tmp_path / "imgs", **options)
    assert x.dtype == np.uint8 and x.shape == (6, 3, 8, 8) and y.tolist() == [0, 0, 0, 1, 1, 1]
    bundle = build("image_folder", root=tmp_path / "imgs", **options)
    assert torch.equal(model_inputs(input_spec(bundle), x), loader_items(bundle.test)[0])
    with pytest.raises(ValueError, match="^image_folder has no test split$"):
        raw_inputs("image_folder", root=tmp_path / "imgs" / "train")
    with pytest.raises(ValueError, match="unknown split 'tset'"):
        raw_inputs(bundle, "tset")
