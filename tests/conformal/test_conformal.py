"""Split conformal prediction (metacal/conformal): the scores on hand-computed rows with ties, the finite-sample
quantile, THR against a direct implementation, the coverage guarantee on exchangeable splits of real predictions,
Mondrian per-class quantiles, the set metrics by hand, and the one-line errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from metacal.conformal import (SCORES, ConformalPredictor, conformal_quantile, min_calibration, quantile_rank,
                               ranks_and_mass_above, set_metrics)
from metacal.registry import UnknownNameError

ROWS = torch.tensor([[0.5, 0.2, 0.2, 0.1],  # a tie between classes 1 and 2: the lower index ranks first
                     [0.1, 0.1, 0.1, 0.7]], dtype=torch.float64)


def test_ranks_and_mass_above_with_ties():
    rank, above = ranks_and_mass_above(ROWS)
    assert rank.tolist() == [[1, 2, 3, 4], [2, 3, 4, 1]]
    torch.testing.assert_close(above, torch.tensor([[0.0, 0.5, 0.7, 0.9], [0.7, 0.8, 0.9, 0.0]], dtype=torch.float64))


@pytest.mark.parametrize("score, kwargs, u, expected", [
    ("thr", {}, [0.3, 0.3], [[0.5, 0.8, 0.8, 0.9], [0.9, 0.9, 0.9, 0.3]]),
    ("aps", {"randomized": False}, [0.3, 0.3], [[0.5, 0.7, 0.9, 1.0], [0.8, 0.9, 1.0, 0.7]]),
    ("aps", {}, [0.5, 0.0], [[0.25, 0.6, 0.8, 0.95], [0.7, 0.8, 0.9, 0.0]]),
    # RAPS, k_reg = 1, λ = 0.1: + 0.1·(rank − 1)
    ("raps", {"randomized": False, "k_reg": 1, "lam": 0.1}, [0.3, 0.3], [[0.5, 0.8, 1.1, 1.3], [0.9, 1.1, 1.3, 0.7]]),
    ("raps", {"k_reg": 2, "lam": 0.5}, [1.0, 0.5], [[0.5, 0.7, 1.4, 2.0], [0.75, 1.35, 1.95, 0.35]]),
])
def test_scores_by_hand(score, kwargs, u, expected):
    fn = SCORES.get(score)(**kwargs)
    out = fn(ROWS, torch.tensor(u, dtype=torch.float64))
    torch.testing.assert_close(out, torch.tensor(expected, dtype=torch.float64))


@pytest.mark.parametrize("n, alpha, k", [(9, 0.1, 9), (19, 0.1, 18), (99, 0.1, 90), (19, 0.05, 19), (1000, 0.1, 901),
                                         (8, 0.1, 9), (3, 0.5, 2)])
def test_quantile_rank(n, alpha, k):
    assert quantile_rank(n, alpha) == k  # ⌈(n + 1)(1 − α)⌉, with 10 × 0.9 read as 9


def test_min_calibration_is_ceil_one_over_alpha_minus_one():
    for alpha in (0.5, 0.2, 0.1, 0.05, 0.01, 0.3, 0.07):
        assert min_calibration(alpha) == math.ceil(1 / alpha - 1e-12) - 1


def test_conformal_quantile_is_the_kth_smallest():
    scores = torch.tensor([0.9, 0.1, 0.5, 0.3, 0.7, 0.2, 0.8, 0.4, 0.6])
    assert conformal_quantile(scores, 0.1) == pytest.approx(0.9)  # k = 9 of 9
    assert conformal_quantile(scores, 0.5) == pytest.approx(0.5)  # k = ⌈10 · 0.5⌉ = 5
    with pytest.raises(ValueError, match=r"needs at least 19 calibration samples .* got 9"):
        conformal_quantile(scores, 0.05)


def dirichlet(n: int, k: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = np.random.default_rng(seed)
    probs = gen.dirichlet(np.full(k, 0.5), n)
    labels = np.array([gen.choice(k, p=p) for p in probs])
    return torch.from_numpy(probs), torch.from_numpy(labels)


def test_thr_sets_equal_a_direct_implementation():
    cal_p, cal_y = dirichlet(300, 6, 0)
    test_p, _ = dirichlet(200, 6, 1)
    pred = ConformalPredictor("thr", alpha=0.1).fit(cal_p, cal_y)
    s = np.sort(1 - cal_p.numpy()[np.arange(300), cal_y.numpy()])
    q = s[int(np.ceil(301 * 0.9)) - 1]
    assert pred.quantile == pytest.approx(q)
    assert torch.equal(pred.predict_set(test_p), torch.from_numpy(1 - test_p.numpy() <= q))


def test_aps_sets_are_prefixes_of_the_sorted_classes_by_hand():
    pred = ConformalPredictor("aps", alpha=0.5, randomized=False)
    pred.quantile = 0.75  # as if fitted
    assert pred.predict_set(ROWS).tolist() == [[True, True, False, False], [False, False, False, True]]
    pred = ConformalPredictor("raps", alpha=0.5, randomized=False, k_reg=1, lam=0.1)
    pred.quantile = 0.85
    assert pred.predict_set(ROWS).tolist() == [[True, True, False, False], [False, False, False, True]]


def test_set_metrics_by_hand():
    sets = torch.tensor([[1, 0, 0], [1, 1, 0], [0, 0, 0], [1, 1, 1], [0, 1, 0]], dtype=torch.bool)
    labels = torch.tensor([0, 2, 1, 1, 1])
    m = set_metrics(sets, labels)
    assert m["coverage"] == pytest.approx(3 / 5) and m["size_mean"] == pytest.approx(7 / 5)
    assert m["size_median"] == 1 and m["empty"] == pytest.approx(0.2) and m["singleton"] == pytest.approx(0.4)
    # per class: 0 → 1/1, 1 → 2/3, 2 → 0/1
    assert m["class_coverage_worst"] == 0 and m["class_coverage_worst_class"] == 2
    assert m["size_stratified"] == {"0": {"coverage": 0.0, "n": 1}, "1": {"coverage": 1.0, "n": 2},
                                    "2-3": {"coverage": 0.5, "n": 2}}
    assert m["size_stratified_worst"] == 0.0


CASES = [("thr", {}), ("aps", {}), ("aps", {"randomized": False}), ("raps", {"k_reg": 1, "lam": 0.02}),
         ("thr", {"mondrian": True}), ("aps", {"mondrian": True})]


@pytest.mark.parametrize("score, kwargs", CASES)
def test_coverage_guarantee_on_exchangeable_splits(score, kwargs, mnist1d_run):
    """Random splits of a run's validation and test predictions (200 repetitions): the mean coverage lies in
    [1 − α, 1 − α + 1/(n + 1)] (per class for Mondrian: n the smallest class count), within 4 Monte-Carlo
    standard errors."""
    from metacal.predictions import load_predictions

    val, test = (load_predictions(mnist1d_run / "predictions" / f"{s}.npz") for s in ("val", "test"))
    probs, labels = torch.cat([val.probs, test.probs]), torch.cat([val.labels, test.labels])
    alpha, n_cal = 0.1, len(labels) // 2
    gen = torch.Generator().manual_seed(0)
    coverages, smallest = [], n_cal
    for rep in range(200):
        perm = torch.randperm(len(labels), generator=gen)
        cal, rest = perm[:n_cal], perm[n_cal:]
        pred = ConformalPredictor(score, alpha=alpha, seed=rep, **kwargs).fit(probs[cal], labels[cal])
        coverages.append(float(pred.predict_set(probs[rest]).gather(1, labels[rest, None]).double().mean()))
        if kwargs.get("mondrian"):
            smallest = min(smallest, int(torch.bincount(labels[cal]).min()))
    mean, se = np.mean(coverages), np.std(coverages, ddof=1) / math.sqrt(len(coverages))
    assert 1 - alpha - 4 * se <= mean <= 1 - alpha + 1 / (smallest + 1) + 4 * se, (mean, se)


def test_mondrian_small_class_is_unbounded():
    probs, labels = dirichlet(60, 3, 2)
    labels[labels == 2] = 0
    labels[:5] = 2  # class 2: 5 samples, below ⌈1/0.1⌉ − 1 = 9
    pred = ConformalPredictor("thr", alpha=0.1, mondrian=True).fit(probs, labels)
    assert pred.unbounded_classes == [2] and math.isinf(pred.class_quantiles[2])
    assert pred.predict_set(probs)[:, 2].all()


@pytest.mark.parametrize("kwargs, error, message", [
    ({"alpha": 0}, ValueError, r"alpha must be a number in \(0, 1\)"),
    ({"alpha": 1.5}, ValueError, r"alpha must be a number in \(0, 1\)"),
    ({"score": "apss"}, UnknownNameError, "did you mean aps"),
    ({"score": "raps", "lam": -1}, ValueError, "raps needs k_reg >= 0"),
])
def test_bad_input_is_one_line(kwargs, error, message):
    with pytest.raises(error, match=message) as err:
        ConformalPredictor(**kwargs)
    assert "\n" not in str(err.value)


def test_unfitted_and_too_small_calibration():
    with pytest.raises(ValueError, match="not fitted"):
        ConformalPredictor().predict_set(ROWS)
    with pytest.raises(ValueError, match="needs at least 9 calibration samples"):
        ConformalPredictor(alpha=0.1).fit(ROWS, torch.tensor([0, 3]))
