"""The debiased L2 calibration error and ECE-sweep on data whose posterior is known (metacal.data's Gaussian mixture).

Two classes, one dimension: x | y ~ N(±1, 1), equal priors, so P(y = 1 | x) = σ(2x). The model is the Bayes
posterior at temperature T, p̂₁ = σ(2x/T): its prediction is the Bayes decision, its confidence conf = σ(2a/T)
with a = |x| (density f(a) = φ(a − 1) + φ(a + 1)), and the prediction is right with probability c = σ(2a)
(tests/experiments/ablations/test_true_calibration.py derives the same model). T = 1 is calibrated, T = 0.5
over-confident.

Per equal-width bin b (conf ∈ (l_b, u_b] ⇔ a ∈ (T·logit(l_b)/2, T·logit(u_b)/2]) quadrature gives P_b, the gap
G_b = E[c − conf | b], the accuracy μ_b = E[c | b] and V_b = Var(a − conf | b) with
E[(a − conf)² | x] = c(1 − conf)² + (1 − c)conf². With n_b ~ Binomial(N, P_b) and, given n_b, the bin's samples
i.i.d. (closed forms for both estimators; derivation in the comments of ``expected_values``):

    truth      L2² = Σ_b P_b G_b²
    plug-in    E[RMSCE²] = Σ_b [P_b G_b² + V_b (1 − (1 − P_b)^N) / N]
    debiased   E[Ê²]     = Σ_b [(P_b − P_b(1 − P_b)^(N−1)) G_b² + (V_b − μ_b(1 − μ_b)) P(n_b ≥ 2) / N]
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import integrate, stats

import metacal.metrics as M
from metacal.data.gaussian_mixture import bayes_log_posteriors, class_means, sample

BINS = 15


def sigmoid(t: float) -> float:
    return 1.0 / (1.0 + math.exp(-t))


def density(a: float) -> float:
    return stats.norm.pdf(a - 1) + stats.norm.pdf(a + 1)


def bin_moments(temperature: float, num_bins: int = BINS) -> list[tuple[float, float, float, float]]:
    """(P_b, G_b, μ_b, V_b) of every equal-width bin the confidence can reach (conf ∈ (½, 1))."""
    out = []
    for b in range(num_bins):
        lo, hi = b / num_bins, (b + 1) / num_bins
        if hi <= 0.5:
            continue
        a_lo = 0.0 if lo <= 0.5 else temperature * math.log(lo / (1 - lo)) / 2
        a_hi = math.inf if hi >= 1.0 else temperature * math.log(hi / (1 - hi)) / 2

        def mean(g):
            return integrate.quad(lambda a: g(a) * density(a), a_lo, a_hi)[0]

        def conf(a):
            return sigmoid(2 * a / temperature)

        p = mean(lambda a: 1.0)
        mu = mean(lambda a: sigmoid(2 * a)) / p
        gap = mu - mean(conf) / p
        second = mean(lambda a: sigmoid(2 * a) * (1 - conf(a)) ** 2 + (1 - sigmoid(2 * a)) * conf(a) ** 2) / p
        out.append((p, gap, mu, second - gap**2))
    return out


def expected_values(temperature: float, n: int) -> dict[str, float]:
    """Truth and the exact expectations of the plug-in and the debiased estimator (module docstring).

    Given n_b = k samples in bin b: E[d̄²] = G² + V/k (d = a − conf), E[ā(1 − ā)] = μ(1 − μ)(1 − 1/k), so the
    debiased bin term (k/N)[d̄² − ā(1 − ā)/(k − 1)] has mean k G²/N + (V − μ(1 − μ))/N for k ≥ 2; the plug-in term
    (k/N) d̄² has mean k G²/N + V/N for k ≥ 1. Then E[k 1(k ≥ 2)] = N P − N P (1 − P)^(N−1)."""
    truth = plug = debiased = 0.0
    for p, gap, mu, var in bin_moments(temperature):
        empty, single = (1 - p) ** n, n * p * (1 - p) ** (n - 1)
        truth += p * gap**2
        plug += p * gap**2 + var * (1 - empty) / n
        debiased += (p - single / n) * gap**2 + (var - mu * (1 - mu)) * (1 - empty - single) / n
    return {"truth": truth, "plug": plug, "debiased": debiased}


def draws(temperature: float, n: int, reps: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``reps`` fresh evaluation sets of n samples (labels drawn by the mixture's generative process)."""
    means, priors = class_means(2, 1, 2.0), torch.tensor([0.5, 0.5], dtype=torch.float64)
    ds = sample(n * reps, means, 1.0, priors, torch.Generator().manual_seed(seed))
    probs = torch.softmax(bayes_log_posteriors(ds.inputs, means, 1.0, priors) / temperature, dim=1)
    return [(probs[r * n:(r + 1) * n], ds.targets[r * n:(r + 1) * n]) for r in range(reps)]


