"""CIFAR-10/100, SVHN, Tiny-ImageNet and Fashion-MNIST read from files in their real formats."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import metacal.data as data
from metacal.data.cifar import CIFAR10_MEAN, CIFAR10_STD
from metacal.data.idx import read_idx


def normalise(images: np.ndarray, mean, std) -> torch.Tensor:
    x = torch.as_tensor(images, dtype=torch.float32) / 255.0
    shape = (-1, 1, 1)
    return (x - torch.tensor(mean).view(shape)) / torch.tensor(std).view(shape)


def augment_candidates(image: np.ndarray, mean, std, pad: int = 4, flip: bool = True) -> dict:
    """Every output the paper augmentation can produce: crops of the zero-padded image (+ mirrored)."""
    c, h, w = image.shape
    padded = np.zeros((c, h + 2 * pad, w + 2 * pad), dtype=np.uint8)
    padded[:, pad:pad + h, pad:pad + w] = image
    out = {}
    for dy in range(2 * pad + 1):
        for dx in range(2 * pad + 1):
            crop = padded[:, dy:dy + h, dx:dx + w]
            out[(dy, dx, False)] = normalise(crop, mean, std)
            if flip:
                out[(dy, dx, True)] = normalise(crop[:, :, ::-1].copy(), mean, std)
    return out


def which_augmentation(x: torch.Tensor, candidates: dict) -> list:
    return [key for key, value in candidates.items() if torch.allclose(x, value, atol=1e-5)]


def check_plain_views(bundle, written, mean, std) -> None:
    """val / meta_val / test items are exactly the normalised stored images (no augmentation)."""
    for subset in (bundle.val, bundle.meta_val):
        for pos, i in enumerate(subset.index.tolist()):
            x, y = subset[pos]
            assert x.dtype == torch.float32 and y.dtype == torch.int64 and y.dim() == 0
            torch.testing.assert_close(x, normalise(written.train_images[i], mean, std), atol=1e-6, rtol=0)
            assert int(y) == written.train_labels[i]
    assert len(bundle.test) == len(written.test_labels)
    for i in range(len(bundle.test)):
        x, y = bundle.test[i]
        torch.testing.assert_close(x, normalise(written.test_images[i], mean, std), atol=1e-6, rtol=0)
        assert int(y) == written.test_labels[i]


def check_train_augmented(bundle, written, mean, std, flip: bool, draws: int = 24) -> None:
    """Each draw of a train item is one crop(+flip) of the padded image; draws vary; labels are right."""
    pos = 0
    i = int(bundle.train.index[pos])
    candidates = augment_candidates(written.train_images[i], mean, std, flip=flip)
    seen = set()
    for _ in range(draws):
        x, y = bundle.train[pos]
        assert int(y) == written.train_labels[i]
        keys = which_augmentation(x, candidates)
        assert len(keys) == 1, "train item is not a padded crop (or mirror) of its image"
        seen.add(keys[0])
    assert len(seen) > 3  # random crops differ between draws
    assert any(k[2] for k in seen) == flip  # mirrored only where the paper flips
    # and the identical position in the plain view is the unaugmented image
    torch.testing.assert_close(bundle.val.dataset[i][0], candidates[(4, 4, False)])


def test_cifar10_real_format(cifar10_dir):
    w = cifar10_dir
    b = data.build("cifar10", root=w.root, seed=0)
    assert b.sizes() == {"train": 40, "val": 5, "meta_val": 5, "test": 20}
    assert (b.num_classes, b.input_shape, b.in_channels) == (10, (3, 32, 32), 3)
    assert b.classes == w.classes and b.mean == CIFAR10_MEAN and b.std == CIFAR10_STD
    assert torch.equal(b.train.targets, torch.as_tensor(w.train_labels)[b.train.index])
    check_plain_views(b, w, CIFAR10_MEAN, CIFAR10_STD)
    check_train_augmented(b, w, CIFAR10_MEAN, CIFAR10_STD, flip=True)
    # root may also point at the batches folder itself
    assert len(data.build("cifar10", root=w.root / "cifar-10-batches-py").test) == 20


def test_cifar100_fine_and_coarse(cifar100_dir):
    w = cifar100_dir
    b = data.build("cifar100", root=w.root, seed=3)
    assert (b.num_classes, len(b.classes), b.classes[7]) == (100, 100, "fine_7")
    check_plain_views(b, w, b.mean, b.std)
    check_train_augmented(b, w, b.mean, b.std, flip=True)
    coarse = data.build("cifar100", root=w.root, label_type="coarse")
    assert coarse.num_classes == 20
    assert [int(coarse.test[i][1]) for i in range(20)] == w.coarse[50:].tolist()


def test_cifar_agrees_with_torchvision_reader(cifar10_dir, cifar100_dir, monkeypatch):
    """torchvision's own CIFAR classes (md5 check disabled) read the fixture files identically."""
    import torchvision.datasets as tvd
    import torchvision.datasets.cifar as tv_cifar

    monkeypatch.setattr(tv_cifar, "check_integrity", lambda *a, **k: True)
    for cls, w, name in ((tvd.CIFAR10, cifar10_dir, "cifar10"), (tvd.CIFAR100, cifar100_dir, "cifar100")):
        ref = cls(str(w.root), train=True, download=False)
        b = data.build(name, root=w.root, augment=False)
        base = b.train.dataset
        assert np.array_equal(base.images.permute(0, 2, 3, 1).numpy(), ref.data)  # torchvision stores HWC
        assert base.targets.tolist() == list(ref.targets)
        assert b.classes == list(ref.classes)


