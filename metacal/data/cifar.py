"""CIFAR-10 / CIFAR-100 from torchvision's python-pickle layout (``root/cifar-10-batches-py``,
``root/cifar-100-python``). Files are read directly (no md5 pass over 160 MB on every build);
``download=True`` fetches and md5-checks them with ``torchvision.datasets.CIFAR10/100``.
Augmentation (train view only): RandomCrop 32, padding 4 + horizontal flip.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .assemble import image_bundle
from .bundle import DataBundle
from .download import download_hint, downloading
from .errors import DataNotFoundError
from .image_datasets import ImageArrayDataset
from .paths import candidate_roots, download_root
from .registry import DATASETS
from .splits import DEFAULT_SPLIT

# per-channel statistics of the 50,000 training images (pixel values in [0, 1])
CIFAR10_MEAN, CIFAR10_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
CIFAR100_MEAN, CIFAR100_STD = (0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)

_LAYOUT = {
    "cifar10": ("cifar-10-batches-py", [f"data_batch_{i}" for i in range(1, 6)], ["test_batch"], "batches.meta"),
    "cifar100": ("cifar-100-python", ["train"], ["test"], "meta"),
}


def _unpickle(path: Path) -> dict[str, Any]:
    with open(path, "rb") as fh:
        raw = pickle.load(fh, encoding="latin1")
    return {k.decode() if isinstance(k, bytes) else k: v for k, v in raw.items()}


def _read_batches(folder: Path, files: Sequence[str], label_key: str) -> tuple[np.ndarray, np.ndarray]:
    images, labels = [], []
    for name in files:
        entry = _unpickle(folder / name)
        images.append(np.asarray(entry["data"], dtype=np.uint8).reshape(-1, 3, 32, 32))
        labels.append(np.asarray(entry[label_key], dtype=np.int64))
    return np.concatenate(images), np.concatenate(labels)


def find_cifar_folder(name: str, root=None) -> Path:
    """The folder holding the pickles (``<root>/cifar-10-batches-py`` or ``root`` itself)."""
    folder_name, train_files, test_files, meta = _LAYOUT[name]
    looked = []
    for base in candidate_roots(root):
        for folder in (base / folder_name, base):
            looked.append(str(folder))
            if all((folder / f).is_file() for f in [*train_files, *test_files, meta]):
                return folder
    layout = f"<root>/{folder_name}/{{{', '.join([*train_files, *test_files, meta])}}}"
    raise DataNotFoundError(name, dict.fromkeys(looked), f"pass {download_hint()} (uses torchvision.datasets."
                            f"{'CIFAR10' if name == 'cifar10' else 'CIFAR100'}), or unpack the python "
                            "version of the archive from https://www.cs.toronto.edu/~kriz/cifar.html into "
                            "root or $METACAL_DATA", layout)


def load_cifar(name: str, root=None, download: bool = False, label_type: str = "fine"):
    """Official ``(train, test, classes)`` as untransformed :class:`ImageArrayDataset` s."""
    if download:
        import torchvision.datasets as tvd

        cls = tvd.CIFAR10 if name == "cifar10" else tvd.CIFAR100
        target = download_root(root)
        with downloading(name, getattr(cls, "url", "torchvision's URL"), target):
            for train in (True, False):
                cls(str(target), train=train, download=True)
        root = target
    folder_name, train_files, test_files, meta_file = _LAYOUT[name]
    folder = find_cifar_folder(name, root)
    if name == "cifar10":
        label_key, names_key = "labels", "label_names"
    elif label_type in ("fine", "coarse"):
        label_key, names_key = f"{label_type}_labels", f"{label_type}_label_names"
    else:
        raise ValueError(f"label_type must be 'fine' or 'coarse', got {label_type!r}")
    classes = [c.decode() if isinstance(c, bytes) else str(c) for c in _unpickle(folder / meta_file)[names_key]]
    train = ImageArrayDataset(*_read_batches(folder, train_files, label_key))
    test = ImageArrayDataset(*_read_batches(folder, test_files, label_key))
    return train, test, classes


def _build(name: str, mean, std, root, seed, split, fold_meta_val, split_seed, augment, download,
           label_type="fine") -> DataBundle:
    train, test, classes = load_cifar(name, root, download, label_type)
    return image_bundle(name, train, test, num_classes=len(classes), input_shape=(3, 32, 32), mean=mean,
                        std=std, flip=True, augment=augment, seed=seed, split=split,
                        fold_meta_val=fold_meta_val, split_seed=split_seed, classes=classes)


@DATASETS.register("cifar10")
def build_cifar10(root=None, seed: int = 0, split: Sequence[float] = DEFAULT_SPLIT, fold_meta_val: bool = False,
                  split_seed: int | None = None, augment: bool = True, download: bool = False) -> DataBundle:
    """CIFAR-10: 50,000 train (→ 40k/5k/5k), 10,000 test, 3×32×32, 10 classes."""
    return _build("cifar10", CIFAR10_MEAN, CIFAR10_STD, root, seed, split, fold_meta_val, split_seed,
                  augment, download)


@DATASETS.register("cifar100")
def build_cifar100(root=None, seed: int = 0, split: Sequence[float] = DEFAULT_SPLIT, fold_meta_val: bool = False,
                   split_seed: int | None = None, augment: bool = True, download: bool = False,
                   label_type: str = "fine") -> DataBundle:
    """CIFAR-100: 50,000 train, 10,000 test, 3×32×32, 100 fine (or 20 coarse) classes."""
    return _build("cifar100", CIFAR100_MEAN, CIFAR100_STD, root, seed, split, fold_meta_val, split_seed,
                  augment, download, label_type)
