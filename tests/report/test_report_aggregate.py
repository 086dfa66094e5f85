"""Aggregation over seeds: mean ± sample std against hand values, missing seeds, recomputed and post-hoc numbers."""

import json
import math

import numpy as np
import pytest
import torch

from metacal.report.aggregate import COLUMN_KEYS, aggregate, mean_std, posthoc_metrics, run_numbers
from metacal.run.layout import find_runs, read_run


def test_mean_std_by_hand():
    mean, std, n = mean_std([1.0, 2.0, 3.0, 4.0])
    assert (mean, n) == (2.5, 4)
    assert std == pytest.approx(math.sqrt(5.0 / 3.0), rel=1e-12)  # Σ(x−2.5)² = 5, / (n−1)
    mean, std, n = mean_std([0.3, float("nan"), None, 0.5])
    assert (mean, n) == (pytest.approx(0.4), 2) and std == pytest.approx(math.sqrt(0.02))
    mean, std, n = mean_std([0.7])
    assert mean == 0.7 and math.isnan(std) and n == 1  # one seed: std undefined, not 0
    assert mean_std([])[2] == 0 and math.isnan(mean_std([])[0])
    assert mean_std([1.0, 3.0], ddof=0)[1] == 1.0


def _metrics_only_root(tmp_path, run_writer):
    """Known test numbers in metrics.json (no predictions, so they are read as saved)."""
    known = {0: {"error": 0.10, "ece": 0.05}, 1: {"error": 0.12, "ece": 0.02}, 2: {"error": 0.17, "ece": 0.08}}
    times = {0: [2.0, 4.0], 1: [6.0], 2: [1.0, 2.0, 3.0]}
    for seed in (0, 1, 2):
        run_writer(tmp_path / "ce" / f"seed{seed}", seed, n=40, predictions=False,
                   test_metrics=known[seed], epoch_times=times[seed])
    # focal: seed 1 has no directory at all, seed 2 never wrote metrics.json (crashed)
    run_writer(tmp_path / "focal" / "seed0", 0, n=40, predictions=False, test_metrics={"error": 0.2})
    run_writer(tmp_path / "focal" / "seed2", 2, n=40, predictions=False, metrics=False, done=False)
    return known


def test_aggregate_matches_numpy(tmp_path, run_writer):
    known = _metrics_only_root(tmp_path, run_writer)
    rows = aggregate(find_runs(tmp_path))
    assert [r.label for r in rows] == ["CE", "Focal"]
    ce = rows[0]
    assert ce.seeds == [0, 1, 2] and ce.missing_seeds == [] and ce.num_runs == 3
    for key in ("error", "ece"):
        values = np.array([known[s][key] for s in (0, 1, 2)])
        mean, std, n = ce.stats[key]
        assert n == 3
        assert mean == pytest.approx(values.mean(), abs=1e-15)
        assert std == pytest.approx(values.std(ddof=1), abs=1e-15)
    # error: mean 0.13, deviations −0.03, −0.01, 0.04 → std = sqrt(0.0026 / 2)
    assert ce.stats["error"][0] == pytest.approx(0.13) and ce.stats["error"][1] == pytest.approx(math.sqrt(0.0013))
    # s/epoch: per-run means 3, 6, 2 → mean 11/3, std sqrt(((3−11/3)² + (6−11/3)² + (2−11/3)²) / 2)
    expected_std = math.sqrt(((3 - 11 / 3) ** 2 + (6 - 11 / 3) ** 2 + (2 - 11 / 3) ** 2) / 2)
    assert ce.stats["s_per_epoch"][:2] == pytest.approx((11 / 3, expected_std))
    # no predictions → no post-hoc numbers, reported as unavailable (n = 0) rather than invented
    assert all(ce.stats[k][2] == 0 for k in ("ece_ts_nll", "ece_ts_grid", "ece_hb"))


def test_missing_seeds_are_reported_not_dropped(tmp_path, run_writer):
    _metrics_only_root(tmp_path, run_writer)
    focal = aggregate(find_runs(tmp_path))[1]
    assert focal.seeds == [0] and focal.num_runs == 1
    assert focal.missing_seeds == [1, 2]  # 1: no directory; 2: directory without metrics.json
    assert focal.incomplete == ["seed2"]
    assert focal.stats["error"] == (0.2, focal.stats["error"][1], 1) and math.isnan(focal.stats["error"][1])
    # an explicit expected seed list overrides the union of seeds found
    focal = aggregate(find_runs(tmp_path), expected_seeds=[0, 1, 2, 3, 4])[1]
    assert focal.missing_seeds == [1, 2, 3, 4]


def test_recomputed_metrics_equal_summary(tmp_path, run_writer):
    run_dir = run_writer(tmp_path / "ce" / "seed0", 0, n=300, k=4, sharpness=2.5)
    saved = json.loads((run_dir / "metrics.json").read_text())["test"]  # metacal.metrics.summary, 15 bins
    numbers = run_numbers(read_run(run_dir), posthoc=False)
    for key in ("error", "nll", "ece", "mce", "ace", "classwise_ece"):
        assert numbers[key] == pytest.approx(saved[key], rel=1e-6, abs=1e-9), key
    assert numbers["ece"] > 0.05  # sharpness 2.5 makes it visibly miscalibrated: the check is not vacuous
    assert numbers["s_per_epoch"] == 1.0


def test_posthoc_equals_direct_api_call(tmp_path, run_writer):
    from metacal.metrics import ece
    from metacal.posthoc import HistogramBinning, TemperatureScaling

    run = read_run(run_writer(tmp_path / "ce" / "seed0", 0, n=300, k=4, sharpness=3.0))
    val, test = run.predictions("val"), run.predictions("test")
    got = posthoc_metrics(val, test)
    zv, yv, zt, yt = val.logits, val.labels, test.logits, test.labels
    for key, method in (("nll", "nll"), ("grid", "ece_grid")):
        ts = TemperatureScaling(method=method).fit(zv, yv)
        assert got[f"t_{key}"] == pytest.approx(ts.temperature, rel=1e-12)
        assert got[f"ece_ts_{key}"] == pytest.approx(float(ece(ts.transform(zt), yt, 15)), rel=1e-12)
    hb = HistogramBinning(num_bins=15).fit(torch.softmax(zv, 1), yv)
    assert got["ece_hb"] == pytest.approx(float(ece(hb.transform(torch.softmax(zt, 1)), yt, 15)), rel=1e-9)
    assert got["t_nll"] > 1.5  # overconfident logits (×3) need T > 1
    before = float(ece(torch.softmax(zt.double(), 1), yt, 15))
    assert got["ece_ts_nll"] < before  # calibration after TS is better than before on these logits


def test_probs_only_runs_have_hb_but_no_ts(tmp_path, run_writer):
    run = read_run(run_writer(tmp_path / "ce" / "seed0", 0, n=200, probs_only=True))
    numbers = run_numbers(run)
    assert math.isnan(numbers["ece_ts_nll"]) and math.isnan(numbers["ece_ts_grid"])
    assert 0.0 <= numbers["ece_hb"] < 1.0
    assert set(COLUMN_KEYS) <= set(numbers)
