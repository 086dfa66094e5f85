"""The dataset registry and :func:`build` (contract: ``build(name, root=None, seed=0, **options)``)."""

from __future__ import annotations

import inspect
from typing import Any

from metacal.registry import Registry

from .bundle import DataBundle, subset_split

DATASETS: Registry[DataBundle] = Registry("dataset", listing="metacal.data")


def build(name: str, root=None, seed: int = 0, train_subset: int | None = None, meta_val_subset: int | None = None,
          **options: Any) -> DataBundle:
    """Build a registered dataset. Unknown names raise ``UnknownNameError``; unknown options ValueError.

    ``train_subset=N`` (every dataset) keeps a seeded N-sample subset of the train split, drawn after the
    8:1:1 split with the split's seed, so val / meta-val / test stay the same (:func:`subset_split`);
    ``meta_val_subset=N`` does the same to the meta-validation split.
    """
    builder = DATASETS.get(name)
    accepted = [p for p in inspect.signature(builder).parameters if p not in ("root", "seed")]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        hint = "; a smaller training set is train_subset=N" if "max_train_samples" in unknown else ""
        raise ValueError(f"dataset {name!r} has no option(s) {', '.join(unknown)}; "
                         f"valid options: {', '.join(accepted + ['train_subset', 'meta_val_subset'])}{hint}")
    bundle = builder(root=root, seed=seed, **options)
    for split, size in (("train", train_subset), ("meta_val", meta_val_subset)):
        if size is not None:
            bundle = subset_split(bundle, size, bundle.info.get("split_seed", seed), split)
    return bundle


def available() -> list[str]:
    return DATASETS.available()
