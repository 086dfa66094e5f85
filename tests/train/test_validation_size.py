"""A validation split too small for the loss (AdaFocal: fewer samples than its num_bins equal-mass bins) stops a
run before anything is written — one line and exit 2 on the command line, a ConfigError from metacal.fit, no
run directory — instead of a ValueError at the end of the first epoch; exactly num_bins samples train, one per bin.
An empty test set is refused the same way (an empty validation split: tests/train/test_fit.py, tests/data).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from test_fit import ONE_EPOCH, QUIET, SMALL, blobs, mlp

import metacal
from metacal.train import ConfigError

REPO = Path(__file__).resolve().parents[2]
ARRAYS = REPO / "configs" / "own_data" / "arrays" / "ce.yaml"
ADAFOCAL = REPO / "configs" / "methods" / "adafocal.yaml"
MIXUP = REPO / "configs" / "methods" / "mixup.yaml"
MESSAGE = "adafocal needs at least num_bins=15 validation samples (one per equal-mass bin), got 10"


def tiny_npz(path: Path, n: int = 100) -> Path:
    """n rows of 4 features, 2 classes: the 8:1:1 split leaves round(0.1·n) = 10 validation samples."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 4)).astype(np.float32)
    np.savez(path, x_train=x, y_train=(x[:, 0] > 0).astype(np.int64))
    return path


def test_cli_refuses_a_validation_split_smaller_than_the_bins_and_writes_nothing(run_cli, tmp_path):
    npz, run_dir = tiny_npz(tmp_path / "tiny.npz"), tmp_path / "run"
    code, _, err = run_cli(["--config", ARRAYS, "--set", "loss.name=adafocal", "--set", f"data.root={npz}",
                            "--set", "run.torch_threads=1", "--run-dir", run_dir])
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0] == f"error: loss.params (adafocal): {MESSAGE}; lower num_bins or give more validation data"
    assert not run_dir.exists()
    # --overwrite of an existing run: refused the same way, its content untouched
    run_dir.mkdir()
    (run_dir / "metrics.json").write_text("{}")
    code, _, err = run_cli(["--config", ARRAYS, "--set", "loss.name=adafocal", "--set", f"data.root={npz}",
                            "--set", "run.torch_threads=1", "--run-dir", run_dir, "--overwrite"])
    assert code == 2 and MESSAGE in err
    assert [p.name for p in run_dir.iterdir()] == ["metrics.json"] and (run_dir / "metrics.json").read_text() == "{}"


@pytest.mark.parametrize("config, extra", [(ADAFOCAL, []), (MIXUP, ["loss.params={primary: adafocal}"])],
                         ids=["adafocal", "mixup_around_adafocal"])
def test_fit_raises_config_error_before_the_run_directory_exists(config, extra, tmp_path):
    run_dir = tmp_path / "run"
    with pytest.raises(ConfigError) as err:
        metacal.fit(mlp(), blobs(100), config=config, run_dir=run_dir, overrides=[*QUIET, *extra])
    assert str(err.value).startswith(f"loss.params ({config.stem}): {MESSAGE};"), err.value
    assert not run_dir.exists()


def test_exactly_num_bins_validation_samples_train_with_one_sample_per_bin(tmp_path, monkeypatch):
    """val of 15 samples, M = 15: the run finishes and each bin's γ is exp(c_b − a_b) (γ0 = 1, focal branch,
    λ = 1; |c − a| ≤ 1 keeps γ in [e⁻¹, e], so no switch or clip) for the b-th smallest validation
    confidence c_b and its correctness a_b, read from the epoch's saved val predictions."""
    from metacal.train import outputs

    monkeypatch.setattr(outputs, "plot_reliability", lambda *a, **k: None)  # most of a tiny run's time
    run_dir = tmp_path / "run"
    result = metacal.fit(mlp(), blobs(100), val=blobs(15, seed=3), config=ADAFOCAL, run_dir=run_dir,
                         overrides=[*ONE_EPOCH, *SMALL, *QUIET, "run.max_steps_per_epoch=2"])
    assert result.metrics["finished"] and result.metrics["val"]["n"] == 15
    with np.load(run_dir / "predictions" / "val.npz") as val:
        probs = torch.softmax(torch.from_numpy(val["logits"]).float(), dim=1)
        labels = torch.from_numpy(val["labels"])
    conf, pred = probs.max(dim=1)
    order = conf.argsort()
    expected = [math.exp(c - a) for c, a in zip(conf[order].tolist(), (pred == labels)[order].double().tolist())]
    state = torch.load(run_dir / "checkpoints" / "latest" / "custom_checkpoint_2.pkl", weights_only=False)
    torch.testing.assert_close(state["bin_gamma"], torch.tensor(expected), atol=1e-6, rtol=0)
    assert len(set(np.round(expected, 6))) > 1  # the bins moved apart: one sample each, not one shared gap


def test_a_bundle_with_an_empty_test_set_is_refused():
    """A registered dataset whose builder returns an empty test set: refused before training (the shipped
    builders and metacal.fit refuse it earlier, naming the file or the argument)."""
    from types import SimpleNamespace

    from metacal import losses
    from metacal.train import components
    from metacal.train.config import load_config

    cfg = load_config(str(ARRAYS))
    bundle = SimpleNamespace(train=range(8), val=range(2), meta_val=range(0), test=range(0))
    with pytest.raises(ConfigError, match=r"^the test set is empty; give it samples or leave it out"):
        components.check_loss_data(cfg, losses.build("ce"), bundle)
    components.check_loss_data(cfg, losses.build("ce"), SimpleNamespace(**{**vars(bundle), "test": None}))
