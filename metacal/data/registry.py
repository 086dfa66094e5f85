"""The dataset registry and :func:`build` (contract: ``build(name, root=None, seed=0, **options)``)."""

from __future__ import annotations

from typing import Any

from metacal.registry import Registry

from .bundle import DataBundle, subset_split

DATASETS: Registry[DataBundle] = Registry("dataset", listing="metacal.data", supplied=("root", "seed"))
#: options every dataset takes, applied here after the dataset is built
SUBSET_OPTIONS = ("train_subset", "meta_val_subset")


def build(name: str, root=None, seed: int = 0, train_subset: int | None = None, meta_val_subset: int | None = None,
          **options: Any) -> DataBundle:
    """Build a registered dataset. Unknown names raise ``UnknownNameError``; unknown options ValueError.

    ``train_subset=N`` (every dataset) keeps a seeded N-sample subset of the train split, drawn after the
    8:1:1 split with the split's seed, so val / meta-val / test stay the same (:func:`subset_split`);
    ``meta_val_subset=N`` does the same to the meta-validation split.
    """
    if "max_train_samples" in options:
        raise ValueError(f"dataset {name!r} has no option max_train_samples; a smaller training set is train_subset=N")
    DATASETS.check_options(name, list(options), extra=SUBSET_OPTIONS)
    builder = DATASETS.get(name)
    bundle = builder(root=root, seed=seed, **options)
    for split, size in (("train", train_subset), ("meta_val", meta_val_subset)):
        if size is not None:
            bundle = subset_split(bundle, size, bundle.info.get("split_seed", seed), split)
    return bundle


def available() -> list[str]:
    return DATASETS.available()
