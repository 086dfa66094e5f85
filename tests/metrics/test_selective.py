"""Selective prediction (metacal.metrics.selective) against hand-computed values and a brute-force oracle that
loops over every distinct threshold, and the bootstrap's batched replicates against explicit resamples."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import metacal.metrics as M
from metacal.metrics.bootstrap import resample_indices
from metacal.metrics.selective import (
    FLAT_KEYS, aurc, augrc, coverage_at_risk, flatten, risk_at_coverage, risk_coverage_curve, selective_summary,
)  # fmt: skip


def binary(conf: list[float], wrong: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """K = 2 rows [c, 1 − c] (c ≥ 0.5, so class 0 is predicted; at c = 0.5 argmax takes the first) and labels
    making row i wrong where wrong[i] = 1."""
    c = torch.tensor(conf, dtype=torch.float64)
    return torch.stack([c, 1 - c], 1), torch.tensor(wrong, dtype=torch.long)


def brute_force(probs: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
    """Every threshold t among the distinct confidences, accepting c ≥ t, with plain Python loops."""
    conf = probs.max(1).values.tolist()
    err = (probs.argmax(1) != labels).tolist()
    n = len(conf)
    points = []  # (coverage, selective risk, generalized risk), coverage increasing
    for t in sorted(set(conf), reverse=True):
        accepted = [e for c, e in zip(conf, err) if c >= t]
        points.append((len(accepted) / n, sum(accepted) / len(accepted), sum(accepted) / n))
    out = {"aurc": 0.0, "augrc": 0.0}
    prev, prev_g = 0.0, 0.0
    for cov, r, g in points:  # AURC: step rule; AUGRC: trapezoid through (0, 0)
        out["aurc"] += (cov - prev) * r
        out["augrc"] += (cov - prev) * (g + prev_g) / 2
        prev, prev_g = cov, g
    for level in (0.8, 0.9):
        out[f"risk_at_coverage@{level:g}"] = min((cov, r) for cov, r, _ in points if cov >= level)[1]
    for level in (0.01, 0.05):
        out[f"coverage_at_risk@{level:g}"] = max([cov for cov, r, _ in points if r <= level], default=0.0)
    out["points"] = points
    return out


def test_hand_computed_four_samples():
    # confidences 0.9, 0.8, 0.7, 0.6 with errors 0, 1, 0, 1: risks 0, 1/2, 1/3, 1/2; generalized 0, 1/4, 1/4, 1/2
    probs, labels = binary([0.9, 0.8, 0.7, 0.6], [0, 1, 0, 1])
    assert aurc(probs, labels) == pytest.approx((0 + 1 / 2 + 1 / 3 + 1 / 2) / 4, abs=1e-15)
    # trapezoid through (0, 0): g = 0, 1/4, 1/4, 1/2 at coverages 1/4 … 1
    assert augrc(probs, labels) == pytest.approx((0 + 1 / 8 + 1 / 4 + 3 / 8) / 4, abs=1e-15)
    assert risk_at_coverage(probs, labels, 0.5) == 0.5  # coverage 1/2 exactly achievable
    assert risk_at_coverage(probs, labels, 0.6) == pytest.approx(1 / 3)  # next achievable: 3/4
    assert risk_at_coverage(probs, labels, 0.8) == 0.5  # next achievable: 1
    assert coverage_at_risk(probs, labels, 0.34) == 0.75 and coverage_at_risk(probs, labels, 0.0) == 0.25
    assert coverage_at_risk(probs, labels, 0.5) == 1.0
    s = selective_summary(probs, labels)
    assert s == {"aurc": pytest.approx(1 / 3), "augrc": pytest.approx(0.1875),
                 "risk_at_coverage": {"0.8": 0.5, "0.9": 0.5}, "coverage_at_risk": {"0.01": 0.25, "0.05": 0.25}}
    curve = risk_coverage_curve(probs, labels)
    assert curve.coverage.tolist() == [0.25, 0.5, 0.75, 1.0] and curve.threshold.tolist() == [0.9, 0.8, 0.7, 0.6]


def test_ties_are_accepted_together_all_tied_gives_the_error_rate_and_half_of_it_for_augrc():
    # K = 2 at conf 0.5 (the smallest possible), three of five wrong: one point at coverage 1
    probs, labels = binary([0.5] * 5, [1, 0, 1, 0, 1])
    s = selective_summary(probs, labels)
    # one tie group: AURC = the error rate; AUGRC = its half, the mean over random tie breaking
    assert s["aurc"] == pytest.approx(0.6, abs=1e-15) and s["augrc"] == pytest.approx(0.3, abs=1e-15)
    orders = [torch.randperm(5, generator=torch.Generator().manual_seed(i)) for i in range(2000)]
    wrong = torch.tensor([1, 0, 1, 0, 1], dtype=torch.float64)
    by_order = [float((wrong[o].cumsum(0) / 5).mean()) for o in orders]  # AUGRC of each strict order, Σ g_i / N
    assert float(np.mean(by_order)) == pytest.approx(0.3 + 0.6 / 10, abs=0.01)  # + error/(2N): per-sample steps
    assert s["risk_at_coverage"] == {"0.8": pytest.approx(0.6), "0.9": pytest.approx(0.6)}
    assert s["coverage_at_risk"] == {"0.01": 0.0, "0.05": 0.0}  # the only point has risk 0.6
    # a tie group in the middle: 0.9 (right) | 0.7, 0.7, 0.7 (one wrong) | 0.6 (wrong)
    probs, labels = binary([0.9, 0.7, 0.7, 0.7, 0.6], [0, 0, 1, 0, 1])
    curve = risk_coverage_curve(probs, labels)
    assert curve.coverage.tolist() == [0.2, 0.8, 1.0]
    assert curve.risk.tolist() == pytest.approx([0.0, 0.25, 0.4])
    assert aurc(probs, labels) == pytest.approx(0.2 * 0 + 0.6 * 0.25 + 0.2 * 0.4, abs=1e-15)
    assert augrc(probs, labels) == pytest.approx(0.6 * (0 + 0.2) / 2 + 0.2 * (0.2 + 0.4) / 2, abs=1e-15)
    assert risk_at_coverage(probs, labels, 0.5) == pytest.approx(0.25)  # 0.5 is inside the group: next is 0.8


def test_extremes_all_correct_all_wrong_perfect_and_reversed_ranking():
    n = 10
    conf = [1.0 - 0.04 * i for i in range(n)]  # distinct, descending, the first exactly 1.0 (a one-hot row)
    probs, _ = binary(conf, [0] * n)
    assert probs[0].tolist() == [1.0, 0.0]
    right = selective_summary(probs, torch.zeros(n, dtype=torch.long))  # a single class among the labels
    assert right == {"aurc": 0.0, "augrc": 0.0, "risk_at_coverage": {"0.8": 0.0, "0.9": 0.0},
                     "coverage_at_risk": {"0.01": 1.0, "0.05": 1.0}}
    wrong = selective_summary(probs, torch.ones(n, dtype=torch.long))
    assert wrong["aurc"] == pytest.approx(1.0, abs=1e-15) and wrong["coverage_at_risk"] == {"0.01": 0.0, "0.05": 0.0}
    assert wrong["augrc"] == pytest.approx(0.5, abs=1e-15)  # g = c: the triangle
    errors = [0] * 7 + [1] * 3  # perfect ranking: the 3 errors are the least confident
    perfect = selective_summary(*binary(conf, errors))
    assert perfect["aurc"] == pytest.approx((1 / 8 + 2 / 9 + 3 / 10) / n, abs=1e-15)
    assert perfect["augrc"] == pytest.approx((0.5 + 1.5 + 2.5) / n**2, abs=1e-15)  # (g_{i-1} + g_i)/2 per step
    assert perfect["risk_at_coverage"]["0.8"] == pytest.approx(1 / 8) and perfect["coverage_at_risk"]["0.01"] == 0.7
    reversed_ = selective_summary(*binary(conf, errors[::-1]))
    assert reversed_["aurc"] == pytest.approx((3 + 3 * sum(1 / i for i in range(4, 11))) / n, abs=1e-15)
    assert reversed_["augrc"] == pytest.approx((0.5 + 1.5 + 2.5 + 3 * 7) / n**2, abs=1e-15)
    assert reversed_["aurc"] > perfect["aurc"] and reversed_["coverage_at_risk"]["0.05"] == 0.0


@pytest.mark.parametrize("seed, n, k", [(0, 50, 2), (1, 300, 3), (2, 1000, 10)])
def test_matches_brute_force_with_ties(seed, n, k):
    rng = np.random.default_rng(seed)
    rows = rng.dirichlet(np.ones(k), size=8)  # only 8 distinct rows: large tie groups
    rows = np.vstack([rows, np.eye(k)[:1]])  # and a one-hot row (confidence exactly 1)
    probs = torch.from_numpy(rows[rng.integers(0, len(rows), n)])
    labels = torch.from_numpy(rng.integers(0, k, n))
    expected = brute_force(probs, labels)
    got = flatten(selective_summary(probs, labels))
    for key in FLAT_KEYS:
        assert got[key] == pytest.approx(expected[key], abs=1e-12), key
    curve = risk_coverage_curve(probs, labels)
    assert np.allclose(curve.coverage, [p[0] for p in expected["points"]], rtol=0, atol=1e-15)
    assert np.allclose(curve.risk, [p[1] for p in expected["points"]], rtol=0, atol=1e-15)
    # AUGRC as numpy's trapezoid of the curve through (0, 0)
    c = np.r_[0.0, curve.coverage.numpy()]
    g = np.r_[0.0, curve.generalized_risk.numpy()]
    assert got["augrc"] == pytest.approx(float(np.trapezoid(g, c)), abs=1e-15)


def test_without_ties_aurc_is_the_mean_of_the_prefix_risks():
    g = torch.Generator().manual_seed(3)
    probs = torch.randn(400, 5, generator=g, dtype=torch.float64).mul(2).softmax(1)
    labels = torch.randint(0, 5, (400,), generator=g)
    order = probs.max(1).values.argsort(descending=True)
    err = (probs.argmax(1) != labels)[order].double()
    prefix = err.cumsum(0) / torch.arange(1, 401)
    assert aurc(probs, labels) == pytest.approx(float(prefix.mean()), abs=1e-14)
    # without ties AUGRC = mean prefix generalized risk − error / (2N)
    assert augrc(probs, labels) == pytest.approx(float((err.cumsum(0) / 400).mean() - err.mean() / 800), abs=1e-14)
    assert aurc(probs.numpy(), labels.numpy()) == aurc(probs, labels)  # numpy inputs


@pytest.mark.parametrize("ties", [False, True])
def test_bootstrap_replicates_equal_selective_summary_on_each_resample(ties):
    g = torch.Generator().manual_seed(11)
    probs = torch.randn(120, 4, generator=g, dtype=torch.float64).mul(3).softmax(1)
    if ties:  # a 0.1 grid of confidences
        probs = (probs * 10).round().clamp_min(0) + 1e-9
        probs = probs / probs.sum(1, keepdim=True)
    labels = torch.multinomial(probs, 1, generator=g).squeeze(1)
    spec = M.BootstrapSpec(6, 0.9, seed=2)
    replicates = M.bootstrap_replicates(probs, labels, 15, spec)
    index = torch.cat(list(resample_indices(120, 6, seed=2)))
    for b in range(6):
        expected = flatten(selective_summary(probs[index[b]], labels[index[b]]))
        for key in FLAT_KEYS:
            assert replicates[key][b].item() == pytest.approx(expected[key], abs=1e-12), (b, key)
    ci = M.bootstrap_intervals(probs, labels, 15, spec)
    assert all(0.0 <= ci[key][0] <= ci[key][1] <= 1.0 for key in FLAT_KEYS)


def test_summary_carries_the_selective_keys():
    probs, labels = binary([0.9, 0.8, 0.7, 0.6], [0, 1, 0, 1])
    s = M.summary(probs, labels, binning_free=False)
    assert list(s)[-4:] == ["aurc", "augrc", "risk_at_coverage", "coverage_at_risk"]
    assert s["coverage_at_risk"] == {"0.01": 0.25, "0.05": 0.25}
    assert set(M.SUMMARY_KEYS) == set(M.summary(probs, labels))


@pytest.mark.parametrize("call, needle", [
    (lambda p, y: risk_at_coverage(p, y, 0.0), r"coverage must lie in \(0, 1\]"),
    (lambda p, y: risk_at_coverage(p, y, 1.5), r"coverage must lie in \(0, 1\]"),
    (lambda p, y: coverage_at_risk(p, y, -0.1), r"risk must lie in \[0, 1\]"),
    (lambda p, y: coverage_at_risk(p, y, "0.1"), "risk must be a number"),
    (lambda p, y: coverage_at_risk(p, y, float("nan")), "risk must be a number"),
    (lambda p, y: aurc(p[:, :1] * 3, y), "probs"),
    (lambda p, y: augrc(p, y[:2]), "labels"),
])
def test_bad_input_is_one_line(call, needle):
    probs, labels = binary([0.9, 0.8, 0.7], [0, 1, 0])
    with pytest.raises(ValueError, match=needle) as info:
        call(probs, labels)
    assert "\n" not in str(info.value)
