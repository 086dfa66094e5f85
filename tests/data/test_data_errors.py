"""Missing data and bad names/options fail with one clear message."""

from __future__ import annotations

import pytest

import metacal.data as data
from metacal.registry import UnknownNameError


@pytest.mark.parametrize("name, hint", [("cifar10", "download=True"), ("cifar100", "download=True"),
                                        ("svhn", "download=True"), ("tiny_imagenet", "download=True"),
                                        ("fashion_mnist", "apt-get install dataset-fashion-mnist")])
def test_missing_root_names_dataset_paths_and_fix(name, hint, tmp_path):
    root = tmp_path / "empty"
    root.mkdir()
    with pytest.raises(data.DataNotFoundError) as info:
        data.build(name, root=root)
    err = info.value
    assert isinstance(err, FileNotFoundError)
    message = str(err)
    assert f"'{name}'" in message and hint in message and str(root) in message
    assert "Expected layout" in message and "\n" not in message
    assert err.looked and all(str(root) in p for p in err.looked)


def test_default_locations_are_listed(tmp_path, monkeypatch):
    monkeypatch.setenv("METACAL_DATA", str(tmp_path / "env"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    with pytest.raises(data.DataNotFoundError) as info:
        data.build("svhn")
    message = str(info.value)
    assert str(tmp_path / "env") in message and str(tmp_path / "home" / ".cache" / "metacal") in message


def test_fashion_default_search_order(tmp_path, monkeypatch):
    from metacal.data.fashion_mnist import search_dirs

    monkeypatch.setenv("METACAL_DATA", str(tmp_path))
    dirs = [str(d) for d in search_dirs()]
    assert dirs[:3] == [str(tmp_path / "fashion_mnist"), str(tmp_path / "FashionMNIST" / "raw"),
                        "/usr/share/datasets/fashion-mnist"]
    assert [str(d) for d in search_dirs("/r")] == ["/r", "/r/fashion_mnist", "/r/FashionMNIST/raw"]


def test_unknown_name_and_option():
    with pytest.raises(UnknownNameError, match="available: cifar10, cifar100, fashion_mnist"):
        data.build("imagenet")
    with pytest.raises(ValueError, match="no option.*batchsize.*valid options: split"):
        data.build("gaussian_mixture", batchsize=3)
    assert data.available() == ["cifar10", "cifar100", "fashion_mnist", "gaussian_mixture", "mnist1d", "svhn",
                                "tiny_imagenet"]


def test_error_survives_pickling():
    import pickle

    err = data.DataNotFoundError("svhn", ["/a", "/b"], "pass download=True", "<root>/x.mat")
    back = pickle.loads(pickle.dumps(err))
    assert str(back) == str(err) and back.looked == ["/a", "/b"]
