"""The result of :func:`metacal.data.build`: train / val / meta-val / test plus what a model needs to know."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import torch
from torch.utils.data import Dataset, Subset


class DataSubset(Subset):
    """A :class:`torch.utils.data.Subset` that also exposes ``targets`` (and ``posteriors`` when the
    underlying dataset has them) restricted to its indices."""

    def __init__(self, dataset: Dataset, indices: Sequence[int] | torch.Tensor) -> None:
        if isinstance(indices, range):
            idx = torch.arange(indices.start, indices.stop, indices.step, dtype=torch.long)
        else:
            idx = torch.as_tensor(indices, dtype=torch.long).reshape(-1)
        super().__init__(dataset, idx.tolist())
        self._index = idx

    @property
    def index(self) -> torch.Tensor:
        """Positions in the underlying dataset (int64 tensor)."""
        return self._index

    @property
    def targets(self) -> torch.Tensor:
        return torch.as_tensor(self.dataset.targets)[self._index]

    def narrowed(self, positions: torch.Tensor) -> "DataSubset":
        """The samples at ``positions`` of this subset, one level deep over the same dataset."""
        return DataSubset(self.dataset, self._index[positions])

    @property
    def posteriors(self) -> torch.Tensor:
        base = getattr(self.dataset, "posteriors", None)
        if base is None:
            raise AttributeError(f"{type(self.dataset).__name__} has no true posteriors")
        return base[self._index]


class LabelledSubset(DataSubset):
    """A :class:`DataSubset` whose labels are given per position (``labels``) instead of read from the dataset:
    the noisy labels of :mod:`metacal.data.label_noise`. ``clean_targets`` keeps the labels the split had before
    (``targets`` and every item carry the given ones); ``posteriors`` are those of the split it was made from."""

    def __init__(self, split: DataSubset, labels: torch.Tensor) -> None:
        super().__init__(split.dataset, split.index)
        self.labels = torch.as_tensor(labels, dtype=torch.long).reshape(-1)
        if len(self.labels) != len(self._index):
            raise ValueError(f"{len(self.labels)} labels for a split of {len(self._index)} samples")
        self.clean_targets = torch.as_tensor(split.targets, dtype=torch.long)
        self._posteriors = getattr(split, "posteriors", None) if hasattr(split.dataset, "posteriors") else None

    def __getitem__(self, index: int) -> tuple[Any, torch.Tensor]:
        return self.dataset[self.indices[index]][0], self.labels[index]

    def __getitems__(self, indices: list[int]) -> list[tuple[Any, torch.Tensor]]:
        return [self[i] for i in indices]

    @property
    def targets(self) -> torch.Tensor:
        return self.labels

    @property
    def posteriors(self) -> torch.Tensor:
        if self._posteriors is None:
            raise AttributeError(f"{type(self.dataset).__name__} has no true posteriors")
        return self._posteriors

    def narrowed(self, positions: torch.Tensor) -> "LabelledSubset":
        split = DataSubset(self.dataset, self._index[positions])
        out = LabelledSubset(split, self.labels[positions])
        out.clean_targets, out._posteriors = self.clean_targets[positions], (
            None if self._posteriors is None else self._posteriors[positions])
        return out


def base_positions(split: Dataset) -> tuple[Dataset, torch.Tensor]:
    """(the dataset a split indexes, its positions there): a split's samples by their place in the official set."""
    if isinstance(split, DataSubset):
        return split.dataset, split.index
    return split, torch.arange(len(split))  # type: ignore[arg-type]


def as_subset(split: Dataset) -> DataSubset:
    """``split`` as a :class:`DataSubset` (a dataset of one's own is wrapped whole)."""
    return split if isinstance(split, DataSubset) else DataSubset(split, range(len(split)))  # type: ignore[arg-type]


@dataclass
class DataBundle:
    """Splits of one dataset. Every split yields ``(input_tensor, label_int64_tensor)``.

    ``train``/``val``/``meta_val`` come from the official training set (8:1:1 by default, seeded);
    ``test`` is the official test set, or None when a user's data has none (``image_folder`` without
    ``test/``, ``arrays`` without ``x_test``). ``input_shape`` is (C, H, W) for images, (C, L) for
    sequences, the feature shape for ``arrays``. ``ood`` holds the test samples of the classes left out by
    ``in_classes`` (:mod:`metacal.data.class_split`; original labels), else None. ``noisy_test_labels``: with
    ``noise_rate`` > 0, the test labels flipped as the training labels were (:mod:`metacal.data.label_noise`; the
    test set itself keeps its clean labels), else None.
    """

    name: str
    train: Dataset
    val: Dataset
    meta_val: Dataset
    test: Dataset | None
    num_classes: int
    input_shape: tuple[int, ...]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    classes: list[str] | None = None
    info: dict[str, Any] = field(default_factory=dict)
    ood: Dataset | None = None
    noisy_test_labels: torch.Tensor | None = None  # the test labels noised as the training labels were

    @property
    def in_channels(self) -> int:
        return int(self.input_shape[0])

    def sizes(self) -> dict[str, int]:
        """Samples per split; ``test`` is left out when there is no test set."""
        return {k: len(getattr(self, k)) for k in ("train", "val", "meta_val", "test") if getattr(self, k) is not None}

    def __repr__(self) -> str:
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes().items())
        return (f"DataBundle({self.name!r}, {sizes}, num_classes={self.num_classes}, "
                f"input_shape={self.input_shape})")


def subset_split(bundle: DataBundle, size: int, seed: int, split: str = "train") -> DataBundle:
    """The bundle with one split (``train``, or ``meta_val`` for ``meta_val_subset``) cut to ``size`` samples;
    the other splits are unchanged.

    The kept samples are the first ``size`` of ``torch.randperm(len(split))`` under a CPU generator seeded
    by ``seed`` (sorted ascending), so a smaller subset is contained in a larger one with the same seed.
    """
    data = getattr(bundle, split)
    n = len(data)
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= n:
        raise ValueError(f"{split}_subset must be an integer in [1, {n}] (the {split} split's size), got {size!r}")
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(int(seed)))
    keep = perm[:size].sort().values
    if isinstance(data, DataSubset):  # stay one level deep: index the underlying dataset directly
        subset = data.narrowed(keep)
    else:
        subset = DataSubset(data, keep)
    return replace(bundle, **{split: subset}, info={**bundle.info, f"{split}_subset": size})