def mean_and_se(values: list[float]) -> tuple[float, float]:
    arr = np.asarray(values)
    return float(arr.mean()), float(arr.std(ddof=1) / math.sqrt(len(arr)))


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_debiased_l2_is_unbiased_where_the_plug_in_is_not(temperature):
    n, reps = 200, 1000
    exp = expected_values(temperature, n)
    # the closed forms: debiasing removes all but a sliver of the plug-in's bias
    plug_bias, debiased_bias = exp["plug"] - exp["truth"], exp["debiased"] - exp["truth"]
    assert plug_bias > 0.005  # ≈ Σ_b V_b / N: 0.0068 (T = 1), 0.0083 (T = 0.5) in squared units
    assert abs(debiased_bias) < 0.02 * plug_bias
    if temperature == 1.0:
        assert exp["truth"] == pytest.approx(0.0, abs=1e-12)  # the Bayes posterior is calibrated
    else:
        assert math.sqrt(exp["truth"]) == pytest.approx(0.0828, abs=1e-3)  # 15-bin L2 CE of T = 0.5
    squared, plug = [], []
    sets = draws(temperature, n, reps, seed=11)
    for probs, labels in sets:
        squared.append(M.debiased_l2_ce(probs, labels, BINS, squared=True).item())
        plug.append(M.rmsce(probs, labels, BINS).item() ** 2)
    (d_mean, d_se), (p_mean, p_se) = mean_and_se(squared), mean_and_se(plug)
    # Monte Carlo agrees with each closed form (an independent check of both implementations) …
    assert abs(d_mean - exp["debiased"]) < 4 * d_se
    assert abs(p_mean - exp["plug"]) < 4 * p_se
    # … so the debiased estimate's mean is the truth, the plug-in's is tens of standard errors above it
    assert abs(d_mean - exp["truth"]) < 4 * d_se + abs(debiased_bias)
    assert p_mean - exp["truth"] > 20 * p_se
    # the reported value clips Ê² at 0 before the root, so its mean sits above the truth when Ê² is often < 0
    reported = [math.sqrt(max(v, 0.0)) for v in squared]
    assert M.debiased_l2_ce(*sets[0], BINS).item() == pytest.approx(reported[0], abs=1e-15)
    if temperature == 1.0:
        assert 0.25 < np.mean(np.asarray(squared) < 0) < 0.75 and np.mean(reported) > 0.01


def test_ece_sweep_is_less_biased_than_fixed_bins_on_a_calibrated_model():
    # Roelofs et al. 2022: on the calibrated Bayes posterior (true CE 0) the monotone sweep picks few bins at
    # small n and so sits closer to 0 than ECE-15 and ACE-15; its bin count grows with n.
    means_bins = {}
    for n in (200, 1000):
        sweep, ece, ace, bins = [], [], [], []
        for probs, labels in draws(1.0, n, 200, seed=n):
            conf, _, correct = M.top_label(probs, labels)
            value, m = M.ece_sweep_from_confidence(conf, correct)
            sweep.append(value.item())
            bins.append(m)
            ece.append(M.ece(probs, labels, BINS).item())
            ace.append(M.ace(probs, labels, BINS).item())
        for other in (ece, ace):
            diff, se = mean_and_se(list(np.asarray(other) - np.asarray(sweep)))
            assert diff > 5 * se and diff > 0.003, (n, diff, se)
        assert M.summary(probs, labels, BINS, binning_free=False)["ece_sweep"] == pytest.approx(sweep[-1], abs=1e-12)
        means_bins[n] = float(np.mean(bins))
    assert 3 < means_bins[200] < means_bins[1000] < 15
