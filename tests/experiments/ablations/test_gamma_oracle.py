"""gamma_oracle's pieces without training: aggregation, the validation choice, the γ trajectory, the regime
sentence, and the regime configs it trains."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from experiments.ablations import gamma_oracle as go
from experiments.ablations.cli import main
from metacal.train import load_config

CONFIGS = Path(__file__).resolve().parents[3] / "configs"


def row(variant, gamma, seed, ece_val, ece_test=0.1, temperature=1.5, last=None, peak=None):
    return {"variant": variant, "gamma": gamma, "seed": seed, "error_val": 0.3, "ece_val": ece_val,
            "error_test": 0.31, "ece_test": ece_test, "temperature": temperature, "ece_test_after_ts": 0.02,
            "seconds": 10.0, "gamma_last": last, "gamma_peak": peak}


def test_summary_is_mean_and_sample_std():
    s = go.summarize([row("a", 1.0, 0, 0.10, temperature=1.2), row("a", 1.0, 1, 0.14, temperature=1.6)])
    assert s["ece_val"] == pytest.approx(0.12) and s["ece_val_std"] == pytest.approx(0.04 / math.sqrt(2))
    assert s["temperature"] == pytest.approx(1.4) and s["seeds"] == 2 and "gamma_peak" not in s
    one = go.summarize([row("a", 1.0, 0, 0.10)])
    assert one["ece_val"] == 0.10 and math.isnan(one["ece_val_std"])  # one seed: no std
    meta = go.summarize([row("m", None, 0, 0.2, last=1.0, peak=3.0), row("m", None, 1, 0.2, last=2.0, peak=5.0)])
    assert meta["gamma_last"] == pytest.approx(1.5) and meta["gamma_peak"] == 5.0


def test_best_gamma_uses_validation_not_test_and_breaks_ties_low():
    sums = [go.summarize([row(f"g{g}", g, 0, v, ece_test=t)]) for g, v, t in
            [(0.0, 0.15, 0.01), (1.0, 0.08, 0.20), (3.0, 0.05, 0.30), (5.0, 0.05, 0.02)]]
    sums.append(go.summarize([row("meta", None, 0, 0.0, last=1.0, peak=1.0)]))  # never a candidate
    assert go.best_gamma(sums)["gamma"] == 3.0
    with pytest.raises(ValueError, match="no fixed-γ run"):
        go.best_gamma(sums[-1:])


def test_trajectory_from_history_and_mean_over_seeds():
    history = [{"epoch": 1, "train": {"loss": 1.0}},  # no γ-Net epoch is skipped
               {"epoch": 2, "train": {"gamma_mean": 1.0, "gamma_std": 0.2}}]
    assert go.gamma_trajectory(history) == [{"epoch": 2, "gamma_mean": 1.0, "gamma_std": 0.2}]
    a = [{"epoch": 1, "gamma_mean": 1.0, "gamma_std": 0.1}, {"epoch": 2, "gamma_mean": 2.0, "gamma_std": 0.3}]
    b = [{"epoch": 1, "gamma_mean": 3.0, "gamma_std": 0.3}, {"epoch": 2, "gamma_mean": 2.0, "gamma_std": 0.1}]
    t = go.mean_trajectory([a, b])
    assert [p["epoch"] for p in t] == [1, 2]
    assert (t[0]["gamma_mean"], t[0]["gamma_std"], t[0]["gamma_mean_lo"], t[0]["gamma_mean_hi"]) == \
        pytest.approx((2.0, 0.2, 1.0, 3.0))


@pytest.mark.parametrize("temperature, word", [(1.8, "OVER-confident"), (0.9, "UNDER-confident")])
def test_regime_sentence_direction(temperature, word):
    ce = go.summarize([row("ce", 0.0, 0, 0.1, ece_test=0.148, temperature=temperature)])
    text = go.regime_sentence(ce)
    assert word in text and "14.80%" in text and f"T = {temperature:.3f}" in text


def test_regime_settings_follow_the_shipped_configs():
    s = go.regime_setting("mnist1d_overconfident", 4, quick=False)
    assert (s.epochs, s.milestones, s.seed, s.config_dir) == (40, (20, 30), 4, "mnist1d_overconfident")
    assert "schedule.milestones=[20, 30]" in s.all_overrides()
    with pytest.raises(ValueError, match="unknown regime 'cifar'"):
        go.regime_setting("cifar", 0, quick=False)


@pytest.mark.parametrize("regime, options", [
    ("mnist1d_overconfident", {"num_samples": 5000}), ("fashion_mnist_overconfident", {"train_subset": 3000})])
def test_regime_configs(regime, options):
    cfg = load_config(CONFIGS / regime / "focal.yaml")
    assert cfg.data.options == options and cfg.model.name == "mlp" and cfg.model.options == {"hidden": [512, 512]}
    assert cfg.loss.name == "focal" and cfg.run.torch_threads == 1
    # the files say something (the recommended pair and the shift-tuned γ); every other method of the study
    # (the fixed-γ grid, MbLS, the trajectory level …) is configs/methods/<m>.yaml composed on base.yaml
    assert {p.stem for p in (CONFIGS / regime).glob("*.yaml")} == {"base", "ce", "auto_gamma", "auto_gamma_shift"}
    for stem in ("focal2", "focal3", "focal4", "focal5", "flgamma_sece_trajectory", "auto_dual_focal", "auto_ls",
                 "mbls"):
        cfg = load_config(CONFIGS / regime / f"{stem}.yaml")
        assert (cfg.data.options, cfg.run.method) == (options, stem)
    shift = load_config(CONFIGS / regime / "auto_gamma_shift.yaml")
    assert shift.auto.measure_on == ["meta_val", "val", "meta_val_shifted", "val_shifted"]
    assert shift.auto.sample == load_config(CONFIGS / regime / "auto_gamma.yaml").auto.sample


def test_cli_bad_regime_and_seeds_exit_2(tmp_path, capsys):
    assert main(["gamma_oracle", "--quick", "--regime", "nope", "--out", str(tmp_path)]) == 2
    assert main(["gamma_oracle", "--quick", "--seeds", "0", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "unknown regime 'nope'" in err[0] and "--seeds must be at least 1" in err[1]
