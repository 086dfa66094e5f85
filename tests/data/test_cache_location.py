"""Where generated and downloaded data go: ``$METACAL_DATA``, else ``$XDG_CACHE_HOME/metacal``, else
``~/.cache/metacal``; and the MNIST-1D shift suite's first build, which writes its 25 sets there once, with a
progress bar when asked (by default only on a terminal)."""

from __future__ import annotations

import pytest

from metacal.data import build, paths
from metacal.data import shift_suites as ss
from metacal.data.mnist1d_shift import FAMILIES, SEVERITIES, missing_sets


@pytest.fixture
def env(monkeypatch, tmp_path):
    """No METACAL_DATA, no XDG_CACHE_HOME, HOME in tmp_path; returns monkeypatch to set them."""
    monkeypatch.delenv(paths.ENV_VAR, raising=False)
    monkeypatch.delenv(paths.XDG_ENV_VAR, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return monkeypatch


def test_the_default_then_xdg_then_metacal_data(env, tmp_path):
    home = tmp_path / "home" / ".cache" / "metacal"
    assert paths.cache_home() == paths.data_home() == home and paths.candidate_roots(None) == [home]
    env.setenv(paths.XDG_ENV_VAR, "")  # empty: as if unset
    assert paths.data_home() == home
    env.setenv(paths.XDG_ENV_VAR, "relative/cache")  # the XDG spec: a relative path is ignored
    assert paths.data_home() == home
    env.setenv(paths.XDG_ENV_VAR, str(tmp_path / "xdg"))
    assert paths.cache_home() == paths.data_home() == tmp_path / "xdg" / "metacal"
    assert paths.candidate_roots(None) == [tmp_path / "xdg" / "metacal"]
    assert paths.download_root(None) == tmp_path / "xdg" / "metacal"
    env.setenv(paths.ENV_VAR, str(tmp_path / "data"))
    assert paths.data_home() == paths.download_root(None) == tmp_path / "data"
    assert paths.candidate_roots(None) == [tmp_path / "data", tmp_path / "xdg" / "metacal"]
    assert paths.candidate_roots(tmp_path / "r") == [tmp_path / "r"]  # an explicit root is the only place


def test_fashion_mnist_searches_the_xdg_cache(env, tmp_path):
    from metacal.data.fashion_mnist import search_dirs

    env.setenv(paths.XDG_ENV_VAR, str(tmp_path / "xdg"))
    env.setenv(paths.NO_SYSTEM_ENV_VAR, "1")
    assert search_dirs()[-2:] == [tmp_path / "xdg" / "metacal" / "fashion_mnist",
                                  tmp_path / "xdg" / "metacal" / "FashionMNIST" / "raw"]


def test_the_shift_suite_is_built_once_into_the_cache_folder(env, tmp_path, capsys):
    env.setenv(paths.XDG_ENV_VAR, str(tmp_path / "xdg"))
    bundle = build("mnist1d", root=tmp_path / "data", num_samples=200)  # the run's own data: under data.root
    args = bundle.info["generator"]
    cache = tmp_path / "xdg" / "metacal" / "mnist1d"
    assert len(missing_sets(args)) == len(FAMILIES) * len(SEVERITIES) == 25
    ss.prepare(bundle, "mnist1d_natural", progress=True)
    err = capsys.readouterr().err
    # the folder is a line of its own; the bar (leave=False) is redrawn at most every 0.1 s, so which count it
    # last showed depends on timing: only its total is certain
    assert f"mnist1d_natural: first build of 25 shifted sets into {cache}\n" in err and "/25 [" in err
    assert len(list(cache.glob("*.npz"))) == 25 and missing_sets(args) == []
    ss.prepare(bundle, "mnist1d_natural", progress=True)  # cached: nothing to build, no bar
    assert capsys.readouterr().err == ""

    env.setenv(paths.ENV_VAR, str(tmp_path / "env"))  # $METACAL_DATA wins; off a terminal no bar by default
    ss.prepare(bundle, "mnist1d_natural", families=["noise"])
    assert capsys.readouterr().err == "" and len(list((tmp_path / "env" / "mnist1d").glob("*.npz"))) == 5
    ss.prepare(bundle, "corruptions")  # nothing to prepare for the image suite
