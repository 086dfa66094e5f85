"""Percentile bootstrap intervals: the batched replicates against a loop of summary() calls on the same
resamples, the percentile rule against numpy, determinism under the seed, the ``ci`` object, bad settings."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import metacal.metrics as M
from metacal.metrics.bootstrap import SKIPPED_KEYS, percentile_interval, resample_indices
from metacal.metrics.selective import FLAT_KEYS, NESTED_KEYS, flatten
from metacal.metrics.weighted import WEIGHTED_KEYS, WeightedSample


def make(n: int, k: int, seed: int, ties: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, k, generator=g, dtype=torch.float64) * 2
    labels = torch.multinomial(z.softmax(1), 1, generator=g).squeeze(1)
    probs = (1.4 * z).softmax(1)
    if ties:  # confidences on a 0.1 grid: large tie groups (and the resamples add duplicates on top)
        probs = (probs * 10).round() / 10
        probs[:, 0] += 1 - probs.sum(1)
        probs = probs.clamp_min(0)
        probs = probs / probs.sum(1, keepdim=True)
    return probs, labels


def test_metric_sets_are_summary_minus_the_binning_free_ones():
    assert SKIPPED_KEYS == M.BINNING_FREE_KEYS
    assert WEIGHTED_KEYS == tuple(k for k in M.SUMMARY_KEYS if k not in ("n", "num_classes", *SKIPPED_KEYS,
                                                                      *NESTED_KEYS)) + FLAT_KEYS[2:]
    assert FLAT_KEYS == ("aurc", "augrc", "risk_at_coverage@0.8", "risk_at_coverage@0.9", "coverage_at_risk@0.01",
                         "coverage_at_risk@0.05")


@pytest.mark.parametrize("n, k, bins, ties, bootstrap", [
    (60, 3, 5, False, 1), (200, 4, 15, True, 7), (7, 2, 15, False, 40), (400, 10, 15, False, 25)])
def test_batched_replicates_equal_a_loop_of_summary_calls(n, k, bins, ties, bootstrap):
    # the naive oracle: summary() of probs[idx_b], labels[idx_b] for every row b of the SAME (B, N) indices;
    # n = 7 with 15 bins has empty equal-width and equal-mass bins, ties=True has large tie groups
    probs, labels = make(n, k, seed=n + bootstrap, ties=ties)
    spec = M.BootstrapSpec(bootstrap, 0.9, seed=5)
    replicates = M.bootstrap_replicates(probs, labels, bins, spec)
    index = torch.cat(list(resample_indices(n, bootstrap, seed=5)))
    assert index.shape == (bootstrap, n)
    for b in range(bootstrap):
        expected = M.summary(probs[index[b]], labels[index[b]], bins, binning_free=False)
        expected.update(flatten(expected))  # the selective numbers under their flat keys
        for key in WEIGHTED_KEYS:
            assert replicates[key][b].item() == pytest.approx(expected[key], abs=1e-12), (b, key)
    # all-ones weights reproduce the metrics of the data itself
    sample = WeightedSample(probs, labels, bins)
    own = sample.metrics(torch.ones(1, n, dtype=torch.float64))
    plain = M.summary(probs, labels, bins, binning_free=False)
    plain.update(flatten(plain))
    assert all(own[key].item() == pytest.approx(plain[key], abs=1e-12) for key in WEIGHTED_KEYS)


def test_ece_sweep_replicates_where_every_binning_is_monotone():
    # all correct: every resample's sweep goes to N bins (the shortcut in both implementations)
    probs = torch.tensor([[0.9, 0.1], [0.7, 0.3], [0.6, 0.4], [0.8, 0.2], [0.55, 0.45]], dtype=torch.float64)
    labels = torch.zeros(5, dtype=torch.long)
    replicates = M.bootstrap_replicates(probs, labels, 15, M.BootstrapSpec(30, 0.9, 0))["ece_sweep"]
    index = torch.cat(list(resample_indices(5, 30, 0)))
    expected = [(1 - probs[i, 0]).mean().item() for i in index]  # N bins of one sample each: mean(1 − c)
    assert replicates.tolist() == pytest.approx(expected, abs=1e-12)


def test_resample_blocks_do_not_change_the_draw_and_the_seed_decides_it():
    full = torch.cat(list(resample_indices(50, 23, seed=3)))
    assert torch.equal(torch.cat(list(resample_indices(50, 23, seed=3, rows=4))), full)
    assert [b.shape[0] for b in resample_indices(50, 23, seed=3, rows=4)] == [4, 4, 4, 4, 4, 3]
    assert not torch.equal(torch.cat(list(resample_indices(50, 23, seed=4))), full)
    assert int(full.min()) >= 0 and int(full.max()) < 50
    # each index equally likely: counts over 23·50 draws ≈ 23 each (chi-square, 49 dof: 99.9% quantile 85.4)
    counts = torch.bincount(full.reshape(-1), minlength=50).double()
    assert float(((counts - 23) ** 2 / 23).sum()) < 85.4


def test_percentile_interval_is_numpys_linear_percentile():
    rng = np.random.default_rng(0)
    values = rng.gamma(2.0, size=(501, 3))
    for level in (0.5, 0.9, 0.95):
        lo, hi = percentile_interval(torch.from_numpy(values), level)
        alpha = 100 * (1 - level)
        np.testing.assert_allclose(lo.numpy(), np.percentile(values, alpha / 2, axis=0), rtol=1e-13)
        np.testing.assert_allclose(hi.numpy(), np.percentile(values, 100 - alpha / 2, axis=0), rtol=1e-13)
    values[::7, 1] = np.nan  # NaN replicates (a bin empty in that resample) are left out
    lo, hi = percentile_interval(torch.from_numpy(values), 0.9)
    assert lo[1].item() == pytest.approx(np.nanpercentile(values[:, 1], 5), rel=1e-13)
    assert hi[1].item() == pytest.approx(np.nanpercentile(values[:, 1], 95), rel=1e-13)


def test_ci_object_shape_determinism_and_summary_companion():
    probs, labels = make(300, 5, seed=1)
    spec = M.BootstrapSpec(200, 0.8, seed=7)
    ci = M.bootstrap_intervals(probs, labels, 10, spec)
    assert list(ci) == ["method", "level", "bootstrap", "seed", *WEIGHTED_KEYS, "skipped"]
    assert ci["method"] == "basic" and ci["level"] == 0.8 and ci["bootstrap"] == 200 and ci["seed"] == 7
    assert ci["skipped"] == ["sece", "kde_ece", "smece"]
    replicates = M.bootstrap_replicates(probs, labels, 10, spec)
    plain = M.summary(probs, labels, 10, binning_free=False)
    plain.update(flatten(plain))
    pct = M.bootstrap_intervals(probs, labels, 10, M.BootstrapSpec(200, 0.8, seed=7, method="percentile"))
    assert pct["method"] == "percentile"
    for key in WEIGHTED_KEYS:
        q10, q90 = np.percentile(replicates[key].numpy(), [10, 90])
        assert pct[key] == pytest.approx([q10, q90], abs=1e-15), key
        # basic: [θ̂ − (q90 − θ̂), θ̂ − (q10 − θ̂)] clipped to [0, 1]; the debiased L2 CE's pivot is its square
        if key == "debiased_l2_ce":
            s10, s90 = np.percentile(replicates["debiased_l2_ce_squared"].numpy(), [10, 90])
            own = M.debiased_l2_ce(probs, labels, 10, squared=True).item()
            world = plain["rmsce"] ** 2
            expected = [math.sqrt(max(own - (s90 - world), 0.0)), math.sqrt(max(own - (s10 - world), 0.0))]
        else:
            top = math.inf if key == "nll" else 2.0 if key == "brier" else 1.0
            expected = [min(max(2 * plain[key] - q90, 0.0), top), min(max(2 * plain[key] - q10, 0.0), top)]
        assert ci[key] == pytest.approx(expected, abs=1e-12), key
        assert isinstance(ci[key][0], float) and ci[key][0] <= ci[key][1]
    # the interval of a mean (the error) has the binomial width: 2·1.2816·sqrt(e(1 − e)/N), within 15 %
    e = M.summary(probs, labels, binning_free=False)["error"]
    width = ci["error"][1] - ci["error"][0]
    assert width == pytest.approx(2 * 1.2816 * math.sqrt(e * (1 - e) / 300), rel=0.15)
    assert M.bootstrap_intervals(probs, labels, 10, spec) == ci  # same seed, same numbers
    other = M.bootstrap_intervals(probs, labels, 10, M.BootstrapSpec(200, 0.8, seed=8))
    assert other["ece"] != ci["ece"]
    # summary(..., ci=...) adds exactly this object; binning_free=False skips nothing
    s = M.summary(probs, labels, 10, ci=spec)
    assert s["ci"] == ci and tuple(k for k in s if k != "ci") == M.SUMMARY_KEYS
    cheap = M.summary(probs, labels, 10, binning_free=False, ci=spec)
    assert cheap["ci"]["skipped"] == [] and cheap["ci"]["ece"] == ci["ece"]
    assert M.summary(probs, labels, 10, ci=True)["ci"]["bootstrap"] == 1000  # defaults: B 1000, level 0.9, seed 0
    with pytest.raises(ValueError, match="BootstrapSpec"):
        M.summary(probs, labels, 10, ci=0.9)


@pytest.mark.parametrize("kwargs, needle", [
    ({"bootstrap": 0}, "integer >= 1"), ({"bootstrap": -5}, "integer >= 1"), ({"bootstrap": 2.5}, "integer >= 1"),
    ({"bootstrap": True}, "integer >= 1"), ({"level": 0.0}, "strictly between 0 and 1"),
    ({"level": 1.0}, "strictly between 0 and 1"), ({"level": 1.5}, "strictly between 0 and 1"),
    ({"level": -0.1}, "strictly between 0 and 1"), ({"level": float("nan")}, "strictly between 0 and 1"),
    ({"level": "0.9"}, "strictly between 0 and 1"), ({"seed": 1.5}, "seed must be an integer"),
    ({"method": "bca"}, "one of basic, percentile")])
def test_bad_settings_are_one_line_value_errors(kwargs, needle):
    with pytest.raises(ValueError, match=needle) as err:
        M.BootstrapSpec(**kwargs)
    assert "\n" not in str(err.value)
