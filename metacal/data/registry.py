"""The dataset registry and :func:`build` (contract: ``build(name, root=None, seed=0, **options)``)."""

from __future__ import annotations

from typing import Any, Sequence

from metacal.registry import Registry

from .bundle import DataBundle, subset_split
from .class_split import keep_classes

DATASETS: Registry[DataBundle] = Registry("dataset", listing="metacal.data", supplied=("root", "seed"))
#: options every dataset takes, applied here after the dataset is built
SUBSET_OPTIONS = ("train_subset", "meta_val_subset")
COMMON_OPTIONS = ("in_classes", *SUBSET_OPTIONS)


def build(name: str, root=None, seed: int = 0, train_subset: int | None = None, meta_val_subset: int | None = None,
          in_classes: Sequence[int] | None = None, **options: Any) -> DataBundle:
    """Build a registered dataset. Unknown names raise ``UnknownNameError``; unknown options ValueError.

    ``train_subset=N`` (every dataset) keeps a seeded N-sample subset of the train split, drawn after the
    8:1:1 split with the split's seed, so val / meta-val / test stay the same (:func:`subset_split`);
    ``meta_val_subset=N`` does the same to the meta-validation split. ``in_classes=[c_0, …]`` (every dataset)
    keeps only those classes, relabelled 0..k−1, and holds the other classes' test samples out as ``bundle.ood``
    (:mod:`metacal.data.class_split`); it is applied before the subsets, so ``train_subset`` counts kept samples.
    """
    if "max_train_samples" in options:
        raise ValueError(f"dataset {name!r} has no option max_train_samples; a smaller training set is train_subset=N")
    DATASETS.check_options(name, list(options), extra=COMMON_OPTIONS)
    builder = DATASETS.get(name)
    bundle = builder(root=root, seed=seed, **options)
    if in_classes is not None:
        bundle = keep_classes(bundle, in_classes)
    for split, size in (("train", train_subset), ("meta_val", meta_val_subset)):
        if size is not None:
            bundle = subset_split(bundle, size, bundle.info.get("split_seed", seed), split)
    return bundle


def available() -> list[str]:
    return DATASETS.available()
