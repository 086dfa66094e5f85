"""Study ``ground_truth``: bias and variance of calibration-error estimators against the TRUE calibration error.

On gaussian_mixture the posterior P(y | x) is known, so each model's true top-label calibration error
TCE = E|E[c | conf] − conf| (c = posterior at the predicted class; ``true_calibration``), and its L2 version
TCE_2 = sqrt E(E[c | conf] − conf)², are computed on one huge fresh sample. Then, for evaluation sets of
n = 100 … 100 000 samples drawn FRESH from the mixture each repetition (labels sampled from the true posterior by
the generative process), every estimator (``estimators.ESTIMATORS``) is computed and compared with the truth it
estimates (TCE, or TCE_2 for the L2 estimators, ``estimators.TARGETS``): bias = mean − truth, std over
repetitions, RMSE. This tests Wang & Golebiowski 2024's claim that SECE is an unbiased estimator of the calibration error.

Models: methods trained on the mixture, plus two controls that need no training — the Bayes classifier
(the true posterior, TCE = 0) and the Bayes posterior sharpened by a temperature T = 0.5
(softmax(log posterior / T), overconfident, TCE > 0).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch
from matplotlib.figure import Figure

from metacal.data.gaussian_mixture import bayes_log_posteriors, sample
from metacal.report.labels import method_label

from .estimators import ESTIMATORS, TARGETS
from .page import Column, Section, Table, save_figure, write_page
from .runner import Variant, build_bundle, gaussian_mixture_setting, predict_logits
from .study import STUDIES, StudyOptions, train_all
from .true_calibration import true_calibration_error

Predictor = Callable[[torch.Tensor], torch.Tensor]  # inputs (n, 1, d) → probs (n, K) float64

QUICK = {"methods": ("ce",), "sizes": {100: 3, 1000: 3}, "truth_n": 200_000}
FULL = {"methods": ("ce", "flgamma_sece"),
        "sizes": {100: 100, 300: 50, 1000: 50, 3000: 20, 10_000: 8, 30_000: 4, 100_000: 2},
        "truth_n": 1_000_000}


def mixture_predictors(info: dict, temperature: float = 0.5) -> dict[str, Predictor]:
    """The two controls: Bayes posterior (TCE = 0) and Bayes posterior at temperature T (overconfident, T < 1)."""
    means, sigma, priors = info["means"], info["sigma"], info["priors"]

    def bayes(x: torch.Tensor) -> torch.Tensor:
        return bayes_log_posteriors(x, means, sigma, priors).exp()

    def sharpened(x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(bayes_log_posteriors(x, means, sigma, priors) / temperature, dim=1)

    return {"Bayes (true posterior)": bayes, f"Bayes, T = {temperature}": sharpened}


def fresh_sample(n: int, info: dict, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(inputs (n,1,d), labels, float64 posteriors) drawn from the mixture with its own generator."""
    gen = torch.Generator().manual_seed(seed)
    ds = sample(n, info["means"], info["sigma"], info["priors"], gen)
    post = bayes_log_posteriors(ds.inputs, info["means"], info["sigma"], info["priors"]).exp()
    return ds.inputs, ds.targets, post


