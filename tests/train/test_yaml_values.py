"""String-typed config keys get the words their documentation gives them: YAML 1.1's boolean words (no, off,
yes, on, y, n) stay text, from a file, from ``--set`` and through ``metacal.fit(overrides=...)``; boolean keys
still take them; numbers like 5e-4 stay floats (metacal/train/yaml_loader.py)."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

import metacal
from metacal import models
from metacal.train.config import load_config
from metacal.train.yaml_loader import load_yaml

WORDS = ("no", "off", "yes", "on", "y", "n", "No", "OFF", "Yes")


@pytest.mark.parametrize("word", WORDS)
def test_yaml_words_stay_text(word):
    assert load_yaml(f"a: {word}") == {"a": word}
    assert load_yaml(f"a: [{word}, true, FALSE, 5e-4, 1e3, 7, .inf]") == {"a": [word, True, False, 0.0005, 1000.0, 7,
                                                                                 float("inf")]}


def test_free_form_options_keep_the_words_and_bool_keys_still_convert(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("data: {name: mnist1d}\nmodel: {name: mlp, options: {mode: off}}\nauto: {reconfirm: no}\n"
                    "run: {mixed_precision: no, cpu: yes}\n")
    cfg = load_config(path)
    assert cfg.model.options == {"mode": "off"} and cfg.run.mixed_precision == "no"
    assert cfg.auto.reconfirm is False and cfg.run.cpu is True
    cfg = load_config(path, ["run.mixed_precision=bf16", "run.cpu=no", "model.options.mode=on"])
    assert cfg.run.mixed_precision == "bf16" and cfg.run.cpu is False and cfg.model.options == {"mode": "on"}
    assert load_config(path, ["run.mixed_precision=no"]).run.mixed_precision == "no"


def test_mixed_precision_no_trains_from_the_command_line_and_a_file(write_config, run_cli, tmp_path):
    path = write_config("ce")
    text = path.read_text().replace("run:\n", "run:\n  mixed_precision: no\n")
    assert "mixed_precision: no" in text
    path.write_text(text)
    code, _, err = run_cli(["--config", path, "--run-dir", tmp_path / "file", "--set", "schedule.epochs=1"])
    assert code == 0, err
    code, _, err = run_cli(["--config", write_config("ce2"), "--run-dir", tmp_path / "cli", "--set",
                            "run.mixed_precision=no", "schedule.epochs=1"])
    assert code == 0, err
    for run in ("file", "cli"):
        assert "mixed_precision: 'no'" in (tmp_path / run / "config.yaml").read_text()
        assert json.loads((tmp_path / run / "metrics.json").read_text())["finished"] is True


def test_mixed_precision_no_through_fit(tmp_path):
    g = torch.Generator().manual_seed(0)
    y = torch.arange(200) % 4
    x = torch.randn(200, 8, generator=g) + 2.0 * nn.functional.one_hot(y, 8).float()
    torch.manual_seed(0)
    model = models.build("mlp", num_classes=4, in_channels=8, input_shape=(8,), hidden=[16])
    result = metacal.fit(model, TensorDataset(x, y), run_dir=tmp_path / "fit",
                         overrides=["run.mixed_precision=no", "schedule.epochs=1", "schedule.milestones=[1]",
                                    "data.batch_size=20", "data.eval_batch_size=50", "logging.tensorboard=false",
                                    "logging.progress_bar=false", "run.torch_threads=1"])
    assert result.metrics["finished"] is True
    assert "mixed_precision: 'no'" in (tmp_path / "fit" / "config.yaml").read_text()
