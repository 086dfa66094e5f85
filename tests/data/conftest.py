"""Tiny datasets written in the real on-disk formats, read back through metacal's real code paths."""

from __future__ import annotations

import gzip
import pickle
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from PIL import Image


@dataclass
class Written:
    root: Path
    train_images: np.ndarray  # (N, C, H, W) uint8 in official order
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray
    classes: list


def _dump(obj, path: Path) -> None:
    with open(path, "wb") as fh:
        pickle.dump(obj, fh, protocol=2)


@pytest.fixture(scope="session")
def cifar10_dir(tmp_path_factory) -> Written:
    """cifar-10-batches-py with 5 train batches of 10 images, a test batch of 20 and batches.meta.
    Keys are str (as the real files read with encoding='latin1'); data rows are R,G,B planes of 32×32."""
    rng = np.random.default_rng(10)
    root = tmp_path_factory.mktemp("cifar10")
    folder = root / "cifar-10-batches-py"
    folder.mkdir()
    names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    images = rng.integers(0, 256, (70, 3072), dtype=np.uint8)
    labels = rng.integers(0, 10, 70)
    for b in range(5):
        rows = slice(10 * b, 10 * b + 10)
        _dump({"batch_label": f"training batch {b + 1} of 5", "labels": labels[rows].tolist(),
               "data": images[rows], "filenames": [f"img_{i}.png" for i in range(10)]},
              folder / f"data_batch_{b + 1}")
    _dump({"batch_label": "testing batch 1 of 1", "labels": labels[50:].tolist(), "data": images[50:],
           "filenames": [f"t_{i}.png" for i in range(20)]}, folder / "test_batch")
    _dump({"num_cases_per_batch": 10, "label_names": names, "num_vis": 3072}, folder / "batches.meta")
    img = images.reshape(-1, 3, 32, 32)
    return Written(root, img[:50], labels[:50], img[50:], labels[50:], names)


@pytest.fixture(scope="session")
def cifar100_dir(tmp_path_factory) -> Written:
    """cifar-100-python with train (50), test (20) and meta (fine and coarse label names)."""
    rng = np.random.default_rng(100)
    root = tmp_path_factory.mktemp("cifar100")
    folder = root / "cifar-100-python"
    folder.mkdir()
    images = rng.integers(0, 256, (70, 3072), dtype=np.uint8)
    fine = rng.integers(0, 100, 70)
    coarse = fine // 5
    for name, rows in (("train", slice(0, 50)), ("test", slice(50, 70))):
        _dump({"filenames": ["x.png"] * (rows.stop - rows.start), "batch_label": name,
               "fine_labels": fine[rows].tolist(), "coarse_labels": coarse[rows].tolist(),
               "data": images[rows]}, folder / name)
    fine_names = [f"fine_{i}" for i in range(100)]
    _dump({"fine_label_names": fine_names, "coarse_label_names": [f"coarse_{i}" for i in range(20)]},
          folder / "meta")
    img = images.reshape(-1, 3, 32, 32)
    w = Written(root, img[:50], fine[:50], img[50:], fine[50:], fine_names)
    w.coarse = coarse  # type: ignore[attr-defined]
    return w


@pytest.fixture(scope="session")
def svhn_dir(tmp_path_factory) -> Written:
    """train_32x32.mat (40) and test_32x32.mat (10): X is 32×32×3×N uint8, y is N×1 with 10 for digit 0."""
    from scipy.io import savemat

    rng = np.random.default_rng(7)
    root = tmp_path_factory.mktemp("svhn")
    parts = {}
    for name, n in (("train", 40), ("test", 10)):
        images = rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8)
        digits = np.arange(n) % 10  # every digit, including 0
        stored = np.where(digits == 0, 10, digits).astype(np.uint8).reshape(n, 1)
        savemat(root / f"{name}_32x32.mat", {"X": np.transpose(images, (2, 3, 1, 0)), "y": stored})
        parts[name] = (images, digits)
    return Written(root, *parts["train"], *parts["test"], [str(d) for d in range(10)])


