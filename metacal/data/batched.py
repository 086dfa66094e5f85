"""Whole batches from in-memory datasets: one tensor index per batch instead of one ``__getitem__`` per sample
and ``default_collate``.

:func:`batched_view` wraps a dataset whose samples live in one tensor — a :class:`~metacal.data.image_datasets.
VectorDataset` (MNIST-1D, Gaussian mixture, ``arrays``), or an :class:`~metacal.data.image_datasets.ImageArrayDataset`
(Fashion-MNIST, CIFAR, SVHN) whose transform is deterministic (``ToDtype`` + ``Normalize``, applied to the whole
uint8 batch at once) — optionally behind one :class:`~metacal.data.bundle.DataSubset`. A ``DataLoader`` over the
view (``collate_fn=`` :func:`as_batch`) keeps its sampler, so the batches hold the same samples in the same order;
their tensors are bit-identical to the per-sample path's (tests/data/test_data_batched.py).

Anything else gives None and keeps the per-sample path: random augmentations (a training view's crop and flip
draw per sample, so a per-batch draw would change a run's numbers), image files (decoded by the loader's
workers), datasets of the caller's own.

torchvision is imported only where a transform is inspected, so data without images never loads it (why:
metacal/data/transforms.py).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import Dataset

from .bundle import DataSubset
from .image_datasets import ImageArrayDataset, VectorDataset

Batch = tuple[torch.Tensor, torch.Tensor]


class BatchedView(Dataset):
    """``view.__getitems__(indices)`` → the collated ``(inputs, targets)`` of those samples (what a
    ``DataLoader`` with ``collate_fn=as_batch`` calls once per batch); ``view[i]`` is the dataset's own item.

    ``base`` holds the samples in one tensor; ``index`` maps the view's positions to ``base``'s (a subset);
    ``labels``: the view's labels by position when the subset sets its own (relabelled classes, noisy labels),
    else None (``base``'s labels)."""

    def __init__(self, dataset: Dataset, base: VectorDataset | ImageArrayDataset,
                 index: torch.Tensor | None = None, labels: torch.Tensor | None = None) -> None:
        self.dataset, self.base, self.index, self.labels = dataset, base, index, labels

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]

    def __getitem__(self, index: int) -> Any:
        return self.dataset[index]

    def __getitems__(self, indices: list[int]) -> Batch:
        positions = idx = torch.as_tensor(indices, dtype=torch.int64)
        if self.index is not None:
            idx = self.index[idx]
        base = self.base
        inputs = base.inputs if isinstance(base, VectorDataset) else base.images
        # index_select on the (N, features) view: an order of magnitude faster than inputs[idx] on (N, C, H, W)
        batch = torch.index_select(inputs.reshape(len(inputs), -1), 0, idx).view(len(idx), *inputs.shape[1:])
        if isinstance(base, ImageArrayDataset) and base.transform is not None:
            batch = per_pixel(base.transform, batch)
        if self.labels is not None:
            return batch, torch.index_select(self.labels, 0, positions)
        return batch, torch.index_select(base.targets, 0, idx)

    def __getattr__(self, name: str) -> Any:  # targets, posteriors, … of the wrapped dataset
        if name in ("dataset", "base", "index", "labels"):
            raise AttributeError(name)
        return getattr(self.dataset, name)


def as_batch(batch: Batch) -> Batch:
    """The collate function of a loader over a :class:`BatchedView`: the batch is collated already."""
    return batch


def batched_view(dataset: Dataset) -> BatchedView | None:
    """A :class:`BatchedView` of ``dataset``, or None when its samples cannot be served as whole batches with
    the same numbers (module docstring)."""
    index, base = (dataset.index, dataset.dataset) if isinstance(dataset, DataSubset) else (None, dataset)
    # a subset of a subclass (class_split.RelabeledSubset, bundle.LabelledSubset) gives labels of its own
    labels = None if type(dataset) is DataSubset or index is None else torch.as_tensor(dataset.targets,
                                                                                        dtype=torch.int64)
    # types checked exactly: a subclass may override __getitem__
    if type(base) is VectorDataset or (type(base) is ImageArrayDataset and deterministic(base.transform)):
        return BatchedView(dataset, base, index, labels)
    return None


def steps_of(transform: Any) -> list[Any]:
    """The steps of a ``v2.Compose`` (or the one transform)."""
    from torchvision.transforms import v2

    return list(transform.transforms) if isinstance(transform, v2.Compose) else [transform]


def deterministic(transform: Any) -> bool:
    """Whether ``transform`` is None or a ``v2.Compose`` of steps that act on every pixel alike, so that a batch
    gives each sample's per-sample result: ``ToDtype`` (to one dtype, not a per-type dict) and ``Normalize``."""
    if transform is None:
        return True
    from torchvision.transforms import v2

    return all(type(step) in (v2.ToDtype, v2.Normalize) and not isinstance(getattr(step, "dtype", None), dict)
               for step in steps_of(transform))


def per_pixel(transform: Any, images: torch.Tensor) -> torch.Tensor:
    """``transform`` (:func:`deterministic`) applied to a batch (B, C, H, W) with torchvision's arithmetic, by its
    functional ops (the ``Transform`` objects cost more per call than the arithmetic of a small batch)."""
    from torchvision.transforms import v2
    from torchvision.transforms.v2 import functional as F

    for step in steps_of(transform):
        if isinstance(step, v2.ToDtype):
            images = F.to_dtype(images, step.dtype, scale=step.scale)
        else:  # Normalize: (x − mean) / std per channel, as F.normalize does it, in place on the new batch
            images = F.normalize(images, step.mean, step.std, inplace=True)
    return images
