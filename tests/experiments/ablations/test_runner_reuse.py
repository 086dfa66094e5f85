"""A study reuses a finished run only when its saved config is exactly the one it would train."""

from __future__ import annotations

import json

import pytest

import metacal.train
from experiments.ablations.gamma_oracle import regime_setting
from experiments.ablations.runner import Variant, _load, train_variant
from metacal.train.config import to_yaml


class Trained(Exception):
    """Raised by the patched trainer: the runner decided to train."""


@pytest.fixture
def finished(tmp_path, monkeypatch):
    def no_training(*args, **kwargs):
        raise Trained

    monkeypatch.setattr(metacal.train, "train", no_training)
    setting = regime_setting("mnist1d_overconfident", 0, quick=True)
    variant = Variant("focal γ = 3", "focal3", ())
    cfg = _load(setting, variant, ["run.save_checkpoints=false"])
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(to_yaml(cfg))
    (run / "metrics.json").write_text(json.dumps({"epoch": 7, "test": {"ece": 0.0123}}))
    (run / "history.json").write_text(json.dumps([{"epoch": 1, "time_s": 1.5}, {"epoch": 2, "time_s": 2.25}]))
    return setting, variant, run


def test_a_finished_run_with_the_same_config_is_read_back(finished):
    setting, variant, run = finished
    out = train_variant(setting, variant, run, reuse=True)
    assert out.metrics == {"epoch": 7, "test": {"ece": 0.0123}}
    assert [h["epoch"] for h in out.history] == [1, 2]
    assert out.seconds == 3.75 and out.model is None and out.key == "focal γ = 3"


def test_without_reuse_the_run_is_trained_again(finished):
    with pytest.raises(Trained):
        train_variant(*finished, reuse=False)


@pytest.mark.parametrize("damage", ["config", "metrics"])
def test_a_changed_config_or_an_unfinished_run_is_trained_again(finished, damage):
    setting, variant, run = finished
    if damage == "config":  # one value differs (the seed)
        text = (run / "config.yaml").read_text()
        (run / "config.yaml").write_text(text.replace("seed: 0", "seed: 1", 1))
    else:  # killed before metrics.json, which the trainer writes last
        (run / "metrics.json").unlink()
    with pytest.raises(Trained):
        train_variant(setting, variant, run, reuse=True)