@pytest.fixture(scope="session")
def tiny_imagenet_dir(tmp_path_factory) -> Written:
    """tiny-imagenet-200 with 3 classes × 10 training JPEGs (64×64, one grayscale), 6 val JPEGs and
    val_annotations.txt; wnids.txt deliberately unsorted. Images are returned as decoded by PIL."""
    rng = np.random.default_rng(200)
    root = tmp_path_factory.mktemp("tiny")
    base = root / "tiny-imagenet-200"
    wnids = ["n02124075", "n01443537", "n01629819"]
    (base / "val" / "images").mkdir(parents=True)
    (base / "wnids.txt").write_text("\n".join(wnids) + "\n")
    label_of = {w: i for i, w in enumerate(sorted(wnids))}

    def write(path: Path, gray: bool = False) -> np.ndarray:
        pixels = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
        img = Image.fromarray(pixels[..., 0], "L") if gray else Image.fromarray(pixels)
        img.save(path, "JPEG", quality=90)
        with Image.open(path) as back:
            return np.asarray(back.convert("RGB")).transpose(2, 0, 1)

    train, train_labels = [], []
    for w in sorted(wnids):  # expected order: sorted classes, files sorted by name
        folder = base / "train" / w / "images"
        folder.mkdir(parents=True)
        (base / "train" / w / f"{w}_boxes.txt").write_text("")
        for i in range(10):
            train.append(write(folder / f"{w}_{i}.JPEG", gray=(w == wnids[0] and i == 3)))
            train_labels.append(label_of[w])
    test, test_labels, lines = [], [], []
    for i in range(6):
        w = wnids[i % 3]
        test.append(write(base / "val" / "images" / f"val_{i}.JPEG"))
        test_labels.append(label_of[w])
        lines.append(f"val_{i}.JPEG\t{w}\t0\t0\t63\t63")
    (base / "val" / "val_annotations.txt").write_text("\n".join(lines) + "\n")
    return Written(root, np.stack(train), np.array(train_labels), np.stack(test), np.array(test_labels),
                   sorted(wnids))


def write_idx(path: Path, array: np.ndarray, compress: bool) -> None:
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    data = header + np.ascontiguousarray(array, dtype=np.uint8).tobytes()
    if compress:
        path = path.with_name(path.name + ".gz")
        data = gzip.compress(data)
    path.write_bytes(data)


def _fashion(root: Path, folder: Path, compress: bool, seed: int) -> Written:
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {"train": (rng.integers(0, 256, (50, 28, 28), dtype=np.uint8), rng.integers(0, 10, 50)),
              "t10k": (rng.integers(0, 256, (20, 28, 28), dtype=np.uint8), rng.integers(0, 10, 20))}
    for prefix, (images, labels) in arrays.items():
        write_idx(folder / f"{prefix}-images-idx3-ubyte", images, compress)
        write_idx(folder / f"{prefix}-labels-idx1-ubyte", labels.astype(np.uint8), compress)
    (tr_x, tr_y), (te_x, te_y) = arrays["train"], arrays["t10k"]
    return Written(root, tr_x[:, None], tr_y, te_x[:, None], te_y, list(range(10)))


@pytest.fixture(scope="session")
def fashion_gz_dir(tmp_path_factory) -> Written:
    root = tmp_path_factory.mktemp("fashion_gz")
    return _fashion(root, root, compress=True, seed=1)


@pytest.fixture(scope="session")
def fashion_torchvision_dir(tmp_path_factory) -> Written:
    """Uncompressed IDX in torchvision's layout root/FashionMNIST/raw."""
    root = tmp_path_factory.mktemp("fashion_raw")
    return _fashion(root, root / "FashionMNIST" / "raw", compress=False, seed=2)
