"""Semantic (class) split for open-set / OOD evaluation: ``in_classes=[c_0, …, c_{k−1}]`` on any dataset.

train / val / meta-val / test keep only the samples of the listed classes, relabelled c_i → i in the given
order; ``num_classes`` becomes k and ``classes`` the listed names in that order. The test samples of the other
classes become ``bundle.ood`` (original labels): near-OOD inputs from the same source, the usual "held-out
classes" protocol of open-set recognition (Neal et al., ECCV 2018; Vaze et al., ICLR 2022). True posteriors
(``gaussian_mixture``) are renormalised over the kept classes: P(y=i | x, y ∈ S) = p_{c_i}(x) / Σ_{c∈S} p_c(x).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

import torch
from torch.utils.data import Dataset

from .bundle import DataBundle, DataSubset

OPTION = "in_classes"


class RelabeledSubset(DataSubset):
    """A :class:`DataSubset` of samples of the classes ``kept`` (original labels), labelled by their position there."""

    def __init__(self, dataset: Dataset, indices: Sequence[int] | torch.Tensor, kept: Sequence[int],
                 num_original: int) -> None:
        super().__init__(dataset, indices)
        self.kept = torch.as_tensor(list(kept), dtype=torch.long)
        self.label_map = torch.full((int(num_original),), -1, dtype=torch.long)
        self.label_map[self.kept] = torch.arange(len(self.kept))

    def _relabel(self, item: Any) -> tuple[Any, torch.Tensor]:
        return item[0], self.label_map[int(item[1])]

    def __getitem__(self, index: int) -> tuple[Any, torch.Tensor]:
        return self._relabel(self.dataset[self.indices[index]])

    def __getitems__(self, indices: list[int]) -> list[tuple[Any, torch.Tensor]]:
        return [self[i] for i in indices]

    @property
    def targets(self) -> torch.Tensor:
        return self.label_map[super().targets]

    @property
    def posteriors(self) -> torch.Tensor:
        kept = super().posteriors[:, self.kept]
        return kept / kept.sum(dim=1, keepdim=True)

    def narrowed(self, positions: torch.Tensor) -> "RelabeledSubset":
        return RelabeledSubset(self.dataset, self.index[positions], self.kept.tolist(), len(self.label_map))


def check_in_classes(in_classes: Any, num_classes: int) -> list[int]:
    """The option as a list of distinct class indices 0..K−1, at least 2 and fewer than K; else one ValueError line."""
    values = list(in_classes) if isinstance(in_classes, (list, tuple)) else None
    if values is None or not all(isinstance(c, int) and not isinstance(c, bool) for c in values):
        raise ValueError(f"{OPTION} must be a list of class indices, e.g. [0, 1, 2, 3, 4, 5, 6, 7]; got {in_classes!r}")
    bad = [c for c in values if not 0 <= c < num_classes]
    if bad:
        raise ValueError(f"{OPTION}: class {bad[0]} is outside 0..{num_classes - 1} (the dataset has {num_classes} "
                         "classes)")
    twice = sorted({c for c in values if values.count(c) > 1})
    if twice:
        raise ValueError(f"{OPTION}: class {twice[0]} is listed more than once; list each kept class once")
    if not 2 <= len(values) < num_classes:
        raise ValueError(f"{OPTION} must keep at least 2 and at most {num_classes - 1} of the {num_classes} classes "
                         f"(some are held out as OOD); got {len(values)}")
    return values


def _split(data: Dataset, select: torch.Tensor, kept: list[int], k: int, relabel: bool = True) -> DataSubset:
    base, index = (data.dataset, data.index) if isinstance(data, DataSubset) else (data, torch.arange(len(data)))
    positions = torch.nonzero(select).reshape(-1)
    if relabel:
        return RelabeledSubset(base, index[positions], kept, k)
    return DataSubset(base, index[positions])


def keep_classes(bundle: DataBundle, in_classes: Sequence[int]) -> DataBundle:
    """The bundle restricted to ``in_classes`` (relabelled 0..k−1 in that order), the rest of test as ``ood``."""
    if isinstance(bundle.train, RelabeledSubset):
        raise ValueError(f"{OPTION} is already applied to this bundle")
    kept = check_in_classes(in_classes, bundle.num_classes)
    k, wanted = bundle.num_classes, torch.as_tensor(kept)
    parts: dict[str, Any] = {}
    for name in ("train", "val", "meta_val", "test"):
        data = getattr(bundle, name)
        if data is None:
            continue
        labels = torch.as_tensor(getattr(data, "targets", None) if hasattr(data, "targets")
                                 else [int(data[i][1]) for i in range(len(data))])
        inside = torch.isin(labels, wanted)
        parts[name] = _split(data, inside, kept, k)
        if name == "test":
            parts["ood"] = _split(data, ~inside, kept, k, relabel=False)
    names = [bundle.classes[c] for c in kept] if bundle.classes is not None else None
    return replace(bundle, **parts, num_classes=len(kept), classes=names, info={**bundle.info, OPTION: kept})
