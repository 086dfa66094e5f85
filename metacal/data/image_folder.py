"""Your own images: ``data.name: image_folder`` with ``data.root: DIR`` in torchvision's ImageFolder layout.

    DIR/train/<class>/**/*.png|jpg|…   the official training set (split 8:1:1 into train / val / meta-val)
    DIR/test/<class>/**/*               optional test set; its class folders must be exactly train's

or DIR itself a plain ImageFolder root, ``DIR/<class>/**/*`` (then DIR is the training set and there is no test
set). The rule (:func:`split_folders`): DIR holds split folders when ``DIR/train/`` holds a sub-folder, or when
DIR's only sub-folders are ``train/``, ``val/`` and ``test/``; otherwise every sub-folder of DIR is a class
(a class named ``train`` whose images lie directly in it stays a class). ``val/`` is not read: validation and
meta-validation are cut from the training set.

Class index = position of the folder name in the sorted list (torchvision's rule); files are taken in sorted
order, searched recursively; hidden files and folders (``.name``) and files with other extensions are
ignored. At build time every image's header is read (mode, size) and, with ``check_images=True`` (default),
every image is decoded once, so an unreadable file stops the run before anything is written. Each failure
is one :class:`DataFormatError` line naming the file or folder.

Options (``data.options``; every one optional):

    resize: null | S | [H, W]   S: shorter side to S, aspect kept (torchvision's Resize); [H, W]: exact size
    crop: null | S | [H, W]     centre crop (val, meta-val, test; and train unless random_crop)
    random_crop: false          train only: random crop of size crop (else the image size) after zero padding
    padding: 0                  pixels of zero padding on each side before the random crop (CIFAR recipe: 4)
    flip: false                 train only: horizontal flip with p = 0.5
    mean, std: null | [..]      per channel (one value = every channel), on x/255; null: 0 and 1
    channels: null | 1 | 3      null: 1 if every image is grayscale, else 3 (grayscale files expanded to RGB)
    check_images: true          decode every image once at build time (false: read headers only)

Without ``crop`` every image must have the same size after ``resize``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from PIL import Image

from .bundle import DataBundle
from .errors import DataFormatError, DataNotFoundError
from .image_datasets import ImageFileDataset
from .registry import DATASETS
from .splits import DEFAULT_SPLIT
from .transforms import folder_views, resized_size
from .user_data import from_datasets

EXTENSIONS = (".bmp", ".jpeg", ".jpg", ".pgm", ".png", ".ppm", ".tif", ".tiff", ".webp")  # torchvision's list
GRAYSCALE_MODES = ("1", "L", "LA", "I", "I;16", "F")
LAYOUT = ("DIR/train/<class>/*.png (any of " + " ".join(EXTENSIONS) + "), optional DIR/test/<class>/*; or "
          "DIR/<class>/*.png")
SPLITS = ("train", "val", "test")


def _subfolders(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def split_folders(base: Path) -> tuple[Path, Path | None]:
    """``(training folder, test folder or None)`` of ``data.root``: ``base/train`` and ``base/test`` when
    ``base/train`` holds a sub-folder or ``base`` holds nothing but train/val/test folders; else ``base``
    itself (a plain ImageFolder root of class folders, no test set)."""
    if not base.is_dir():
        raise DataNotFoundError("image_folder", [base], "set data.root to your image directory", LAYOUT)
    names = _subfolders(base)
    train = base / "train"
    if train.is_dir() and (_subfolders(train) or set(names) <= set(SPLITS)):
        return train, (base / "test" if (base / "test").is_dir() else None)
    if not names:
        raise DataFormatError(f"{base}: no class folders; expected layout {LAYOUT}")
    return base, None


def class_folders(split_dir: Path) -> list[str]:
    """Sorted names of the non-hidden sub-folders of ``split_dir`` (at least one)."""
    names = sorted(p.name for p in split_dir.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not names:
        raise DataFormatError(f"{split_dir}: no class folders; expected layout {LAYOUT}")
    return names


def image_files(folder: Path) -> list[Path]:
    """Image files below ``folder`` (recursive, sorted), hidden entries skipped; an empty folder is an error."""
    files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in EXTENSIONS and p.is_file()
                   and not any(part.startswith(".") for part in p.relative_to(folder).parts))
    if not files:
        raise DataFormatError(f"{folder}: empty class folder (no image files {'/'.join(EXTENSIONS)}); "
                              "add images or remove the folder")
    return files


def inspect_image(path: Path, decode: bool) -> tuple[str, tuple[int, int]]:
    """``(PIL mode, (H, W))`` of one file; decodes it fully when ``decode``."""
    try:
        with Image.open(path) as img:
            mode, (width, height) = img.mode, img.size
            if decode:
                img.load()
    except Exception as err:  # PIL: UnidentifiedImageError, OSError (truncated), SyntaxError (broken PNG), …
        raise DataFormatError(f"{path}: cannot read the image ({' '.join(str(err).split())}); replace or "
                              "remove the file") from None
    return mode, (height, width)


def scan_split(split_dir: Path, classes: list[str], decode: bool):
    """Paths, labels, modes and sizes of one split, classes in the given order."""
    paths, labels, modes, sizes = [], [], [], []
    for label, name in enumerate(classes):
        for path in image_files(split_dir / name):
            mode, size = inspect_image(path, decode)
            paths.append(path)
            labels.append(label)
            modes.append(mode)
            sizes.append(size)
    return paths, labels, modes, sizes


def _size_option(value: Any, key: str) -> int | tuple[int, int] | None:
    """None, a positive int, or [H, W] of positive ints (an int stays an int: resize treats it differently)."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if (isinstance(value, (list, tuple)) and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)):
        return int(value[0]), int(value[1])
    raise DataFormatError(f"data.options.{key} must be a positive integer or [height, width]; got {value!r}")


