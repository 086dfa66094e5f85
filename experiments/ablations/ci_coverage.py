"""Study ``ci_coverage``: how often metacal's bootstrap intervals cover the TRUE value of a metric.

Data with a known posterior (metacal.data's Gaussian mixture: K = 10, d = 10, separation 3, σ = 1, Bayes error
≈ 0.29) and three models that need no training: the Bayes posterior itself (calibrated: every true calibration
error is 0), and the Bayes posterior at temperature T (softmax(log posterior / T)): T = 0.9, slightly
over-confident, and T = 0.5, clearly over-confident. Each metric's true value is its population value,
computed without labels from the known probability c that the prediction is right, on ``truth_n`` fresh
samples: error = 1 − E[c]; 15-bin equal-width ECE = Σ_b P(b)|E[c − conf | b]|; L2 = sqrt(Σ_b P(b) E[c − conf | b]²),
the quantity RMSCE and the debiased L2 CE estimate. Then, for ``reps`` fresh evaluation sets of N samples, the
90% interval of each metric from B resamples (metacal.metrics.bootstrap, both rules: ``basic`` and
``percentile``), and the share of sets whose interval holds the true value.

A share from R sets has a binomial standard error sqrt(0.9 · 0.1 / R) around a true 90% (2.1 points at
R = 200); the page prints the ± 2-standard-error band.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import torch
from matplotlib.figure import Figure
from tqdm import tqdm

from metacal.data.gaussian_mixture import bayes_log_posteriors, class_means, sample
from metacal.metrics.binning import width_bin_index
from metacal.metrics.bootstrap import METHODS, BootstrapSpec, weighted_replicates, intervals_from_replicates
from metacal.metrics.weighted import WeightedSample

from .page import Column, Section, Table, save_figure, write_page
from .study import STUDIES, StudyOptions

K, SEPARATION, SIGMA, BINS, LEVEL = 10, 3.0, 1.0, 15, 0.9
MEANS = class_means(K, K, SEPARATION)
PRIORS = torch.full((K,), 1.0 / K, dtype=torch.float64)
MODELS = {"calibrated (Bayes posterior)": 1.0, "near-calibrated (T = 0.9)": 0.9, "over-confident (T = 0.5)": 0.5}
METRICS = ("error", "ece", "rmsce", "debiased_l2_ce")
QUICK = {"sizes": {300: 8}, "bootstrap": 40, "truth_n": 40_000}
FULL = {"sizes": {1000: 200, 10_000: 50}, "bootstrap": 200, "truth_n": 400_000}


def model(inputs: torch.Tensor, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(probabilities of the Bayes posterior at ``temperature``, the true posterior), float64."""
    log_post = bayes_log_posteriors(inputs, MEANS, SIGMA, PRIORS)
    return torch.softmax(log_post / temperature, dim=1), log_post.exp()


def population_values(temperature: float, n: int, seed: int = 99) -> dict[str, float]:
    """True error, 15-bin ECE and L2 CE (the RMSCE and debiased L2 CE target) of the model, from n samples."""
    probs, post = model(sample(n, MEANS, SIGMA, PRIORS, torch.Generator().manual_seed(seed)).inputs, temperature)
    conf, pred = probs.max(dim=1)
    c = post.gather(1, pred.unsqueeze(1)).squeeze(1)
    index = width_bin_index(conf, BINS)
    gap = torch.zeros(BINS, dtype=torch.float64).index_add_(0, index, c - conf)  # Σ_{i∈b} (c − conf)
    count = torch.zeros(BINS, dtype=torch.float64).index_add_(0, index, torch.ones_like(c))
    l2 = float(((gap ** 2 / count.clamp_min(1)).sum() / n).sqrt())
    return {"error": float(1 - c.mean()), "ece": float(gap.abs().sum() / n), "rmsce": l2, "debiased_l2_ce": l2}


