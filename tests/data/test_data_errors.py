"""Missing data and bad names/options fail with one clear message."""

from __future__ import annotations

from pathlib import Path

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
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)  # the cache folder is then ~/.cache/metacal
    with pytest.raises(data.DataNotFoundError) as info:
        data.build("svhn")
    message = str(info.value)
    assert str(tmp_path / "env") in message and str(tmp_path / "home" / ".cache" / "metacal") in message


def test_fashion_default_search_order(tmp_path, monkeypatch):
    from metacal.data.fashion_mnist import search_dirs

    monkeypatch.setenv("METACAL_DATA", str(tmp_path))
    monkeypatch.delenv("METACAL_NO_SYSTEM_DATASETS", raising=False)  # CI's second pass sets it
    dirs = [str(d) for d in search_dirs()]
    assert dirs[:3] == [str(tmp_path / "fashion_mnist"), str(tmp_path / "FashionMNIST" / "raw"),
                        "/usr/share/datasets/fashion-mnist"]
    assert [str(d) for d in search_dirs("/r")] == ["/r", "/r/fashion_mnist", "/r/FashionMNIST/raw"]


def hide_system_datasets(monkeypatch, tmp_path) -> Path:
    """Point every search at an empty folder: $METACAL_DATA, a fresh HOME, system-wide datasets hidden."""
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("METACAL_DATA", str(empty))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("METACAL_NO_SYSTEM_DATASETS", "1")
    return empty


def test_hidden_system_datasets_give_the_not_found_error(tmp_path, monkeypatch):
    """METACAL_NO_SYSTEM_DATASETS=1 takes the Debian folder out of the search (whether or not the package is
    installed here), so Fashion-MNIST is not found and the error says why the package did not count."""
    from metacal.data.fashion_mnist import SYSTEM_DIR, find_fashion_mnist_files, search_dirs

    empty = hide_system_datasets(monkeypatch, tmp_path)
    assert SYSTEM_DIR not in search_dirs() and search_dirs()[0] == empty / "fashion_mnist"
    with pytest.raises(data.DataNotFoundError) as info:
        data.build("fashion_mnist")
    message = str(info.value)
    assert str(empty / "fashion_mnist") in message and str(SYSTEM_DIR) not in info.value.looked
    assert "apt-get install dataset-fashion-mnist" in message
    assert f"{SYSTEM_DIR} is left out: METACAL_NO_SYSTEM_DATASETS is set" in message and "\n" not in message
    for off in ("0", "", "false"):  # only a true value hides them
        monkeypatch.setenv("METACAL_NO_SYSTEM_DATASETS", off)
        assert SYSTEM_DIR in search_dirs()
    monkeypatch.setenv("METACAL_NO_SYSTEM_DATASETS", "1")
    with pytest.raises(data.DataNotFoundError):
        find_fashion_mnist_files()


@pytest.mark.slow
def test_tests_needing_fashion_mnist_skip_when_it_is_hidden(tmp_path):
    """CI's second pass: the real-data tests skip (with the install command) instead of failing."""
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    (tmp_path / "empty").mkdir()
    env = {**os.environ, "METACAL_NO_SYSTEM_DATASETS": "1", "METACAL_DATA": str(tmp_path / "empty"),
           "HOME": str(tmp_path / "home"), "PYTHONPATH": str(repo), "OMP_NUM_THREADS": "1"}
    env.pop("XDG_CACHE_HOME", None)  # the cache folder: the empty HOME's
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           "tests/data/test_data_fashion_mnist_real.py"], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "2 skipped" in proc.stdout and "passed" not in proc.stdout and "failed" not in proc.stdout
    assert "Fashion-MNIST is not installed here" in proc.stdout and "METACAL_NO_SYSTEM_DATASETS is set" in proc.stdout


def test_unknown_name_and_option():
    with pytest.raises(UnknownNameError, match="did you mean tiny_imagenet, image_folder\\? available: arrays, cifar10, cifar100, "):
        data.build("imagenet")
    with pytest.raises(ValueError, match="no option.*batchsize.*valid: split"):
        data.build("gaussian_mixture", batchsize=3)
    assert data.available() == ["arrays", "cifar10", "cifar100", "fashion_mnist", "gaussian_mixture", "image_folder",
                                "mnist1d", "svhn", "tiny_imagenet"]


def test_error_survives_pickling():
    import pickle

    err = data.DataNotFoundError("svhn", ["/a", "/b"], "pass download=True", "<root>/x.mat")
    back = pickle.loads(pickle.dumps(err))
    assert str(back) == str(err) and back.looked == ["/a", "/b"]
