"""SVHN cropped digits (format 2): ``train_32x32.mat`` / ``test_32x32.mat`` as written by
``torchvision.datasets.SVHN`` (keys ``X``: 32×32×3×N uint8, ``y``: N×1 with label 10 for digit 0).
Augmentation (train view only): RandomCrop 32, padding 4; no flip (digits are not mirror-symmetric).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from .assemble import image_bundle
from .bundle import DataBundle
from .download import download_hint, downloading
from .errors import DataNotFoundError
from .image_datasets import ImageArrayDataset
from .paths import candidate_roots, download_root
from .registry import DATASETS
from .splits import DEFAULT_SPLIT

SVHN_MEAN, SVHN_STD = (0.4377, 0.4438, 0.4728), (0.1980, 0.2010, 0.1970)
_FILES = {"train": "train_32x32.mat", "test": "test_32x32.mat"}


def find_svhn_folder(root=None) -> Path:
    looked = []
    for base in candidate_roots(root):
        for folder in (base, base / "svhn", base / "SVHN"):
            looked.append(str(folder))
            if all((folder / f).is_file() for f in _FILES.values()):
                return folder
    raise DataNotFoundError("svhn", looked, f"pass {download_hint()} (uses torchvision.datasets.SVHN), or put "
                            "train_32x32.mat and test_32x32.mat from http://ufldl.stanford.edu/housenumbers/ "
                            "into root or $METACAL_DATA/svhn", "<root>/{train_32x32.mat, test_32x32.mat}")


def read_svhn_mat(path: Path) -> ImageArrayDataset:
    """Images (N, 3, 32, 32) uint8 and labels 0–9 (the file's 10 becomes 0)."""
    from scipy.io import loadmat

    mat = loadmat(str(path))
    images = np.ascontiguousarray(np.transpose(mat["X"], (3, 2, 0, 1)), dtype=np.uint8)
    labels = mat["y"].astype(np.int64).reshape(-1) % 10
    return ImageArrayDataset(images, labels)


@DATASETS.register("svhn")
def build_svhn(root=None, seed: int = 0, split: Sequence[float] = DEFAULT_SPLIT, fold_meta_val: bool = False,
               split_seed: int | None = None, augment: bool = True, download: bool = False) -> DataBundle:
    """SVHN: 73,257 train (→ 58,605 / 7,326 / 7,326), 26,032 test, 3×32×32, 10 classes."""
    if download:
        import torchvision.datasets as tvd

        root = download_root(root)
        for part in _FILES:
            url = getattr(tvd.SVHN, "split_list", {}).get(part, ["torchvision's URL"])[0]
            with downloading("svhn", url, root):
                tvd.SVHN(str(root), split=part, download=True)
    folder = find_svhn_folder(root)
    train, test = read_svhn_mat(folder / _FILES["train"]), read_svhn_mat(folder / _FILES["test"])
    return image_bundle("svhn", train, test, num_classes=10, input_shape=(3, 32, 32), mean=SVHN_MEAN,
                        std=SVHN_STD, flip=False, augment=augment, seed=seed, split=split,
                        fold_meta_val=fold_meta_val, split_seed=split_seed, classes=[str(d) for d in range(10)])