def coverage(temperature: float, n: int, reps: int, bootstrap: int, truth: dict[str, float], seed: int = 1,
             level: float = LEVEL, progress: str | None = None) -> dict[tuple[str, str], dict[str, float]]:
    """{(metric, method): {"coverage", "width", "estimate"}} over ``reps`` fresh evaluation sets of n samples:
    the share of sets whose interval holds ``truth[metric]``, the mean interval width and the mean estimate."""
    gen = torch.Generator().manual_seed(seed)
    hits = {(m, r): [] for m in METRICS for r in METHODS}
    widths = {(m, r): [] for m in METRICS for r in METHODS}
    estimates: dict[str, list[float]] = {m: [] for m in METRICS}
    for rep in tqdm(range(reps), desc=progress, disable=progress is None or not sys.stderr.isatty()):
        data = sample(n, MEANS, SIGMA, PRIORS, gen)
        probs, _ = model(data.inputs, temperature)
        weighted = WeightedSample(probs, data.targets, BINS)
        own = weighted.own_metrics()
        replicates = weighted_replicates(weighted, BootstrapSpec(bootstrap, level, seed=rep))
        for metric in METRICS:
            estimates[metric].append(float(own[metric]))
        for method in METHODS:
            for metric, (lo, hi) in intervals_from_replicates(replicates, own, level, method).items():
                if metric in METRICS:
                    hits[metric, method].append(lo <= truth[metric] <= hi)
                    widths[metric, method].append(hi - lo)
    return {key: {"coverage": float(np.mean(hits[key])), "width": float(np.mean(widths[key])),
                  "estimate": float(np.mean(estimates[key[0]]))} for key in hits}


def _figure(rows: list[dict], sizes: list[int], path) -> Figure:
    fig = Figure(figsize=(5.2 * len(sizes), 3.8))
    labels = [f"{m}\n{metric}" for m in MODELS for metric in METRICS]
    x = np.arange(len(labels))
    for j, n in enumerate(sizes):
        ax = fig.add_subplot(1, len(sizes), j + 1)
        for shift, method in ((-0.2, "percentile"), (0.2, "basic")):
            values = [next(r[f"coverage_{method}"] for r in rows if r["model"] == m and r["metric"] == metric
                           and r["n"] == n) for m in MODELS for metric in METRICS]
            ax.bar(x + shift, np.asarray(values) * 100, width=0.4, label=method)
        ax.axhline(100 * LEVEL, color="k", linewidth=0.8, linestyle="--", label="nominal 90%")
        ax.set_xticks(x, [lab.split(" (")[0] + "\n" + lab.split("\n")[1] for lab in labels], rotation=90, fontsize=6)
        ax.set_ylabel("coverage of the true value (%)")
        ax.set_ylim(0, 105)
        ax.set_title(f"N = {n:,}", fontsize=9)
    handles, names = fig.axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="upper center", ncol=3, fontsize=8, frameon=False)
    fig.subplots_adjust(top=0.84)
    return save_figure(fig, path)


def _reading(rows: list[dict]) -> list[str]:
    """One generated sentence per model: the coverages the conclusions rest on, at every N."""
    def cov(name: str, metric: str, method: str) -> str:
        return " / ".join(f"{100 * r[f'coverage_{method}']:.1f}%" for r in rows
                          if r["model"] == name and r["metric"] == metric)

    sizes = " / ".join(f"N = {n:,}" for n in dict.fromkeys(r["n"] for r in rows))
    cal, near, over = MODELS
    return [
        f"Coverages below are given as {sizes}.",
        f"**{cal}** (every true calibration error is 0): the percentile interval of ECE covers in "
        f"{cov(cal, 'ece', 'percentile')} of the sets (every resample's ECE is above 0), the basic one in "
        f"{cov(cal, 'ece', 'basic')}; the basic interval of the debiased L2 CE covers 0 in "
        f"{cov(cal, 'debiased_l2_ce', 'basic')}, at or above the nominal 90% (conservative at the boundary, "
        "docs/conventions.md#intervals). This is the interval to read when asking whether a model is calibrated.",
        f"**{near}**: ECE percentile {cov(near, 'ece', 'percentile')} against basic {cov(near, 'ece', 'basic')}; "
        f"debiased L2 CE basic {cov(near, 'debiased_l2_ce', 'basic')}. The percentile interval inherits the "
        "binned estimator's upward bias twice; where that bias is comparable to the spread it misses the truth.",
        f"**{over}**: ECE percentile {cov(over, 'ece', 'percentile')}, basic {cov(over, 'ece', 'basic')}; error "
        f"percentile {cov(over, 'error', 'percentile')}, basic {cov(over, 'error', 'basic')}: where the bias is "
        "small against the spread both rules are close to nominal."]


