"""Per-run numbers of the regime study: the test metrics of each run raw and after post-hoc calibrators fitted on its
own validation predictions (the labels it had: noisy, or the trusted clean ones), and the facts of its regime.

Metrics of one prediction (fractions): ``ece`` (15 equal-width bins, top label, clean test labels), ``error``,
``classwise_ece``, ``nll``, ``overconfidence`` (mean confidence − accuracy: > 0 over-confident); with noisy test
labels in test.npz ``ece_noisy`` and ``error_noisy`` (the same predictions scored against labels noised as the
training labels were); with true posteriors ``gap`` and ``tv`` (metacal/metrics/true_posterior.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from metacal import metrics
from metacal.posthoc import registry
from metacal.predictions import Predictions
from metacal.run.layout import Run, read_run

from .study import Study

NUM_BINS = 15


def scores(probs: torch.Tensor, test: Predictions) -> dict[str, float]:
    """The module docstring's metrics of ``probs`` on ``test``."""
    labels = test.labels
    out = {"ece": float(metrics.ece(probs, labels, NUM_BINS)), "error": float(metrics.error_rate(probs, labels)),
           "classwise_ece": float(metrics.classwise_ece(probs, labels, NUM_BINS)),
           "nll": float(metrics.nll(probs, labels)), "overconfidence": float(metrics.overconfidence(probs, labels))}
    if test.noisy_labels is not None:
        out["ece_noisy"] = float(metrics.ece(probs, test.noisy_labels, NUM_BINS))
        out["error_noisy"] = float(metrics.error_rate(probs, test.noisy_labels))
    if test.posteriors is not None:
        out["gap"] = metrics.posterior_gap(probs, test.posteriors)
        out["tv"] = metrics.posterior_tv(probs, test.posteriors)
        out["bayes_error"] = metrics.bayes_error(test.posteriors)
    return out


@dataclass
class RunNumbers:
    """One finished run: metrics per variant (``raw`` and each post-hoc calibrator by registry name) and facts."""

    stem: str
    seed: int
    variants: dict[str, dict[str, float]]
    epoch: int
    ece_val: float  # the selected epoch's validation ECE (the grid pick's criterion)
    temperature: float  # TS fitted by NLL on the run's validation predictions
    record: dict[str, Any] = field(default_factory=dict)  # metrics.json "data"
    noise_detection: dict[str, float] = field(default_factory=dict)
    fixed_gamma: float | None = None  # CE: 0, focal γ: γ; None for the rest


def run_numbers(run: Run, calibrators: tuple[str, ...]) -> RunNumbers:
    """The numbers of a finished run (predictions/val.npz and test.npz, metrics.json)."""
    val, test = run.predictions("val"), run.predictions("test")
    variants = {"raw": scores(test.probs, test)}
    temperature = math.nan
    for name in calibrators:
        try:
            registry.check_fit_size(name, len(val.labels), val.num_classes)
        except ValueError:
            continue
        fitted = registry.fit_calibrator(name, val, NUM_BINS)
        variants[name] = scores(registry.apply_calibrator(name, fitted, test), test)
        if name == "ts_nll":
            temperature = float(registry.fitted_params(fitted)["temperature"])
    m = run.metrics or {}
    spec = run.spec
    return RunNumbers(run.method, int(run.seed), variants, int(m.get("epoch", -1)),
                      float((m.get("val") or {}).get("ece", math.nan)), temperature, m.get("data") or {},
                      m.get("noise_detection") or {}, None if spec is None else spec.fixed_gamma)


#: regime → stem → seed → numbers
StudyNumbers = dict[str, dict[str, dict[int, RunNumbers]]]


def collect(study: Study, calibrators: tuple[str, ...], progress: Any = None,
            cache: Path | None = None) -> StudyNumbers:
    """Every finished run of every regime of ``study`` (missing regimes and runs are left out); with ``cache``, a
    folder of experiments/regimes/numbers_cache.py entries, each run's numbers are read from or written to it."""
    from .numbers_cache import cached_run_numbers  # it imports this module

    score = run_numbers if cache is None else lambda r, c: cached_run_numbers(r, c, cache)
    out: StudyNumbers = {}
    for regime in study.regimes:
        folder = study.out(regime)
        stems: dict[str, dict[int, RunNumbers]] = {}
        for path in sorted(folder.glob("*/seed*")) if folder.is_dir() else []:
            run = read_run(path)
            if run.finished and run.seed is not None and run.has_predictions("val") and run.has_predictions("test"):
                stems.setdefault(run.method, {})[run.seed] = score(run, calibrators)
            if progress is not None:
                progress.update(1)
        if stems:
            out[regime.name] = stems
    return out


def count_runs(study: Study) -> int:
    return sum(len(list(study.out(r).glob("*/seed*"))) for r in study.regimes if study.out(r).is_dir())


def sweep_folders(study: Study) -> list[Path]:
    return [study.out(r) for r in study.regimes if study.out(r).is_dir()]
