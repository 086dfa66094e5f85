"""Turn an official (train, test) pair into a :class:`DataBundle` with the seeded 8:1:1 split."""

from __future__ import annotations

from typing import Sequence

from .bundle import DataBundle, DataSubset
from .image_datasets import ImageArrayDataset, ImageFileDataset
from .splits import DEFAULT_SPLIT, split_views
from .transforms import image_views


def image_bundle(name: str, train: ImageArrayDataset | ImageFileDataset,
                 test: ImageArrayDataset | ImageFileDataset, *, num_classes: int,
                 input_shape: tuple[int, int, int], mean: Sequence[float], std: Sequence[float],
                 flip: bool, augment: bool, seed: int, split: Sequence[float] = DEFAULT_SPLIT,
                 fold_meta_val: bool = False, split_seed: int | None = None,
                 classes: list[str] | None = None, **info) -> DataBundle:
    """Two views of the official training set: augmented (train split) and plain (val, meta-val).

    ``train``/``test`` come without transforms; the test set keeps its official order and all samples.
    """
    train_tf, eval_tf = image_views(mean, std, crop=input_shape[-1], flip=flip, augment=augment)
    s = seed if split_seed is None else split_seed
    tr, va, mv = split_views(train.with_transform(train_tf), train.with_transform(eval_tf), len(train),
                             split, s, fold_meta_val)
    te = DataSubset(test.with_transform(eval_tf), range(len(test)))
    return DataBundle(name, tr, va, mv, te, num_classes, tuple(input_shape), tuple(mean), tuple(std),
                      classes, {"split": tuple(split), "split_seed": s, "augment": augment,
                                "fold_meta_val": fold_meta_val, **info})
