"""The regime options through the trainer (metacal/train/regime.py): what metrics.json and test.npz record of label
noise, a trusted set, a long tail and known posteriors; the noise probe; the seeds; bad values as one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from metacal import data
from metacal.metrics import posterior_gap
from metacal.metrics.ood import auroc

# 4-class mixture, 4,000 samples: 3,200 train / 400 val / 400 meta-val; a noise rate is realised within ~1 point
REGIME = {"data": {"options": {"n_train": 4000, "n_test": 1000, "noise_rate": 0.4}}, "eval": {"bootstrap": 0},
          "model": {"name": "mlp", "options": {"hidden": [32]}}, "logging": {"tensorboard": False}}
GAMMA_NET = {**REGIME, "loss": {"name": "focal"}, "learner": "gamma_net", "meta": {"objective": "sece"}}


def metrics(run_dir):
    return json.loads((run_dir / "metrics.json").read_text())


def bundle(run_seed: int = 0, **options):
    opts = {"n_train": 4000, "n_test": 1000, "dim": 8, "num_classes": 4, **options}
    return data.build("gaussian_mixture", seed=0, draw_seed=run_seed, **opts)


def test_noisy_run_records(write_config, run_cli, tmp_path):
    config = write_config("noisy", REGIME)
    assert run_cli(["--config", config, "--run-dir", tmp_path / "run"])[0] == 0
    m, b = metrics(tmp_path / "run"), bundle(noise_rate=0.4)
    noise = m["data"]["label_noise"]
    assert noise["rate"] == 0.4 and noise["kind"] == "symmetric"
    assert abs(noise["realised"]["train"] - 0.4) < 0.03
    assert noise["realised"]["train"] == pytest.approx(float((b.train.labels != b.train.clean_targets).double().mean()))
    assert m["data"]["sizes"] == {"train": 3200, "val": 400, "meta_val": 400, "test": 1000}
    assert sum(m["data"]["class_counts"]["train"]) == 3200
    test = np.load(tmp_path / "run" / "predictions" / "test.npz")
    assert np.array_equal(test["labels"], b.test.targets.numpy())  # clean
    assert np.array_equal(test["noisy_labels"], b.noisy_test_labels.numpy())
    val = np.load(tmp_path / "run" / "predictions" / "val.npz")
    assert np.array_equal(val["labels"], b.val.labels.numpy())  # the run's held-out labels are noisy
    # the noisy view of the test set, recomputed from test.npz
    probs = torch.softmax(torch.from_numpy(test["logits"]).double(), 1)
    noisy_error = float((probs.argmax(1) != torch.from_numpy(test["noisy_labels"])).double().mean())
    assert m["test_noisy_labels"]["raw"]["error"] == pytest.approx(noisy_error)
    assert set(m["test_noisy_labels"]) == {"raw", "after_ts"}
    # true posterior beside ECE
    assert m["test"]["true_posterior"]["posterior_gap"] == pytest.approx(posterior_gap(probs, test["posteriors"]))
    assert "true_posterior" in m["test_after_ts"]
    probe = m["noise_detection"]
    assert set(probe) == {"auroc_ce_loss", "flipped_fraction"} and 0.5 < probe["auroc_ce_loss"] <= 1


def test_gamma_net_probe_separates_by_gamma_and_weight(write_config, run_cli, tmp_path):
    config = write_config("noisy_gn", GAMMA_NET)
    assert run_cli(["--config", config, "--run-dir", tmp_path / "run"])[0] == 0
    probe = metrics(tmp_path / "run")["noise_detection"]
    assert {"auroc_gamma", "auroc_focal_weight", "gamma_flipped_mean", "gamma_clean_mean"} <= set(probe)
    assert all(0 <= probe[k] <= 1 for k in ("auroc_gamma", "auroc_focal_weight", "auroc_ce_loss"))


def test_probe_measures_what_it_says():
    from metacal.predictions import Predictions
    from metacal.train.regime import NoiseProbe

    # 6 training samples, 2 flipped (1 and 4); logits put low probability on the carried label of the flipped ones
    flipped = torch.tensor([False, True, False, False, True, False])
    labels = torch.tensor([0, 1, 0, 1, 0, 1])
    logits = torch.tensor([[3.0, 0], [3, 0], [2, 0], [0, 1], [0, 2], [0, 4]])
    gamma = torch.tensor([1.0, 3.0, 1.0, 2.0, 0.5, 1.0], dtype=torch.float64)
    pred = Predictions.from_logits(logits, labels, gamma)
    out = NoiseProbe(None, flipped).measure(lambda loader: pred)
    loss = -pred.probs.gather(1, labels[:, None]).squeeze(1).log()
    assert out["auroc_ce_loss"] == pytest.approx(auroc(loss[flipped], loss[~flipped])) and out["auroc_ce_loss"] == 1
    assert out["auroc_gamma"] == pytest.approx(auroc(gamma[flipped], gamma[~flipped]))
    assert out["gamma_flipped_mean"] == pytest.approx(1.75) and out["gamma_clean_mean"] == pytest.approx(1.25)
    assert out["flipped_fraction"] == pytest.approx(1 / 3)


def test_the_run_seed_draws_the_noise_and_data_seed_the_split(write_config, run_cli, tmp_path):
    config = write_config("noisy", REGIME)
    for name, sets in (("a", []), ("b", []), ("c", ["run.seed=1"])):
        args = ["--config", config, "--run-dir", tmp_path / name, "--set", "schedule.epochs=1"]
        assert run_cli(args + sets)[0] == 0
    a, b, c = (metrics(tmp_path / n)["data"]["label_noise"]["transitions"]["train"] for n in "abc")
    assert a == b and a != c
    assert metrics(tmp_path / "a")["data"]["sizes"] == metrics(tmp_path / "c")["data"]["sizes"]
    assert torch.equal(bundle(0).train.index, bundle(1, noise_rate=0.4).train.index)


def test_trusted_and_long_tail_records(write_config, run_cli, tmp_path):
    config = write_config("trusted", REGIME)
    sets = ["data.options.trusted=200", "data.options.imbalance=10", "schedule.epochs=1"]
    assert run_cli(["--config", config, "--run-dir", tmp_path / "run", "--set", *sets])[0] == 0
    m = metrics(tmp_path / "run")
    assert m["data"]["trusted"]["n"] == 200 and m["data"]["imbalance"] == {"rho": 10.0}
    assert m["data"]["sizes"]["val"] + m["data"]["sizes"]["meta_val"] == 200
    counts = m["data"]["class_counts"]["train"]  # noisy labels: the clean profile is in the bundle
    b = bundle(noise_rate=0.4, trusted=200, imbalance=10)
    assert counts == torch.bincount(b.train.labels, minlength=4).tolist()
    clean = torch.bincount(b.train.clean_targets, minlength=4).tolist()
    assert clean[0] / clean[-1] == pytest.approx(10, rel=0.05)


@pytest.mark.parametrize("override, message", [
    ("data.options.noise_rate=1", "noise_rate must be a number in [0, 1)"),
    ("data.options.noise_kind=flip", "unknown noise_kind 'flip'"),
    ("data.options.trusted=900", "trusted 900 is larger than the held-out pool it is drawn from (val + meta-val = 800"),
    ("data.options.imbalance=0.5", "imbalance must be a number >= 1"),
])
def test_bad_values_are_one_line_and_write_nothing(override, message, write_config, run_cli, tmp_path):
    config = write_config("bad", REGIME)
    code, out, err = run_cli(["--config", config, "--run-dir", tmp_path / "run", "--set", override])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and message in lines[0], err
    assert not (tmp_path / "run").exists()


def test_clean_run_has_no_noise_records(write_config, run_cli, tmp_path):
    clean = {**REGIME, "data": {"options": {"n_train": 1000, "n_test": 200}}}
    config = write_config("clean", clean)
    assert run_cli(["--config", config, "--run-dir", tmp_path / "run", "--set", "schedule.epochs=1"])[0] == 0
    m = metrics(tmp_path / "run")
    assert "noise_detection" not in m and "test_noisy_labels" not in m and "label_noise" not in m["data"]
    assert "noisy_labels" not in np.load(tmp_path / "run" / "predictions" / "test.npz").files
