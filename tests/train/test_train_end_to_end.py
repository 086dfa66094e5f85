"""End-to-end tiny runs through the CLI: files, metrics.json keys, TensorBoard tags, selection."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from train_tiny import METHODS, read_metrics

from metacal.predictions import load_predictions

SUMMARY_KEYS = {"n", "num_classes", "error", "nll", "brier", "ece", "mce", "ace", "rmsce", "ece_sweep",
                "debiased_l2_ce", "classwise_ece", "sece", "kde_ece", "smece"}
# eval settings per method in test_plain_and_meta_methods_end_to_end (the rest keep the defaults: B 1000, 0.9, 0)
CI_SETTINGS = {"ce": ["eval.bootstrap=200", "eval.ci_level=0.8", "eval.ci_seed=3", "eval.ci_method=percentile"],
               "mixup": ["eval.bootstrap=0"]}
FAST_MODEL = {"model": {"name": "mlp", "options": {"hidden": [32]}}}


def check_run_dir(run_dir, n_test: int = 120, num_classes: int = 4) -> dict:
    for name in ("config.yaml", "metrics.json", "history.json", "reliability.png",
                 "checkpoints/latest/train_state.json", "checkpoints/best/train_state.json",
                 "predictions/val.npz", "predictions/test.npz"):
        assert (run_dir / name).is_file(), name
    assert list((run_dir / "tensorboard").glob("events.out.tfevents.*"))
    metrics = read_metrics(run_dir)
    assert set(metrics) >= {"epoch", "val", "test", "test_after_ts"}
    for split in ("val", "test", "test_after_ts"):
        assert SUMMARY_KEYS <= set(metrics[split]), split
    with np.load(run_dir / "predictions" / "test.npz") as f:
        logits, labels = f["logits"], f["labels"]
    assert logits.shape == (n_test, num_classes) and labels.shape == (n_test,)
    # metrics.json's test block is the summary of the saved predictions of the selected epoch
    from metacal.metrics import summary

    again = summary(torch.softmax(torch.from_numpy(logits).double(), -1), torch.from_numpy(labels))
    for key in ("error", "nll", "ece"):
        assert metrics["test"][key] == pytest.approx(float(again[key]), abs=1e-6)
    assert metrics["test"]["n"] == n_test
    # selection: the chosen epoch has the lowest validation error of the history, a tie broken by the lower
    # validation NLL (the first of a full tie)
    history = json.loads((run_dir / "history.json").read_text())
    keys = [(h["val"]["error"], h["val"]["nll"]) for h in history]
    assert metrics["epoch"] == 1 + keys.index(min(keys))
    # per epoch: every metric but the O(N²) binning-free ones, which metrics.json has for the selected epoch
    from metacal.metrics import BINNING_FREE_KEYS

    best = history[metrics["epoch"] - 1]
    for rec in history:
        for split in ("val", "test"):
            assert set(rec[split]) & set(BINNING_FREE_KEYS) == set(), (rec["epoch"], split)
            assert SUMMARY_KEYS - set(BINNING_FREE_KEYS) <= set(rec[split])
    for key in SUMMARY_KEYS - set(BINNING_FREE_KEYS):
        assert metrics["test"][key] == best["test"][key] and metrics["val"][key] == best["val"][key], key
    for key in BINNING_FREE_KEYS:
        assert metrics["test"][key] == pytest.approx(float(again[key]), abs=1e-9), key
    # the test set's bootstrap intervals: what `python -m metacal.evaluate test.npz --json --ci` gives
    from omegaconf import OmegaConf

    from metacal.metrics import BootstrapSpec, bootstrap_intervals

    cfg = OmegaConf.load(run_dir / "config.yaml").eval
    if cfg.bootstrap == 0:
        assert "ci" not in metrics["test"]
    else:
        spec = BootstrapSpec(cfg.bootstrap, cfg.ci_level, cfg.ci_seed, cfg.ci_method)
        expected = bootstrap_intervals(torch.softmax(torch.from_numpy(logits).double(), -1),
                                       torch.from_numpy(labels), cfg.num_bins, spec)
        assert metrics["test"]["ci"] == expected
    assert "ci" not in metrics["val"] and "ci" not in metrics["test_after_ts"]
    return metrics


@pytest.mark.slow
@pytest.mark.parametrize("method", ["ce", "focal", "adafocal", "mixup", "ce_dece"])
def test_plain_and_meta_methods_end_to_end(method, write_config, run_cli, tmp_path):
    config = write_config(method, {**METHODS[method], **FAST_MODEL})
    sets = [arg for item in CI_SETTINGS.get(method, []) for arg in ("--set", item)]
    code, out, err = run_cli(["--config", config, "--run-dir", tmp_path / "run", *sets])
    assert code == 0, err
    metrics = check_run_dir(tmp_path / "run")
    if method == "ce":
        assert (metrics["test"]["ci"]["bootstrap"], metrics["test"]["ci"]["level"]) == (200, 0.8)
    assert "epoch   2/2" in out
    assert load_predictions(tmp_path / "run" / "predictions" / "test.npz").gamma is None  # no γ-Net, no γ
    if method == "adafocal":  # the stateful loss was updated from validation and checkpointed
        state = torch.load(tmp_path / "run/checkpoints/latest/custom_checkpoint_2.pkl", weights_only=False)
        assert "bin_gamma" in state and not torch.allclose(state["bin_gamma"], torch.ones(15))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jvp", "higher", "head"])
def test_flgamma_sece_each_backend_logs_gamma_and_ece(backend, write_config, run_cli, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    config = write_config("flgamma", {**METHODS["flgamma_sece"], **FAST_MODEL})
    run_dir = tmp_path / "run"
    code, out, err = run_cli(["--config", config, "--run-dir", run_dir, "--set", f"meta.backend={backend}"])
    assert code == 0, err
    metrics = check_run_dir(run_dir)
    assert metrics["test"]["gamma_mean"] > 0 and metrics["test"]["gamma_std"] >= 0
    gamma = load_predictions(run_dir / "predictions" / "test.npz").gamma  # saved with the selected epoch's logits
    assert gamma.shape == (120,)
    assert float(gamma.mean()) == pytest.approx(metrics["test"]["gamma_mean"], rel=1e-5)
    assert float(gamma.std(unbiased=False)) == pytest.approx(metrics["test"]["gamma_std"], rel=1e-4, abs=1e-7)

    events = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"histograms": 0, "images": 0})
    events.Reload()
    tags = events.Tags()
    assert "train/gamma_hist" in tags["histograms"]
    for tag in ("test/gamma_mean", "test/gamma_std", "val/ece", "test/ece", "train/meta_objective", "train/lr"):
        assert tag in tags["scalars"], tag
    # a reliability image every logging.reliability_every (default 5) epochs and at the last: here only epoch 2
    assert [image.step for image in events.Images("test/reliability")] == [2]
    # the histogram covers every training sample of the epoch: 320 samples, 10 batches of 32
    hist = events.Histograms("train/gamma_hist")
    assert [h.step for h in hist] == [1, 2] and hist[0].histogram_value.num == 320
    assert hist[0].histogram_value.min >= 0  # γ = |·| (Wang & Golebiowski 2024, eq. 5)
    lrs = [s.value for s in events.Scalars("train/lr")]
    assert lrs == pytest.approx([0.1, 0.01])  # MultiStepLR ×0.1 at epoch 1
    # the logged test γ mean of the selected epoch is the one in metrics.json
    logged = {s.step: s.value for s in events.Scalars("test/gamma_mean")}
    assert logged[metrics["epoch"]] == pytest.approx(metrics["test"]["gamma_mean"], rel=1e-5)
    # meta-step diagnostics: one point per iteration (2 epochs × 10), and per epoch the share of steps whose
    # hypergradient asked for a larger γ (dJ/dδ < 0), which is what the per-step values say
    offsets = [s.value for s in events.Scalars("step/dJ_dgamma_offset")]
    assert [s.step for s in events.Scalars("step/dJ_dgamma_offset")] == list(range(1, 21))
    assert [s.step for s in events.Scalars("step/meta_grad_norm")] == list(range(1, 21))
    history = json.loads((run_dir / "history.json").read_text())
    for epoch, entry in enumerate(history):
        share = sum(v < 0 for v in offsets[10 * epoch:10 * epoch + 10]) / 10
        assert entry["train"]["raise_gamma_frac"] == pytest.approx(share)
        assert entry["train"]["meta_dgamma"] == pytest.approx(sum(offsets[10 * epoch:10 * epoch + 10]) / 10, rel=1e-5)
        assert entry["train"]["gamma_max"] >= entry["train"]["gamma_mean"]


@pytest.mark.slow
def test_existing_run_dir_needs_overwrite_and_nan_stops_with_step(write_config, run_cli, tmp_path):
    config = write_config("ce", {**FAST_MODEL, "schedule": {"epochs": 1, "milestones": [1]}})
    run_dir = tmp_path / "run"
    assert run_cli(["--config", config, "--run-dir", run_dir])[0] == 0
    code, _, err = run_cli(["--config", config, "--run-dir", run_dir])
    assert code == 2 and "already exists" in err and "--overwrite" in err and len(err.strip().splitlines()) == 1
    # epoch 1 is fine; the lr milestone multiplies lr by 1e30 for epoch 2, the loss overflows and the run
    # stops naming the step, with epoch 1's checkpoint left in place
    code, _, err = run_cli(["--config", config, "--run-dir", run_dir, "--overwrite", "--set", "schedule.epochs=2",
                            "--set", "schedule.lr_decay=1e30"])
    assert code == 1, err
    assert "non-finite loss at epoch 2, step" in err and "last good checkpoint" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert json.loads((run_dir / "checkpoints/latest/train_state.json").read_text())["epoch"] == 1
    assert not (run_dir / "metrics.json").exists()



@pytest.mark.slow
def test_trajectory_horizon_logs_the_level_signal(write_config, run_cli, tmp_path):
    """meta.horizon=trajectory: the γ-Net's meta optimiser gives b the meta lr and A, W lr × shape_lr_scale
    (checkpointed param groups), dJ/dlevel is logged per meta step and the per-epoch ↑level share is what
    those values say."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    config = write_config("flgamma", {**METHODS["flgamma_sece"], **FAST_MODEL})
    run_dir = tmp_path / "run"
    code, out, err = run_cli(["--config", config, "--run-dir", run_dir, "--set", "meta.horizon=trajectory",
                              "meta.shape_lr_scale=0.1", "meta.lr=1e-3"])
    assert code == 0, err
    assert "↑level" in out
    learner = torch.load(run_dir / "checkpoints/latest/custom_checkpoint_3.pkl", weights_only=False)
    groups = learner["meta_optimizer"]["param_groups"]
    assert [g["lr"] for g in groups] == pytest.approx([1e-3, 1e-4]) and [len(g["params"]) for g in groups] == [1, 2]
    assert set(learner["trajectory"]["z"]) and set(learner["trajectory"]["v"])  # tangents are checkpointed
    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    level = [s.value for s in events.Scalars("step/dJ_dlevel")]
    assert len(level) == 20 and any(v != 0 for v in level)
    history = json.loads((run_dir / "history.json").read_text())
    for epoch, entry in enumerate(history):
        assert entry["train"]["raise_level_frac"] == pytest.approx(sum(v < 0 for v in level[10 * epoch:10 * epoch + 10]) / 10)