def estimator_study(predictors: dict[str, Predictor], info: dict, sizes: dict[int, int], truth_n: int,
                    seed: int = 0) -> tuple[list[dict], list[dict]]:
    """(truth rows, estimator rows): TCE per model on ``truth_n`` fresh samples; per (model, n, estimator)
    mean, bias, std and RMSE over ``sizes[n]`` fresh evaluation sets."""
    x, _, post = fresh_sample(truth_n, info, seed=10_000_019 + seed)
    truth = {}
    truth_rows = []
    for name, f in predictors.items():
        probs = torch.cat([f(x[i:i + 100_000]) for i in range(0, truth_n, 100_000)])
        t = true_calibration_error(probs, post)
        truth[name] = {"l1": t.tce, "l2": t.tce_l2}
        truth_rows.append({"model": name, "error": 1 - t.accuracy, "mean_conf": t.mean_conf, "tce": t.tce,
                           "per_sample_bound": t.per_sample_bound, "noise_floor": t.noise_floor,
                           "tce_l2": t.tce_l2, "noise_floor_l2": t.noise_floor_l2,
                           "bins": t.num_bins, "n_truth": t.n})
    values: dict[tuple[str, int, str], list[float]] = {}
    for n, reps in sizes.items():
        for rep in range(reps):
            xs, ys, _ = fresh_sample(n, info, seed=1_000 * n + rep + 7 * seed)
            for name, f in predictors.items():
                probs = f(xs)
                for est, fn in ESTIMATORS.items():
                    values.setdefault((name, n, est), []).append(fn(probs, ys))
    rows = []
    for (name, n, est), v in values.items():
        arr = np.asarray(v)
        target = truth[name][TARGETS.get(est, "l1")]
        rows.append({"model": name, "n": n, "estimator": est, "reps": len(arr), "target": TARGETS.get(est, "l1"),
                     "tce": target, "mean": float(arr.mean()), "bias": float(arr.mean() - target),
                     "std": float(arr.std(ddof=1)) if len(arr) > 1 else float("nan"),
                     "rmse": float(np.sqrt(np.mean((arr - target) ** 2)))})
    return truth_rows, rows