@STUDIES.register("ci_coverage")
def run(opts: StudyOptions):
    plan = QUICK if opts.quick else FULL
    rows = []
    truths = {name: population_values(t, plan["truth_n"]) for name, t in MODELS.items()}
    for n, reps in plan["sizes"].items():
        for name, temperature in MODELS.items():
            result = coverage(temperature, n, reps, plan["bootstrap"], truths[name], seed=opts.seed + 1,
                              progress=f"{name}, N = {n}")
            for metric in METRICS:
                row = {"model": name, "n": n, "reps": reps, "metric": metric, "truth": truths[name][metric],
                       "estimate": result[metric, "basic"]["estimate"],
                       "band": f"90 ± {200 * math.sqrt(0.09 / reps):.1f}"}
                for method in METHODS:
                    row[f"coverage_{method}"] = result[metric, method]["coverage"]
                    row[f"width_{method}"] = result[metric, method]["width"]
                rows.append(row)
    fig = _figure(rows, list(plan["sizes"]), opts.out / "ci_coverage.png")
    table = Table("coverage", rows, [
        Column("model", "Model"), Column("n", "N"), Column("reps", "sets"), Column("metric", "metric"),
        Column("truth", "true value (%)", 100, 2), Column("estimate", "mean estimate (%)", 100, 2),
        Column("coverage_percentile", "percentile: coverage (%)", 100, 1),
        Column("coverage_basic", "basic: coverage (%)", 100, 1), Column("band", "nominal ± 2 s.e. (%)"),
        Column("width_percentile", "percentile: width (pp)", 100, 2),
        Column("width_basic", "basic: width (pp)", 100, 2)])
    intro = [
        "How often a 90% bootstrap interval of metacal.metrics holds the TRUE value of the metric, on data with a "
        f"known posterior (Gaussian mixture, K = {K}, d = {K}, separation {SEPARATION:g}, σ = {SIGMA:g}). Models: "
        "the Bayes posterior (calibrated: true ECE 0) and the Bayes posterior at temperature 0.9 (slightly "
        "over-confident) and 0.5 (clearly over-confident). True values from "
        f"{plan['truth_n']:,} fresh samples; B = {plan['bootstrap']} resamples per interval; "
        + ", ".join(f"{reps} fresh evaluation sets of N = {n:,}" for n, reps in plan["sizes"].items()) + ".",
        "Rules (metacal/metrics/bootstrap.py): percentile = [q_5%, q_95%] of the resampled values; basic = "
        "[θ̂ − (q_95% − θ(F̂)), θ̂ − (q_5% − θ(F̂))], θ(F̂) the metric's value on the evaluation set as a population "
        "(θ̂ itself for plug-in metrics; for the debiased L2 CE the pivot is Ê² and θ(F̂) the plug-in RMSCE²). "
        "`basic` is metacal's default (`evaluate --ci-method`, `eval.ci_method`)."]
    sections = [Section("Coverage of the 90% intervals", tables=[table], figures=[
        ("Coverage by model and metric, both rules (dashed: nominal 90%)", fig)]),
        Section("Reading", text=_reading(rows))]
    return write_page(opts.out, "ci_coverage", "Ablation: do the bootstrap intervals cover the true value?",
                      opts.command, intro, sections, opts.quick)