def test_svhn_mat_labels_and_no_flip(svhn_dir, monkeypatch):
    w = svhn_dir
    b = data.build("svhn", root=w.root, seed=0)
    assert b.sizes() == {"train": 32, "val": 4, "meta_val": 4, "test": 10}
    assert sorted(b.test.targets.tolist()) == list(range(10))  # label 10 in the file became digit 0
    check_plain_views(b, w, b.mean, b.std)
    check_train_augmented(b, w, b.mean, b.std, flip=False, draws=40)
    # independent oracle: torchvision's SVHN reader on the same file
    import torchvision.datasets as tvd
    import torchvision.datasets.svhn as tv_svhn

    monkeypatch.setattr(tv_svhn, "check_integrity", lambda *a, **k: True)
    ref = tvd.SVHN(str(w.root), split="train")
    assert np.array_equal(b.train.dataset.images.numpy(), ref.data)
    assert b.train.dataset.targets.tolist() == ref.labels.tolist()


def test_tiny_imagenet_folders(tiny_imagenet_dir):
    w = tiny_imagenet_dir
    b = data.build("tiny_imagenet", root=w.root, seed=0)
    assert b.sizes() == {"train": 24, "val": 3, "meta_val": 3, "test": 6}
    assert (b.num_classes, b.input_shape, b.classes) == (3, (3, 64, 64), w.classes)
    assert torch.equal(b.train.dataset.targets, torch.as_tensor(w.train_labels))
    check_plain_views(b, w, b.mean, b.std)  # includes the grayscale JPEG, expanded to 3 channels
    check_train_augmented(b, w, b.mean, b.std, flip=True, draws=20)


@pytest.mark.parametrize("fixture", ["fashion_gz_dir", "fashion_torchvision_dir"])
def test_fashion_mnist_idx_gz_and_raw(fixture, request):
    w = request.getfixturevalue(fixture)
    b = data.build("fashion_mnist", root=w.root, seed=0)
    assert b.sizes() == {"train": 40, "val": 5, "meta_val": 5, "test": 20}
    assert (b.input_shape, b.in_channels, b.mean, b.std) == ((1, 28, 28), 1, (0.2860,), (0.3530,))
    check_plain_views(b, w, b.mean, b.std)
    # no augmentation by default: the train view equals the plain images as well
    i = int(b.train.index[0])
    torch.testing.assert_close(b.train[0][0], normalise(w.train_images[i], b.mean, b.std))
    aug = data.build("fashion_mnist", root=w.root, seed=0, augment=True)
    check_train_augmented(aug, w, aug.mean, aug.std, flip=True)


def test_idx_reader_matches_torchvision(fashion_torchvision_dir, fashion_gz_dir):
    from torchvision.datasets.mnist import read_image_file, read_label_file

    raw = fashion_torchvision_dir.root / "FashionMNIST" / "raw"
    images = read_idx(raw / "train-images-idx3-ubyte")
    assert images.shape == (50, 28, 28) and images.dtype == np.uint8
    assert np.array_equal(images, read_image_file(str(raw / "train-images-idx3-ubyte")).numpy())
    assert np.array_equal(read_idx(raw / "t10k-labels-idx1-ubyte"),
                          read_label_file(str(raw / "t10k-labels-idx1-ubyte")).numpy())
    gz = read_idx(fashion_gz_dir.root / "train-images-idx3-ubyte.gz")
    assert np.array_equal(gz, fashion_gz_dir.train_images[:, 0])


def test_idx_reader_rejects_bad_files(tmp_path):
    bad = tmp_path / "bad"
    bad.write_bytes(b"\x12\x34\x08\x01\x00\x00\x00\x02\x01\x02")
    with pytest.raises(ValueError, match="not an IDX file"):
        read_idx(bad)
    short = tmp_path / "short"
    short.write_bytes(b"\x00\x00\x08\x01\x00\x00\x00\x05\x01\x02")
    with pytest.raises(ValueError, match="truncated"):
        read_idx(short)


def test_views_share_memory_and_loaders_collate(cifar10_dir):
    b = data.build("cifar10", root=cifar10_dir.root)
    assert b.train.dataset.images.data_ptr() == b.val.dataset.images.data_ptr() == b.meta_val.dataset.images.data_ptr()
    x, y = next(iter(data.make_loader(b.train, batch_size=8, shuffle=True, seed=0)))
    assert x.shape == (8, 3, 32, 32) and x.dtype == torch.float32 and y.shape == (8,) and y.dtype == torch.int64
