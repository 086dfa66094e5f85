"""Datasets with the seeded train / val / meta-val split of the official training set (Wang & Golebiowski 2024, §4)
and seeded loaders: ``build(name, root=None, seed=0, **options) -> DataBundle``, ``available()``;
``raw_inputs(name, split="test")`` gives a split's inputs in the raw format ``metacal.load(run).predict_proba``
takes, with their labels (:mod:`metacal.data.raw_split`).

Datasets: cifar10, cifar100, svhn, tiny_imagenet, fashion_mnist, mnist1d, gaussian_mixture; a user's own data
as ``image_folder`` (a directory of class folders) and ``arrays`` (an .npz file), and from Python
:func:`from_datasets` (any map-style datasets) and :func:`arrays_bundle` (arrays in memory).
Missing files raise :class:`DataNotFoundError` naming every place looked and how to get the data; a failed
``download=True`` raises :class:`DownloadError` naming the URL and the reason; unusable user data raises
:class:`DataFormatError` (one line naming the file and the fix).
"""

from __future__ import annotations

from .bundle import DataBundle, DataSubset
from .download import DownloadError
from .errors import DataFormatError, DataNotFoundError
from .registry import DATASETS, available, build
from . import cifar, fashion_mnist, gaussian_mixture, mnist1d, svhn, tiny_imagenet  # noqa: F401 (register)
from . import image_folder  # noqa: F401 (register)
from . import corruption_suite, mnist1d_shift  # noqa: F401 (register the shift suites)
from .arrays import arrays_bundle
from .user_data import from_datasets
from .loaders import InfiniteLoader, make_loader
from .splits import split_indices
from .raw_split import raw_inputs

__all__ = ["DATASETS", "DataBundle", "DataFormatError", "DataNotFoundError", "DataSubset", "DownloadError",
           "InfiniteLoader", "arrays_bundle", "available", "build", "from_datasets", "make_loader", "raw_inputs",
           "split_indices"]
