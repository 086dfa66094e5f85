"""Fashion-MNIST from the IDX files (read with numpy, raw or .gz): 60,000 train (→ 48k/6k/6k),
10,000 test, 1×28×28, 10 classes, no augmentation by default.

Search order without ``root``: ``$METACAL_DATA/fashion_mnist``, ``$METACAL_DATA/FashionMNIST/raw``,
``/usr/share/datasets/fashion-mnist`` (Debian package ``dataset-fashion-mnist``), then
``<cache>/{fashion_mnist, FashionMNIST/raw}`` (cache: ``$XDG_CACHE_HOME/metacal``, else ``~/.cache/metacal``);
``METACAL_NO_SYSTEM_DATASETS=1`` leaves the Debian folder out (to see what a machine without the package does).
With ``root``: ``root``, ``root/fashion_mnist`` and torchvision's ``root/FashionMNIST/raw`` only.
``download=True`` uses torchvision.datasets.FashionMNIST.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from .assemble import image_bundle
from .bundle import DataBundle
from .download import download_hint, downloading
from .errors import DataNotFoundError
from .idx import read_idx
from .image_datasets import ImageArrayDataset
from .paths import ENV_VAR, NO_SYSTEM_ENV_VAR, cache_home, download_root, system_datasets_hidden
from .registry import DATASETS
from .splits import DEFAULT_SPLIT

FASHION_MEAN, FASHION_STD = (0.2860,), (0.3530,)
SYSTEM_DIR = Path("/usr/share/datasets/fashion-mnist")
CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
           "Ankle boot"]
_STEMS = {"train_images": "train-images-idx3-ubyte", "train_labels": "train-labels-idx1-ubyte",
          "test_images": "t10k-images-idx3-ubyte", "test_labels": "t10k-labels-idx1-ubyte"}


def search_dirs(root=None) -> list[Path]:
    if root is not None:
        base = Path(root).expanduser()
        return [base, base / "fashion_mnist", base / "FashionMNIST" / "raw"]
    dirs = []
    if os.environ.get(ENV_VAR):
        env = Path(os.environ[ENV_VAR]).expanduser()
        dirs += [env / "fashion_mnist", env / "FashionMNIST" / "raw"]
    cache = cache_home()
    system = [] if system_datasets_hidden() else [SYSTEM_DIR]
    return dirs + system + [cache / "fashion_mnist", cache / "FashionMNIST" / "raw"]


def _file(folder: Path, stem: str) -> Path | None:
    for candidate in (folder / f"{stem}.gz", folder / stem):
        if candidate.is_file():
            return candidate
    return None


def find_fashion_mnist_files(root=None) -> dict[str, Path]:
    """The four IDX files (prefers .gz, accepts raw), all from the first directory that has them all."""
    looked = search_dirs(root)
    for folder in looked:
        files = {key: _file(folder, stem) for key, stem in _STEMS.items()}
        if all(files.values()):
            return files  # type: ignore[return-value]
    hidden = ""
    if root is None and system_datasets_hidden():  # say why an installed package was not found
        hidden = f" ({SYSTEM_DIR} is left out: {NO_SYSTEM_ENV_VAR} is set)"
    raise DataNotFoundError("fashion_mnist", looked, "apt-get install dataset-fashion-mnist, or pass "
                            f"{download_hint()} (uses torchvision.datasets.FashionMNIST){hidden}",
                            "<dir>/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]")


def read_fashion_mnist(root=None) -> tuple[ImageArrayDataset, ImageArrayDataset]:
    files = find_fashion_mnist_files(root)
    parts = []
    for split in ("train", "test"):
        images, labels = read_idx(files[f"{split}_images"]), read_idx(files[f"{split}_labels"])
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise ValueError(f"Fashion-MNIST {split} files have inconsistent shapes {images.shape} and "
                             f"{labels.shape} ({files[f'{split}_images']})")
        parts.append(ImageArrayDataset(images[:, None], labels.astype("int64")))
    return parts[0], parts[1]


@DATASETS.register("fashion_mnist")
def build_fashion_mnist(root=None, seed: int = 0, split: Sequence[float] = DEFAULT_SPLIT,
                        fold_meta_val: bool = False, split_seed: int | None = None, augment: bool = False,
                        download: bool = False) -> DataBundle:
    """Fashion-MNIST; ``augment=True`` adds RandomCrop 28 (padding 4) + flip on the train view."""
    if download:
        import torchvision.datasets as tvd

        target = download_root(root)
        with downloading("fashion_mnist", " or ".join(getattr(tvd.FashionMNIST, "mirrors", ["torchvision's mirrors"])),
                         target):
            for train in (True, False):
                tvd.FashionMNIST(str(target), train=train, download=True)
        root = target
    train, test = read_fashion_mnist(root)
    return image_bundle("fashion_mnist", train, test, num_classes=10, input_shape=(1, 28, 28),
                        mean=FASHION_MEAN, std=FASHION_STD, flip=True, augment=augment, seed=seed, split=split,
                        fold_meta_val=fold_meta_val, split_seed=split_seed, classes=list(CLASSES))
