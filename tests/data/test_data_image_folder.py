"""``data.name: image_folder``: tiny PNG trees written here, read back through the registry — classes, labels,
the 8:1:1 split, the transforms (exact pixel values after crop, flip, normalisation, resize), grayscale/RGB —
and every bad folder as one line naming the file or folder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import metacal.data as data
from metacal.data.splits import split_indices

CLASSES = ["cat", "dog", "emu"]


def write_tree(root: Path, images: dict[str, dict[str, list[np.ndarray]]]) -> Path:
    """root/<split>/<class>/<i>.png from uint8 arrays (H, W) grayscale or (H, W, 3) RGB."""
    for split, classes in images.items():
        for name, arrays in classes.items():
            folder = root / split / name
            folder.mkdir(parents=True, exist_ok=True)
            for i, array in enumerate(arrays):
                Image.fromarray(array).save(folder / f"{i:02d}.png")
    return root


def chw(array: np.ndarray) -> torch.Tensor:
    """uint8 (H, W[, 3]) → float (C, H, W) in [0, 1], as the loader returns it with mean 0 and std 1."""
    t = torch.from_numpy(array).float() / 255
    return t[None] if t.dim() == 2 else t.permute(2, 0, 1)


@pytest.fixture
def rgb_tree(tmp_path):
    """3 classes × 10 train (6×6 RGB, random) and × 2 test images; returns (root, train arrays, test arrays)."""
    rng = np.random.default_rng(0)
    spec = {split: {c: [rng.integers(0, 256, (6, 6, 3), dtype=np.uint8) for _ in range(n)] for c in CLASSES}
            for split, n in (("train", 10), ("test", 2))}
    (tmp_path / "pets" / "train" / "dog" / "notes.txt").parent.mkdir(parents=True)
    (tmp_path / "pets" / "train" / "dog" / "notes.txt").write_text("not an image: ignored")
    (tmp_path / "pets" / "train" / ".ipynb_checkpoints").mkdir()  # hidden: not a class
    return write_tree(tmp_path / "pets", spec), spec


def test_classes_labels_split_and_pixels(rgb_tree):
    root, spec = rgb_tree
    b = data.build("image_folder", root=root, seed=4)
    assert (b.classes, b.num_classes, b.input_shape) == (CLASSES, 3, (3, 6, 6))
    assert b.sizes() == {"train": 24, "val": 3, "meta_val": 3, "test": 6}  # 30 → 24 / 3 / 3
    idx = split_indices(30, seed=4)
    assert torch.equal(b.val.index, idx.val) and torch.equal(b.train.index, idx.train)
    flat = [a for c in CLASSES for a in spec["train"][c]]  # sorted classes, files by name
    for k in range(3):
        x, y = b.meta_val[k]
        i = int(b.meta_val.index[k])
        assert int(y) == i // 10 and torch.allclose(x, chw(flat[i]), atol=1e-6)
    x, y = b.test[3]  # test: dog's 2nd image (cat 0, 1, dog 0, 1, …)
    assert int(y) == 1 and torch.allclose(x, chw(spec["test"]["dog"][1]), atol=1e-6)
    assert torch.equal(b.train.targets, idx.train // 10)


def test_no_test_folder_and_train_subset(tmp_path, rgb_tree):
    root, spec = rgb_tree
    write_tree(tmp_path / "only_train", {"train": spec["train"]})
    b = data.build("image_folder", root=tmp_path / "only_train", seed=0, train_subset=5)
    assert b.test is None and b.sizes() == {"train": 5, "val": 3, "meta_val": 3}
    assert b.info["train_subset"] == 5


def test_normalisation_numbers(tmp_path):
    pixels = np.array([[0, 51], [255, 102]], dtype=np.uint8)
    root = write_tree(tmp_path / "g", {"train": {c: [pixels] * 10 for c in ("a", "b")}})
    b = data.build("image_folder", root=root, mean=[0.5], std=[0.25])
    assert b.input_shape == (1, 2, 2) and (b.mean, b.std) == ((0.5,), (0.25,))
    # (v/255 − 0.5)/0.25: 0 → −2, 51 → −1.2, 255 → 2, 102 → −0.4
    assert torch.allclose(b.val[0][0], torch.tensor([[[-2.0, -1.2], [2.0, -0.4]]]), atol=1e-6)
    rgb = np.zeros((2, 2, 3), dtype=np.uint8)
    rgb[..., 0], rgb[..., 1], rgb[..., 2] = 255, 51, 0
    root = write_tree(tmp_path / "c", {"train": {c: [rgb] * 10 for c in ("a", "b")}})
    b = data.build("image_folder", root=root, mean=[0.1, 0.2, 0.3], std=[0.5, 0.4, 0.1])
    # R: (1 − 0.1)/0.5 = 1.8, G: (0.2 − 0.2)/0.4 = 0, B: (0 − 0.3)/0.1 = −3
    assert torch.allclose(b.val[0][0][:, 0, 0], torch.tensor([1.8, 0.0, -3.0]), atol=1e-6)


def test_flip_on_train_view_only(tmp_path):
    """An asymmetric image (left column bright) comes back as itself or its mirror image on the train view —
    both over 64 draws (each missing with probability 2⁻⁶⁴) — and always as itself on val / test."""
    img = np.zeros((4, 4), dtype=np.uint8)
    img[:, 0] = 255
    img[0, 1] = 128
    root = write_tree(tmp_path / "f", {split: {c: [img] * 10 for c in ("a", "b")} for split in ("train", "test")})
    b = data.build("image_folder", root=root, flip=True)
    plain, mirror = chw(img), chw(img[:, ::-1].copy())
    draws = [b.train[0][0] for _ in range(64)]
    assert all(torch.equal(d, plain) or torch.equal(d, mirror) for d in draws)
    assert any(torch.equal(d, plain) for d in draws) and any(torch.equal(d, mirror) for d in draws)
    assert all(torch.equal(b.val[0][0], plain) and torch.equal(b.test[1][0], plain) for _ in range(16))
    unflipped = data.build("image_folder", root=root)
    assert all(torch.equal(unflipped.train[0][0], plain) for _ in range(16))


def test_centre_crop_and_random_crop_windows(tmp_path):
    img = (10 * np.arange(6)[:, None] + np.arange(6)[None, :]).astype(np.uint8)  # pixel (r, c) = 10r + c
    root = write_tree(tmp_path / "k", {"train": {c: [img] * 10 for c in ("a", "b")}})
    b = data.build("image_folder", root=root, crop=2)
    assert b.input_shape == (1, 2, 2)
    expected = torch.tensor([[[22.0, 23.0], [32.0, 33.0]]]) / 255  # rows 2-3, columns 2-3
    assert torch.allclose(b.val[0][0], expected) and torch.allclose(b.train[0][0], expected)
    b = data.build("image_folder", root=root, random_crop=True, padding=1)  # 6×6 window of the 8×8 padded image
    padded = np.pad(img, 1).astype(np.float32) / 255
    windows = {(i, j) for i in range(3) for j in range(3)}
    seen = set()
    for _ in range(60):
        x = b.train[0][0][0].numpy()
        hits = [(i, j) for i, j in windows if np.allclose(x, padded[i:i + 6, j:j + 6])]
        assert len(hits) == 1
        seen.update(hits)
    assert len(seen) > 1 and torch.allclose(b.val[0][0][0], torch.from_numpy(padded[1:7, 1:7]))


def test_resize_shapes_match_the_transformed_images(tmp_path):
    rng = np.random.default_rng(1)
    tall = [rng.integers(0, 256, (7, 5, 3), dtype=np.uint8) for _ in range(10)]
    root = write_tree(tmp_path / "r", {"train": {"a": tall, "b": tall}})
    b = data.build("image_folder", root=root, resize=4)  # shorter side 5 → 4, longer 7 → int(4·7/5) = int(5.6) = 5
    assert b.input_shape == (3, 5, 4) and b.train[0][0].shape == b.val[0][0].shape == (3, 5, 4)
    b = data.build("image_folder", root=root, resize=[3, 7])
    assert b.input_shape == (3, 3, 7) and b.val[0][0].shape == (3, 3, 7)
    wide = [a.transpose(1, 0, 2).copy() for a in tall]  # 5×7: the height is now the shorter side
    b = data.build("image_folder", root=write_tree(tmp_path / "w", {"train": {"a": wide, "b": wide}}), resize=4)
    assert b.input_shape == (3, 4, 5) and b.train[0][0].shape == (3, 4, 5)
    flat = np.full((8, 6, 3), 77, dtype=np.uint8)  # a constant image stays constant under resizing
    root = write_tree(tmp_path / "flat", {"train": {"a": [flat] * 10, "b": [flat] * 10}})
    x = data.build("image_folder", root=root, resize=[4, 3]).val[0][0]
    assert torch.allclose(x, torch.full((3, 4, 3), 77 / 255), atol=1e-6)


def test_grayscale_rgb_and_forced_channels(tmp_path):
    gray = np.full((4, 4), 200, dtype=np.uint8)
    red = np.zeros((4, 4, 3), dtype=np.uint8)
    red[..., 0] = 255
    only_gray = data.build("image_folder", root=write_tree(tmp_path / "g", {"train": {"a": [gray] * 5,
                                                                                      "b": [gray] * 5}}))
    assert only_gray.input_shape == (1, 4, 4)
    mixed = data.build("image_folder", root=write_tree(tmp_path / "m", {"train": {"a": [gray] * 5, "b": [red] * 5}}))
    assert mixed.input_shape == (3, 4, 4)
    x, y = mixed.train.dataset[0]  # a grayscale file in a colour folder: the value in all three channels
    assert int(y) == 0 and torch.allclose(x, torch.full((3, 4, 4), 200 / 255))
    forced = data.build("image_folder", root=tmp_path / "m", channels=1)
    x, y = forced.train.dataset[5]  # pure red as luminance, ITU-R 601-2: 0.299 · 255 = 76.2
    assert forced.input_shape == (1, 4, 4) and int(y) == 1
    assert abs(float(x[0, 0, 0]) * 255 - 0.299 * 255) <= 1.0


def test_different_sizes_need_resize_or_crop(tmp_path):
    rng = np.random.default_rng(2)
    root = write_tree(tmp_path / "s", {"train": {"a": [rng.integers(0, 256, (6, 6), dtype=np.uint8)] * 5,
                                                 "b": [rng.integers(0, 256, (5, 7), dtype=np.uint8)] * 5}})
    with pytest.raises(data.DataFormatError) as info:
        data.build("image_folder", root=root)
    one_line(info.value, str(root / "train" / "a" / "00.png"), "6×6", str(root / "train" / "b" / "00.png"), "5×7",
             "data.options.resize")
    assert data.build("image_folder", root=root, resize=[4, 4]).input_shape == (1, 4, 4)
    assert data.build("image_folder", root=root, crop=4).input_shape == (1, 4, 4)


def one_line(err: BaseException, *fragments: str) -> None:
    message = str(err)
    assert "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_empty_class_folder(rgb_tree):
    root, _ = rgb_tree
    (root / "train" / "fox").mkdir()
    with pytest.raises(data.DataFormatError) as info:
        data.build("image_folder", root=root)
    one_line(info.value, str(root / "train" / "fox"), "empty class folder")


def test_empty_test_class_folder_and_class_mismatch(rgb_tree):
    root, _ = rgb_tree
    for f in (root / "test" / "emu").iterdir():
        f.unlink()
    with pytest.raises(data.DataFormatError) as info:
        data.build("image_folder", root=root)
    one_line(info.value, str(root / "test" / "emu"), "empty class folder")
    (root / "test" / "emu").rmdir()
    (root / "test" / "yak").mkdir()
    with pytest.raises(data.DataFormatError) as info:
        data.build("image_folder", root=root)
    one_line(info.value, str(root / "test"), "only in train: emu", "only in test: yak")


@pytest.mark.parametrize("kind", ["garbage", "truncated"])
def test_unreadable_image(rgb_tree, kind):
    root, _ = rgb_tree
    bad = root / "train" / "dog" / "03.png"
    content = bad.read_bytes()
    bad.write_bytes(b"this is not a png" if kind == "garbage" else content[:len(content) // 2])
    with pytest.raises(data.DataFormatError) as info:
        data.build("image_folder", root=root)
    one_line(info.value, str(bad), "cannot read the image", "replace or remove the file")


def test_truncated_image_without_the_build_check_fails_on_access_naming_it(rgb_tree):
    root, _ = rgb_tree
    bad = root / "train" / "cat" / "00.png"
    bad.write_bytes(bad.read_bytes()[:60])  # the header survives, the pixel data does not
    b = data.build("image_folder", root=root, check_images=False)
    with pytest.raises(data.DataFormatError) as info:
        b.train.dataset[0]
    one_line(info.value, str(bad), "cannot read the image")


def test_missing_root_and_layout(tmp_path, rgb_tree):
    with pytest.raises(data.DataNotFoundError) as info:
        data.build("image_folder", root=tmp_path / "nope")
    one_line(info.value, str(tmp_path / "nope"), "'image_folder' not found", "DIR/train/<class>")
    root, _ = rgb_tree
    with pytest.raises(data.DataFormatError) as info:  # a folder of images, no class folders
        data.build("image_folder", root=root / "train" / "cat")
    one_line(info.value, str(root / "train" / "cat"), "no class folders", "DIR/<class>/*.png")
    with pytest.raises(data.DataFormatError) as info:
        data.build("image_folder")
    one_line(info.value, "needs data.root")


def test_a_plain_imagefolder_root_is_the_training_set(rgb_tree):
    """data.root = DIR/train (class folders, no train/ below): the same training set, no test set."""
    root, _ = rgb_tree
    split, plain = data.build("image_folder", root=root, seed=4), data.build("image_folder", root=root / "train", seed=4)
    assert (plain.classes, plain.test) == (CLASSES, None)
    assert {k: v for k, v in split.sizes().items() if k != "test"} == plain.sizes()
    assert torch.equal(plain.meta_val[2][0], split.meta_val[2][0]) and plain.info["train_dir"] == str(root / "train")


def test_which_layout_a_folder_named_train_means(tmp_path):
    """Split folders when train/ holds sub-folders or DIR holds only train/val/test; else train is a class."""
    rng = np.random.default_rng(1)
    img = [rng.integers(0, 256, (4, 4, 3), dtype=np.uint8) for _ in range(5)]
    classes = write_tree(tmp_path / "vehicles", {".": {"bus": img, "car": img, "train": img}})
    assert data.build("image_folder", root=classes).classes == ["bus", "car", "train"]
    splits = write_tree(tmp_path / "with_stray", {"train": {"bus": img, "car": img}, "test": {"bus": img, "car": img}})
    (splits / "__MACOSX").mkdir()  # another folder beside train/ holding class folders: still split folders
    b = data.build("image_folder", root=splits)
    assert b.classes == ["bus", "car"] and len(b.test) == 10
    flat = write_tree(tmp_path / "no_classes", {".": {"train": img, "val": img}})  # images directly in train/
    with pytest.raises(data.DataFormatError) as info:
        data.build("image_folder", root=flat)
    one_line(info.value, str(flat / "train"), "no class folders")


@pytest.mark.parametrize("options, fragment", [
    ({"resize": "big"}, "data.options.resize must be a positive integer or [height, width]"),
    ({"crop": [4, 0]}, "data.options.crop must be"),
    ({"crop": 9}, "smaller than crop 9×9"),
    ({"channels": 2}, "data.options.channels must be 1, 3 or null"),
    ({"std": [0.0]}, "data.options.std must be > 0"),
    ({"mean": [0.1, 0.2]}, "data.options.mean must be one number or 3"),
    ({"padding": -1}, "data.options.padding must be an integer >= 0"),
])
def test_bad_options(rgb_tree, options, fragment):
    root, _ = rgb_tree
    with pytest.raises(data.DataFormatError) as info:
        data.build("image_folder", root=root, **options)
    one_line(info.value, fragment)


def test_a_single_class_is_refused(tmp_path):
    root = write_tree(tmp_path / "one", {"train": {"a": [np.zeros((2, 2), dtype=np.uint8)] * 3}})
    with pytest.raises(data.DataFormatError) as info:
        data.build("image_folder", root=root)
    one_line(info.value, str(root / "train"), "at least 2")