def _figure(rows: list[dict], models: list[str], path) -> Figure:
    fig = Figure(figsize=(5 * len(models), 4))
    for j, model in enumerate(models):
        ax = fig.add_subplot(1, len(models), j + 1)
        for est in ESTIMATORS:
            pts = sorted((r["n"], r["bias"], r["std"]) for r in rows if r["model"] == model and r["estimator"] == est)
            n, b, s = (np.asarray(v, float) for v in zip(*pts))
            line, = ax.plot(n, b * 100, marker="o", markersize=3, label=est)
            ax.fill_between(n, (b - np.nan_to_num(s)) * 100, (b + np.nan_to_num(s)) * 100, alpha=0.15,
                            color=line.get_color(), linewidth=0)
        ax.axhline(0, color="k", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("evaluation samples n")
        ax.set_ylabel("estimate − true CE (percentage points)")
        ax.set_title(model, fontsize=9)
        ax.grid(alpha=0.3)
    fig.axes[0].legend(fontsize=7)
    return save_figure(fig, path)


@STUDIES.register("ground_truth")
def run(opts: StudyOptions):
    plan = QUICK if opts.quick else FULL
    setting = (gaussian_mixture_setting(1500, 500, 2, seed=opts.seed) if opts.quick
               else gaussian_mixture_setting(20_000, 5_000, 20, hidden=(256, 256), seed=opts.seed))
    runs = train_all(opts, setting, [Variant(m, m) for m in plan["methods"]])
    info = build_bundle(runs[0].cfg).info
    predictors: dict[str, Predictor] = {}
    for r in runs:
        predictors[method_label(r.method)] = (lambda m: lambda x: torch.softmax(predict_logits(m, x), dim=1))(r.model)
    predictors.update(mixture_predictors(info))
    truth_rows, rows = estimator_study(predictors, info, plan["sizes"], plan["truth_n"], opts.seed)
    for row in truth_rows:  # the regime: mean confidence above accuracy = over-confident
        row["gap"] = row["mean_conf"] - (1.0 - row["error"])
    models = list(predictors)
    fig = _figure(rows, models, opts.out / "ground_truth_bias_vs_n.png")
    truth_t = Table("truth", truth_rows, [
        Column("model", "Model"), Column("error", "Error (%)", 100, 2), Column("mean_conf", "mean conf (%)", 100, 2),
        Column("gap", "conf − accuracy (pp)", 100, 2), Column("tce", "TRUE CE (%)", 100, 3), Column("per_sample_bound", "E|c − conf| (%)", 100, 3),
        Column("noise_floor", "noise floor of TCE (%)", 100, 3), Column("tce_l2", "TRUE L2 CE (%)", 100, 3),
        Column("noise_floor_l2", "noise floor of L2 (%)", 100, 3), Column("bins", "bins"),
        Column("n_truth", "samples")])
    sections = [Section("True calibration error of each model", tables=[truth_t], text=[
        "TRUE CE = E|E[c | conf] − conf| with c(x) = P(y = ŷ(x) | x) from the known posterior, estimated on "
        f"{plan['truth_n']:,} fresh samples with equal-mass confidence bins (ties kept together; see "
        "experiments/ablations/true_calibration.py). E|c − conf| is the per-input gap, an upper bound that ignores "
        "the conditioning on the confidence level. Noise floor = bound on the upward bias of the binned "
        "estimate from the noise of the bin means (coarsening can only lower it). TRUE L2 CE = "
        "sqrt E(E[c | conf] − conf)² on the same bins: the target of RMSCE-15 and L2-debiased-15."])]
    long_t = Table("estimators", rows, [Column("model", "Model"), Column("n", "n"), Column("estimator", "Estimator"),
                                        Column("reps", "reps"), Column("target", "target"),
                                        Column("tce", "TRUE CE (%)", 100, 3),
                                        Column("mean", "mean estimate (%)", 100, 3),
                                        Column("bias", "bias (pp)", 100, 3), Column("std", "std (pp)", 100, 3),
                                        Column("rmse", "RMSE (pp)", 100, 3)])
    wide = []
    for model in models:
        for n in plan["sizes"]:
            row = {"model": model, "n": n}
            for r in rows:
                if r["model"] == model and r["n"] == n:
                    row[f"{r['estimator']}_bias"], row[f"{r['estimator']}_std"] = r["bias"], r["std"]
            wide.append(row)
    wide_t = Table("bias", wide, [Column("model", "Model"), Column("n", "n")] + [
        Column(f"{e}_bias", f"{e} bias ± std (pp)", 100, 2, std_key=f"{e}_std") for e in ESTIMATORS])
    sections += [
        Section("Bias ± standard deviation of each estimator (percentage points of calibration error)",
                tables=[wide_t], text=["bias = mean over repetitions of (estimate − TRUE CE); ± = standard "
                                       "deviation over repetitions, each on a fresh evaluation set of n samples. "
                                       "RMSCE-15 and L2-debiased-15 are compared with the TRUE L2 CE."]),
        Section("Figure", figures=[("Estimator bias (± std band) against the evaluation-set size", fig)]),
        Section("All numbers", tables=[long_t])]
    reps = ", ".join(f"n = {n:,}: {r}" for n, r in plan["sizes"].items())
    intro = [f"Models: methods trained on {setting.label} (configs/fashion_mnist method files), the Bayes "
             "classifier (true posterior: TRUE CE = 0) and the Bayes posterior sharpened with temperature 0.5. "
             f"Repetitions per evaluation-set size: {reps}.",
             "Regime (mean confidence − accuracy on the truth samples; > 0: over-confident): " + "; ".join(
                 f"{r['model']} {100 * r['gap']:+.2f} pp" for r in truth_rows) + ".",
             "Estimators (metacal.metrics): ECE-15 / ECE-100 (equal width), ACE-15 (equal mass), SECE (h = 0.01, "
             "hard accuracy; grid-evaluated above 2048 samples), KDE-ECE, smECE, ECE-sweep (Roelofs et al. 2022); "
             "of the L2 error: RMSCE-15 (plug-in) and L2-debiased-15 (Kumar, Liang & Ma 2019; reported as "
             "sqrt(max(·, 0)), as metacal.metrics.summary's debiased_l2_ce)."]
    return write_page(opts.out, "ground_truth", "Ablation: estimators against the true calibration error",
                      opts.command, intro, sections, opts.quick)
