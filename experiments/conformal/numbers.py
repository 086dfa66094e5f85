"""Per-run numbers of the prediction-set pages: split-conformal sets (metacal.conformal) fitted on the run's validation
predictions and measured on its clean test split, and on the held-out families of its shift suite.

Columns: ``uncalibrated`` (the softmax) and ``ts_nll`` (temperature scaling fitted by NLL on the same validation
predictions the quantile is fitted on, as ``python -m metacal.evaluate --conformal`` and ``evaluate_run`` do).
Keys of :attr:`RunSets.clean`: ``"<column>|<score>|<alpha>"``; of :attr:`RunSets.shift`: ``"<column>|<score>"`` →
severity → the mean over the held-out families (severity 0: the clean test split). CE's runs also get
``"<column>_weighted|<score>"`` under shift: the same predictors with the weighted quantiles of Tibshirani et al.
(2019), weights from a domain classifier between the validation split and each cell (metacal.conformal.evaluation),
and ``"weights|<family>"`` → severity → the domain classifier's AUROC (shifted against validation inputs) and the
share of shifted inputs whose weighted quantile is +∞ (every label in the set: w(x) > α·Σw/(1 − α), for any score).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from metacal.conformal import ConformalPredictor, set_metrics
from metacal.conformal.evaluation import shift_weights
from metacal.data import shift_suites
from metacal.metrics.ood import auroc
from metacal.posthoc import TemperatureScaling
from metacal.predict.network import load_run
from metacal.predictions import Predictions
from metacal.run.layout import read_run

from .study import ALPHAS, COLUMNS, SCORES, SEVERITIES, SHIFT_ALPHA, Study

KEPT = ("coverage", "size_mean", "class_coverage_worst", "size_stratified_worst", "singleton", "empty")


@dataclass
class RunSets:
    stem: str
    seed: int
    ece_val: float  # the grid pick's criterion
    temperature: float
    error: float
    clean: dict[str, dict[str, float]]
    shift: dict[str, dict[int, dict[str, float]]] = field(default_factory=dict)


def key(column: str, score: str, alpha: float | None = None) -> str:
    return f"{column}|{score}" + ("" if alpha is None else f"|{alpha:g}")


def columns_of(ts: TemperatureScaling) -> Callable[[torch.Tensor], dict[str, torch.Tensor]]:
    """Logits → the probabilities of every column, through ``ts`` (fitted once per run on its validation split)."""
    return lambda logits: {"uncalibrated": torch.softmax(logits.double(), 1), "ts_nll": ts.transform(logits.double())}


def fit_ts(val: Predictions) -> TemperatureScaling:
    return TemperatureScaling(method="nll").fit(val.logits.double(), val.labels)


def clean_sets(val: Predictions, test: Predictions, ts: TemperatureScaling | None = None
               ) -> dict[str, dict[str, float]]:
    """Every column × score × α on the clean test split (``ts``: the run's TS, fitted here when not given)."""
    columns = columns_of(ts or fit_ts(val))
    cal, out = columns(val.logits), columns(test.logits)
    result = {}
    for column in COLUMNS:
        for score in SCORES:
            for alpha in ALPHAS:
                predictor = ConformalPredictor(score, alpha).fit(cal[column], val.labels)
                metrics = set_metrics(predictor.predict_set(out[column]), test.labels)
                result[key(column, score, alpha)] = {k: float(metrics[k]) for k in KEPT}
    return result


def shift_sets(run_dir: Path, suite: str, severities: tuple[int, ...] = SEVERITIES,
               alpha: float = SHIFT_ALPHA, weighted: bool = False) -> dict[str, dict[int, dict[str, float]]]:
    """Coverage and mean size of every column × score at ``alpha`` on each severity of the suite's held-out
    families (mean over them), the quantile fitted on the run's validation predictions; ``weighted`` adds the
    ``<column>_weighted`` variants (module docstring)."""
    run = load_run(run_dir, "cpu")
    shift_suites.prepare(run.bundle, suite, progress=False)
    test = read_run(run_dir).predictions("test")
    columns = columns_of(fit_ts(run.val))
    cal = columns(run.val.logits)
    predictors = {(c, s): ConformalPredictor(s, alpha).fit(cal[c], run.val.labels) for c in COLUMNS for s in SCORES}
    cells: dict[tuple[str, str, int], list[dict[str, Any]]] = {}

    domain: dict[str, dict[int, dict[str, float]]] = {}

    def add(logits: torch.Tensor, labels: torch.Tensor, severity: int, family: str = "") -> None:
        probs = columns(logits)
        weights = shift_weights(weighted, cal["uncalibrated"], probs["uncalibrated"])
        if weights is not None and family:
            w_cal, w_test = weights
            domain.setdefault(key("weights", family), {})[severity] = {
                "auroc": auroc(w_test, w_cal),
                "infinite": float((w_test > alpha * w_cal.sum() / (1 - alpha)).double().mean())}
        for (column, score), predictor in predictors.items():
            cells.setdefault((column, score, severity), []).append(
                set_metrics(predictor.predict_set(probs[column]), labels))
            if weights is not None:
                cells.setdefault((f"{column}_weighted", score, severity), []).append(
                    set_metrics(predictor.predict_set(probs[column], weights=weights), labels))

    add(test.logits, test.labels, 0)
    for family in shift_suites.held_out_families(run.bundle, suite):
        for severity in severities:
            x, y = shift_suites.shifted_split(run.bundle, suite, family, severity, "test", 0)
            add(run.logits(x), y, severity, family)
    out: dict[str, dict[int, dict[str, float]]] = dict(domain)
    for (column, score, severity), rows in cells.items():
        out.setdefault(key(column, score), {})[severity] = {
            "coverage": float(np.mean([r["coverage"] for r in rows])),
            "size_mean": float(np.mean([r["size_mean"] for r in rows]))}
    return out


def run_sets(run_dir: Path, study: Study | None) -> RunSets | None:
    """A finished run's numbers (None for one not finished); ``study`` None skips the shift part."""
    run = read_run(run_dir)
    if not (run.finished and run.seed is not None and run.has_predictions("val") and run.has_predictions("test")):
        return None
    val, test = run.predictions("val"), run.predictions("test")
    if val.logits is None or test.logits is None:
        return None
    ts = fit_ts(val)
    m = run.metrics or {}
    error = float((test.logits.argmax(1) != test.labels).double().mean())
    sets = RunSets(run.method, int(run.seed), float((m.get("val") or {}).get("ece", math.nan)), float(ts.temperature),
                   error, clean_sets(val, test, ts))
    if study is not None:
        sets.shift = shift_sets(run_dir, study.shift, weighted=run.method == "ce")
    return sets


def collect(study: Study, stems: tuple[str, ...], shift: bool = True, progress: Any = None,
            cache: Path | None = None) -> dict[str, dict[int, RunSets]]:
    """stem → seed → numbers, for every finished run of ``stems`` under the study's folder; with ``cache``, a folder
    of experiments/conformal/numbers_cache.py entries, each run's numbers are read from or written to it."""
    from .numbers_cache import cached_run_sets  # it imports this module

    score = run_sets if cache is None else lambda path, s: cached_run_sets(path, s, cache)
    out: dict[str, dict[int, RunSets]] = {}
    for stem in stems:
        for path in sorted((study.runs / stem).glob("seed*")) if (study.runs / stem).is_dir() else []:
            sets = score(path, study if shift else None)
            if sets is not None:
                out.setdefault(stem, {})[sets.seed] = sets
            if progress is not None:
                progress.update(1)
    return out


def grid_choice(runs: dict[str, dict[int, RunSets]], grid: tuple[str, ...]) -> dict[int, str]:
    """seed → the grid's run with the lowest validation ECE (seeds where every grid run exists)."""
    have = [s for s in grid if s in runs]
    if "ce" not in have or len(have) < 3:
        return {}
    seeds = set.intersection(*(set(runs[s]) for s in have))
    return {seed: min(have, key=lambda s: (runs[s][seed].ece_val, s)) for seed in sorted(seeds)}
