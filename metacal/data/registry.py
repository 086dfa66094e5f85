"""The dataset registry and :func:`build` (contract: ``build(name, root=None, seed=0, **options)``)."""

from __future__ import annotations

from typing import Any, Sequence

from metacal.registry import Registry

from .bundle import DataBundle, subset_split
from .class_split import keep_classes
from .label_noise import check_noise, check_trusted, with_label_options
from .long_tail import check_imbalance, long_tailed

DATASETS: Registry[DataBundle] = Registry("dataset", listing="metacal.data", supplied=("root", "seed"))
#: options every dataset takes, applied here after the dataset is built
SUBSET_OPTIONS = ("train_subset", "meta_val_subset")
#: the regime options (label noise, a trusted held-out set, a long tail): metacal/data/label_noise.py, long_tail.py
REGIME_OPTIONS = ("noise_rate", "noise_kind", "trusted", "imbalance")
COMMON_OPTIONS = ("in_classes", *SUBSET_OPTIONS, *REGIME_OPTIONS)


def build(name: str, root=None, seed: int = 0, train_subset: int | None = None, meta_val_subset: int | None = None,
          in_classes: Sequence[int] | None = None, noise_rate: float = 0.0, noise_kind: str = "symmetric",
          trusted: int = 0, imbalance: float = 1.0, draw_seed: int | None = None, **options: Any) -> DataBundle:
    """Build a registered dataset. Unknown names raise ``UnknownNameError``; unknown options ValueError.

    ``train_subset=N`` (every dataset) keeps a seeded N-sample subset of the train split, drawn after the
    8:1:1 split with the split's seed, so val / meta-val / test stay the same (:func:`subset_split`);
    ``meta_val_subset=N`` does the same to the meta-validation split. ``in_classes=[c_0, …]`` (every dataset)
    keeps only those classes, relabelled 0..k−1, and holds the other classes' test samples out as ``bundle.ood``
    (:mod:`metacal.data.class_split`); it is applied before the subsets, so ``train_subset`` counts kept samples.

    Then the regime options, in this order: ``imbalance=ρ`` thins train / val / meta-val to a long tail
    (:mod:`metacal.data.long_tail`); ``trusted=N`` keeps N clean held-out samples; ``noise_rate=r`` with
    ``noise_kind`` (symmetric | pair) flips labels of train, val and meta-val, never of test
    (:mod:`metacal.data.label_noise`). Their draws are seeded by ``draw_seed`` (default ``seed``; the trainer
    passes ``run.seed``), apart from the split's ``seed``. Bad values are checked before any data is read.
    """
    if "max_train_samples" in options:
        raise ValueError(f"dataset {name!r} has no option max_train_samples; a smaller training set is train_subset=N")
    DATASETS.check_options(name, list(options), extra=COMMON_OPTIONS)
    check_noise(noise_rate, noise_kind)
    check_imbalance(imbalance)
    check_trusted(trusted)
    draws = seed if draw_seed is None else draw_seed
    builder = DATASETS.get(name)
    bundle = builder(root=root, seed=seed, **options)
    if in_classes is not None:
        bundle = keep_classes(bundle, in_classes)
    for split, size in (("train", train_subset), ("meta_val", meta_val_subset)):
        if size is not None:
            bundle = subset_split(bundle, size, bundle.info.get("split_seed", seed), split)
    bundle = long_tailed(bundle, imbalance, draws)
    return with_label_options(bundle, noise_rate, noise_kind, trusted, draws)


def available() -> list[str]:
    return DATASETS.available()