def _per_channel(value: Sequence[float] | float | None, default: float, channels: int, key: str) -> tuple[float, ...]:
    values = [default] if value is None else ([value] if isinstance(value, (int, float)) else list(value))
    if len(values) == 1:
        values = values * channels
    if len(values) != channels or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        raise DataFormatError(f"data.options.{key} must be one number or {channels} (one per channel); got {value!r}")
    if key == "std" and any(v <= 0 for v in values):
        raise DataFormatError(f"data.options.std must be > 0; got {value!r}")
    return tuple(float(v) for v in values)


def output_size(paths: list[Path], sizes: list[tuple[int, int]], resize, crop, random_crop: bool,
                padding: int) -> tuple[int, int]:
    """(H, W) of every transformed image; checks that the crop fits and that sizes agree without a crop."""
    after = [resized_size(h, w, resize) for h, w in sizes]
    if crop is not None:
        room = 2 * padding if random_crop else 0
        for path, (h, w) in zip(paths, after):
            if crop[0] > h + room or crop[1] > w + room:
                raise DataFormatError(f"{path}: {h}×{w} pixels{' after resize' if resize is not None else ''}, "
                                      f"smaller than crop {crop[0]}×{crop[1]}; lower data.options.crop or set resize")
        return crop
    for path, size in zip(paths, after):
        if size != after[0]:
            raise DataFormatError(f"images differ in size: {paths[0]} is {after[0][0]}×{after[0][1]}, {path} is "
                                  f"{size[0]}×{size[1]}{' after resize' if resize is not None else ''}; set "
                                  "data.options.resize: [H, W] (or crop) to give them one size")
    return after[0]


@DATASETS.register("image_folder")
def build_image_folder(root=None, seed: int = 0, split: Sequence[float] = DEFAULT_SPLIT, fold_meta_val: bool = False,
                       split_seed: int | None = None, resize: Any = None, crop: Any = None, random_crop: bool = False,
                       padding: int = 0, flip: bool = False, mean: Any = None, std: Any = None,
                       channels: int | None = None, check_images: bool = True) -> DataBundle:
    """Images in ``root``/train/<class>/ (and optional ``root``/test/<class>/), or in ``root``/<class>/ (no test
    set; :func:`split_folders`); options in the module docstring."""
    if root is None:
        raise DataFormatError(f"dataset 'image_folder' needs data.root (--set data.root=DIR): a directory laid out "
                              f"as {LAYOUT}")
    base = Path(root).expanduser()
    train_dir, test_dir = split_folders(base)
    resize, crop = _size_option(resize, "resize"), _size_option(crop, "crop")
    crop = (crop, crop) if isinstance(crop, int) else crop
    if isinstance(padding, bool) or not isinstance(padding, int) or padding < 0:
        raise DataFormatError(f"data.options.padding must be an integer >= 0; got {padding!r}")
    if channels not in (None, 1, 3):
        raise DataFormatError(f"data.options.channels must be 1, 3 or null (from the images); got {channels!r}")
    classes = class_folders(train_dir)
    if len(classes) < 2:
        raise DataFormatError(f"{train_dir}: one class folder ({classes[0]}); a classifier needs at least 2")
    train = scan_split(train_dir, classes, check_images)
    test = None
    if test_dir is not None:
        test_classes = class_folders(test_dir)
        if test_classes != classes:
            only_train = sorted(set(classes) - set(test_classes))
            only_test = sorted(set(test_classes) - set(classes))
            raise DataFormatError(f"{test_dir}: its class folders differ from train's (only in train: "
                                  f"{', '.join(only_train) or '-'}; only in test: {', '.join(only_test) or '-'}); "
                                  "give test/ exactly the class folders of train/")
        test = scan_split(test_dir, classes, check_images)
    parts = [train] + ([test] if test is not None else [])
    modes = [m for part in parts for m in part[2]]
    if channels is None:
        channels = 1 if all(m in GRAYSCALE_MODES for m in modes) else 3
    size = output_size([p for part in parts for p in part[0]], [s for part in parts for s in part[3]], resize, crop,
                       random_crop, padding)
    mean_c, std_c = _per_channel(mean, 0.0, channels, "mean"), _per_channel(std, 1.0, channels, "std")
    train_tf, eval_tf = folder_views(mean_c, std_c, size, resize, crop, random_crop, padding, flip)
    mode = "L" if channels == 1 else "RGB"
    images = ImageFileDataset(train[0], train[1], mode=mode)
    test_set = None if test is None else ImageFileDataset(test[0], test[1], eval_tf, mode=mode)
    return from_datasets(images.with_transform(train_tf), eval_train=images.with_transform(eval_tf), test=test_set,
                         num_classes=len(classes), classes=classes, input_shape=(channels, *size), mean=mean_c,
                         std=std_c, name="image_folder", seed=seed, split=split, fold_meta_val=fold_meta_val,
                         split_seed=split_seed, root=str(base), train_dir=str(train_dir),
                         transforms={"resize": resize, "crop": crop, "random_crop": random_crop,
                                     "padding": padding, "flip": flip})
