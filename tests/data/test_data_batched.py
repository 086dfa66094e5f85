"""Whole-batch reading of in-memory datasets (metacal/data/batched.py): the same tensors, bit for bit, as
``__getitem__`` per sample + ``default_collate``, in the same order through accelerate's seedable sampler; random
augmentations keep the per-sample path."""

from __future__ import annotations

import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration
from torch.utils.data import default_collate

from metacal.data.assemble import image_bundle
from metacal.data.batched import BatchedView, batched_view
from metacal.data.bundle import DataSubset
from metacal.data.image_datasets import ImageArrayDataset, VectorDataset
from metacal.data.loaders import InfiniteLoader, make_loader
from metacal.data.transforms import image_views


def images(n: int = 300, channels: int = 1, size: int = 28) -> ImageArrayDataset:
    g = torch.Generator().manual_seed(0)
    return ImageArrayDataset(torch.randint(0, 256, (n, channels, size, size), generator=g, dtype=torch.uint8),
                             torch.randint(0, 10, (n,), generator=g))


def per_sample(dataset, indices: list[int]):
    return default_collate([dataset[i] for i in indices])


def test_normalised_images_are_bit_identical_to_the_per_sample_path():
    train_tf, eval_tf = image_views((0.2860,), (0.3530,), crop=28, flip=True, augment=False)
    dataset = DataSubset(images().with_transform(eval_tf), torch.arange(250, 10, -3))
    view = batched_view(dataset)
    assert isinstance(view, BatchedView)
    indices = [5, 0, 79, 3, 3, 40]
    x, y = view.__getitems__(indices)
    want_x, want_y = per_sample(dataset, indices)
    assert x.dtype == torch.float32 and x.shape == (6, 1, 28, 28)
    assert torch.equal(x, want_x) and torch.equal(y, want_y)
    assert float(x.abs().max()) > 1.0  # normalised, not just scaled to [0, 1]


def test_vectors_and_raw_images_are_served_as_they_are_stored():
    g = torch.Generator().manual_seed(1)
    vectors = VectorDataset(torch.randn(50, 1, 40, generator=g), torch.randint(0, 10, (50,), generator=g))
    for dataset in (vectors, DataSubset(vectors, [4, 9, 1]), images(20)):
        view = batched_view(dataset)
        indices = list(range(len(dataset)))[::-1]
        for got, want in zip(view.__getitems__(indices), per_sample(dataset, indices)):
            assert got.dtype == want.dtype and torch.equal(got, want)


def test_random_augmentation_keeps_the_per_sample_path():
    train_tf, eval_tf = image_views((0.5, 0.5, 0.5), (0.25, 0.25, 0.25), crop=32, flip=True, augment=True)
    assert batched_view(images(10, 3, 32).with_transform(train_tf)) is None
    assert batched_view(images(10, 3, 32).with_transform(eval_tf)) is not None


def test_a_bundle_of_images_batches_every_evaluation_split():
    bundle = image_bundle("fake", images(200), images(40), num_classes=10, input_shape=(1, 28, 28), mean=(0.3,),
                          std=(0.4,), flip=True, augment=True, seed=0)
    assert batched_view(bundle.train) is None  # crop + flip per sample
    assert all(batched_view(split) is not None for split in (bundle.val, bundle.meta_val, bundle.test))


def test_prepared_loader_yields_the_same_batches_in_the_same_order():
    """accelerate's seedable sampler (split_batches, as the trainer's make_accelerator): epochs 0 and 1, both
    paths, equal batch by batch."""
    _, eval_tf = image_views((0.2860,), (0.3530,), crop=28, flip=True, augment=False)
    dataset = DataSubset(images().with_transform(eval_tf), torch.arange(0, 300, 2))
    epochs = {}
    for batched in (True, False):
        accelerator = Accelerator(cpu=True, dataloader_config=DataLoaderConfiguration(
            split_batches=True, use_seedable_sampler=True, data_seed=7))
        loader = accelerator.prepare(make_loader(dataset, 32, shuffle=True, seed=7, batched=batched))
        batches = []
        for epoch in (0, 1):
            loader.set_epoch(epoch)
            batches += list(loader)
        epochs[batched] = batches
    assert len(epochs[True]) == 10 and not torch.equal(epochs[True][0][1], epochs[True][5][1])
    for (x, y), (want_x, want_y) in zip(epochs[True], epochs[False]):
        assert torch.equal(x, want_x) and torch.equal(y, want_y)


def test_meta_val_stream_is_the_same_batched_or_not():
    g = torch.Generator().manual_seed(2)
    vectors = DataSubset(VectorDataset(torch.randn(90, 1, 8, generator=g), torch.randint(0, 4, (90,), generator=g)),
                         torch.arange(5, 85))
    fast, slow = (InfiniteLoader(vectors, 16, seed=3, batched=b) for b in (True, False))
    for _ in range(12):  # more than two passes of 5 batches
        (x, y), (want_x, want_y) = next(fast), next(slow)
        assert torch.equal(x, want_x) and torch.equal(y, want_y)
