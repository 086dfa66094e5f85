"""Tiny-ImageNet-200 in its distributed layout (``tiny-imagenet-200/``): ``wnids.txt``,
``train/<wnid>/images/*.JPEG`` (500 per class) and ``val/images/*.JPEG`` labelled by
``val/val_annotations.txt`` (file, wnid, box). The official val set (10,000) is our test set, since
the official test labels are not public. Class index = position of the wnid in sorted ``wnids.txt``.
Augmentation (train view only): RandomCrop 64, padding 4 + horizontal flip.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from .assemble import image_bundle
from .bundle import DataBundle
from .download import download_hint, downloading
from .errors import DataNotFoundError
from .image_datasets import ImageFileDataset
from .paths import candidate_roots, download_root
from .registry import DATASETS
from .splits import DEFAULT_SPLIT

TINY_MEAN, TINY_STD = (0.4802, 0.4481, 0.3975), (0.2770, 0.2691, 0.2821)
URL = "http://cs231n.stanford.edu/tiny-imagenet-200.zip"
_FOLDER = "tiny-imagenet-200"
_LAYOUT = (f"<root>/{_FOLDER}/{{wnids.txt, train/<wnid>/images/*.JPEG, val/images/*.JPEG, "
           "val/val_annotations.txt}")


def _complete(folder: Path) -> bool:
    return ((folder / "wnids.txt").is_file() and (folder / "train").is_dir()
            and (folder / "val" / "val_annotations.txt").is_file())


def find_tiny_imagenet_folder(root=None) -> Path:
    looked = []
    for base in candidate_roots(root):
        for folder in (base / _FOLDER, base):
            looked.append(str(folder))
            if _complete(folder):
                return folder
    raise DataNotFoundError("tiny_imagenet", dict.fromkeys(looked), f"pass {download_hint()}, or download {URL} "
                            "and unzip it into root or $METACAL_DATA", _LAYOUT)


def read_tiny_imagenet(folder: Path) -> tuple[ImageFileDataset, ImageFileDataset, list[str]]:
    """Official ``(train, val-as-test, wnids)``; files sorted by name within each class."""
    wnids = sorted({line.strip() for line in (folder / "wnids.txt").read_text().splitlines() if line.strip()})
    index = {w: i for i, w in enumerate(wnids)}
    paths, labels = [], []
    for wnid in wnids:
        files = sorted((folder / "train" / wnid / "images").glob("*.JPEG"))
        if not files:
            raise DataNotFoundError("tiny_imagenet", [folder / "train" / wnid / "images"],
                                    f"re-extract {URL}; class {wnid} has no training images", _LAYOUT)
        paths += files
        labels += [index[wnid]] * len(files)
    test_paths, test_labels = [], []
    for line in (folder / "val" / "val_annotations.txt").read_text().splitlines():
        fields = line.split("\t")
        if len(fields) < 2:
            continue
        if fields[1] not in index:
            raise ValueError(f"{folder / 'val' / 'val_annotations.txt'}: unknown wnid {fields[1]!r} for "
                             f"{fields[0]} (not in wnids.txt)")
        test_paths.append(folder / "val" / "images" / fields[0])
        test_labels.append(index[fields[1]])
    return ImageFileDataset(paths, labels), ImageFileDataset(test_paths, test_labels), wnids


@DATASETS.register("tiny_imagenet")
def build_tiny_imagenet(root=None, seed: int = 0, split: Sequence[float] = DEFAULT_SPLIT,
                        fold_meta_val: bool = False, split_seed: int | None = None, augment: bool = True,
                        download: bool = False) -> DataBundle:
    """Tiny-ImageNet: 100,000 train (→ 80k/10k/10k), 10,000 test (official val), 3×64×64, 200 classes."""
    if download:
        from torchvision.datasets.utils import download_and_extract_archive

        root = download_root(root)
        if not _complete(root / _FOLDER):
            with downloading("tiny_imagenet", URL, root):
                download_and_extract_archive(URL, str(root))
    folder = find_tiny_imagenet_folder(root)
    train, test, wnids = read_tiny_imagenet(folder)
    return image_bundle("tiny_imagenet", train, test, num_classes=len(wnids), input_shape=(3, 64, 64),
                        mean=TINY_MEAN, std=TINY_STD, flip=True, augment=augment, seed=seed, split=split,
                        fold_meta_val=fold_meta_val, split_seed=split_seed, classes=wnids)
