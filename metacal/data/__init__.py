"""Datasets with the seeded train / val / meta-val split of the official training set (Wang & Golebiowski 2024, §4)
and seeded loaders: ``build(name, root=None, seed=0, **options) -> DataBundle``, ``available()``.

Datasets: cifar10, cifar100, svhn, tiny_imagenet, fashion_mnist, mnist1d, gaussian_mixture.
Missing files raise :class:`DataNotFoundError` naming every place looked and how to get the data; a failed
``download=True`` raises :class:`DownloadError` naming the URL and the reason.
"""

from __future__ import annotations

from .bundle import DataBundle, DataSubset
from .download import DownloadError
from .errors import DataNotFoundError
from .registry import DATASETS, available, build
from . import cifar, fashion_mnist, gaussian_mixture, mnist1d, svhn, tiny_imagenet  # noqa: F401 (register)
from .loaders import InfiniteLoader, make_loader
from .splits import split_indices

__all__ = ["DATASETS", "DataBundle", "DataNotFoundError", "DataSubset", "DownloadError", "InfiniteLoader", "available",
           "build",
           "make_loader", "split_indices"]
