"""Coverage of the bootstrap intervals on data with a known posterior: the simulation of the ci_coverage study
(experiments.ablations.ci_coverage, which states the set-up), 200 fresh evaluation sets of N = 1,000,
B = 200, 90% intervals, for three models: the Bayes posterior (calibrated, every true calibration error 0), and
the Bayes posterior at temperature 0.9 (slightly over-confident) and 0.5 (clearly over-confident).

What holds, with these seeds (docs/ablations/ci_coverage.md has the numbers and N = 10,000):

* clearly miscalibrated: both rules cover error, ECE and the debiased L2 CE near the nominal rate; the plug-in
  RMSCE's percentile interval covers less (its bias is counted twice: in the estimate and in the resamples);
* nearly calibrated (T = 0.9): the percentile interval of ECE almost never holds the truth (5%), the basic one
  mostly does (80.5%, a little under the nominal 90%);
* calibrated (true calibration error 0, the acceptance case): the basic interval of the debiased L2 CE holds 0 at
  least at the nominal rate (conservatively: at the boundary the resamples vary more than the estimate,
  docs/conventions.md#intervals), while no percentile interval of ECE can (every resample's ECE is > 0).
"""

from __future__ import annotations

import functools


from experiments.ablations.ci_coverage import coverage, population_values

REPS, N, B = 200, 1000, 200


@functools.cache
def rates(temperature: float) -> dict:
    truth = population_values(temperature, 400_000)
    return truth, coverage(temperature, N, REPS, B, truth)


def test_clearly_over_confident_model_both_rules_cover():
    truth, rate = rates(0.5)
    assert 0.28 < truth["error"] < 0.30 and 0.14 < truth["ece"] < 0.16 and 0.15 < truth["rmsce"] < 0.17
    for metric in ("error", "ece", "debiased_l2_ce"):
        for method in ("basic", "percentile"):
            assert 0.80 <= rate[metric, method]["coverage"] <= 0.97, (metric, method, rate[metric, method])
    assert rate["rmsce", "percentile"]["coverage"] < rate["debiased_l2_ce", "percentile"]["coverage"] - 0.05


def test_nearly_calibrated_model_needs_the_basic_interval():
    truth, rate = rates(0.9)
    assert 0.02 < truth["ece"] < 0.04
    assert 0.75 <= rate["ece", "basic"]["coverage"] <= 0.97, rate["ece", "basic"]  # measured 80.5%: a little low
    assert rate["ece", "percentile"]["coverage"] < 0.2, rate["ece", "percentile"]
    assert rate["debiased_l2_ce", "basic"]["coverage"] >= 0.85


def test_calibrated_model_interval_covers_zero():
    truth, rate = rates(1.0)
    assert truth["ece"] < 1e-12 and truth["debiased_l2_ce"] < 1e-12
    assert rate["debiased_l2_ce", "basic"]["coverage"] >= 0.9, rate["debiased_l2_ce", "basic"]
    assert rate["ece", "percentile"]["coverage"] == 0.0  # every resample's ECE > 0 = the truth
    assert rate["ece", "basic"]["coverage"] < 0.6  # reflecting the bias does not reach 0 often enough
    assert 0.80 <= rate["error", "basic"]["coverage"] <= 0.97


if __name__ == "__main__":  # the numbers, without pytest
    for t in (0.5, 0.9, 1.0):
        print(t, {f"{m}/{r}": round(v["coverage"], 3) for (m, r), v in rates(t)[1].items()})
