"""Per-run numbers and their mean ± std over seeds (Wang & Golebiowski 2024, Table 1 layout; Wang, Feng & Zhang
2021, §2 "calibratable").

Per run (fractions, as in code and JSON):
- Error, NLL, ECE, MCE, ACE, classwise ECE of the test set, recomputed with metacal.metrics from
  predictions/test.npz at ``num_bins`` (falls back to metrics.json["test"] when predictions are absent).
- ECE after post-hoc calibration fitted on predictions/val.npz and applied to predictions/test.npz, one column
  per selected calibrator of metacal.posthoc.registry (metacal/report/posthoc_columns.py; Wang, Feng & Zhang
  2021, §2); NaN, with a note in ``MethodRow.notes``, where a calibrator refuses a too small validation set.
- Wall-clock seconds per epoch: mean of history.json ``time_s``.
Across seeds: mean and sample standard deviation (ddof=1; undefined for one seed) of each column, ignoring
runs where that number is unavailable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from tqdm.auto import tqdm

from metacal.run.method import Method
from metacal.predictions import Predictions
from metacal.report.labels import method_label, method_order
from metacal.report.posthoc_columns import DEFAULT, POSTHOC_KEYS, check_calibrators, column_key
from metacal.report.posthoc_columns import posthoc_metrics as posthoc_metrics  # re-exported: callers import it here
from metacal.run.layout import Run

TEST_KEYS = ("error", "nll", "ece", "mce", "ace", "classwise_ece")
ALL_COLUMN_KEYS = TEST_KEYS + POSTHOC_KEYS + ("s_per_epoch",)  # every column a row can hold
COLUMN_KEYS = TEST_KEYS + tuple(column_key(n) for n in DEFAULT) + ("s_per_epoch",)  # the default table
# aggregated like the columns but not in the main table (the claim section reads them)
EXTRA_KEYS = ("overconfidence", "t_nll", "ece_val")


def mean_std(values: Sequence[float], ddof: int = 1) -> tuple[float, float, int]:
    """(mean, std, n) of the finite values; std with ``ddof`` (NaN when n <= ddof), mean NaN when n = 0."""
    arr = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=np.float64)
    n = int(arr.size)
    if n == 0:
        return math.nan, math.nan, 0
    std = float(arr.std(ddof=ddof)) if n > ddof else math.nan
    return float(arr.mean()), std, n


def split_metrics(pred: Predictions, num_bins: int = 15) -> dict[str, float]:
    """The six Table-1 metrics of one split (fractions), with the same functions metacal.metrics.summary uses,
    and the over-confidence mean(conf) − accuracy."""
    from metacal import metrics

    probs, labels = pred.probs, pred.labels
    return {
        "error": float(metrics.error_rate(probs, labels)),
        "nll": float(metrics.nll(probs, labels)),
        "ece": float(metrics.ece(probs, labels, num_bins)),
        "mce": float(metrics.mce(probs, labels, num_bins)),
        "ace": float(metrics.ace(probs, labels, num_bins)),
        "classwise_ece": float(metrics.classwise_ece(probs, labels, num_bins)),
        "overconfidence": float(metrics.overconfidence(probs, labels)),  # > 0 over-, < 0 under-confident
    }


def column_keys(calibrators: Sequence[str] | None = None) -> tuple[str, ...]:
    """The table's columns when the post-hoc columns are those of ``calibrators`` (default: all)."""
    return TEST_KEYS + tuple(column_key(n) for n in check_calibrators(calibrators)) + ("s_per_epoch",)


def run_numbers(run: Run, num_bins: int = 15, hb_bins: int = 15, posthoc: bool = True,
                calibrators: Sequence[str] | None = None, notes: list[str] | None = None) -> dict[str, float]:
    """All table columns of one complete run (fractions; NaN where unavailable), ``from_predictions`` (1/0) and,
    with ``posthoc``, the ECE after each of ``calibrators`` (default all) and the fitted temperatures
    ``t_nll``/``t_grid``; why a calibrator gave NaN is appended to ``notes``."""
    row = {k: math.nan for k in ALL_COLUMN_KEYS + EXTRA_KEYS}
    if run.has_predictions("test"):
        test = run.predictions("test")
        row.update(split_metrics(test, num_bins))
        row["from_predictions"] = 1.0
        if posthoc and run.has_predictions("val"):
            row.update(posthoc_metrics(run.validation_for_posthoc(), test, num_bins, hb_bins, calibrators, notes))
    else:
        saved = (run.metrics or {}).get("test", {})
        row.update({k: float(saved[k]) for k in TEST_KEYS if isinstance(saved.get(k), (int, float))})
        row["from_predictions"] = 0.0
    val_ece = ((run.metrics or {}).get("val") or {}).get("ece")
    if isinstance(val_ece, (int, float)):
        row["ece_val"] = float(val_ece)  # the selected epoch's validation ECE (what may choose among methods)
    times = run.epoch_times()
    if times:
        row["s_per_epoch"] = float(np.mean(times))
    return row


@dataclass
class MethodRow:
    """One table row: a method aggregated over its seeds. ``stats[key] = (mean, std, n)`` in fractions."""

    method: str
    label: str
    seeds: list[int]
    missing_seeds: list[int]
    incomplete: list[str] = field(default_factory=list)
    stats: dict[str, tuple[float, float, int]] = field(default_factory=dict)
    per_run: dict[int | str, dict[str, float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # "seed 1: ECE after MS-ODIR: … needs at least …"
    spec: Method | None = None  # what the row's runs trained (metacal/run/method.py); None for derived rows (+ TS, …)

    @property
    def num_runs(self) -> int:
        """Complete runs aggregated in this row."""
        return len(self.per_run)


def aggregate(
    runs: Sequence[Run],
    num_bins: int = 15,
    hb_bins: int = 15,
    expected_seeds: Sequence[int] | None = None,
    ddof: int = 1,
    calibrators: Sequence[str] | None = None,
) -> list[MethodRow]:
    """Group runs by method (config stem) and aggregate each column over the complete runs; the post-hoc
    columns are those of ``calibrators`` (registry names; default all, the others stay NaN with n = 0).

    Expected seeds default to the union of seeds seen under the root; a method lacking one of them lists it
    in ``missing_seeds`` (no run directory, or a run without metrics.json — the latter also in
    ``incomplete``). Methods whose runs are all incomplete still get a row (with n = 0).
    """
    calibrators = check_calibrators(calibrators)
    by_method: dict[str, list[Run]] = {}
    for run in runs:
        by_method.setdefault(run.method, []).append(run)
    if expected_seeds is None:
        expected = sorted({r.seed for r in runs if r.seed is not None})
    else:
        expected = sorted(set(int(s) for s in expected_seeds))
    rows = []
    # the post-hoc fits take seconds per run: a bar on a terminal (tqdm's disable=None: off when not a TTY)
    with tqdm(total=sum(r.complete for r in runs), desc="report", unit="run", disable=None, dynamic_ncols=True) as bar:
        specs = {m: next((r.spec for r in sorted(rs, key=lambda r: not r.complete) if r.spec is not None), None)
                 for m, rs in by_method.items()}  # what each method trained (its record): label and row order
        for method in sorted(by_method, key=lambda m: method_order(m, specs[m])):
            method_runs = by_method[method]
            complete = [r for r in method_runs if r.complete]
            numbers, notes = {}, []
            for r in complete:
                name = r.seed if r.seed is not None else r.path.name
                run_notes: list[str] = []
                try:
                    numbers[name] = run_numbers(r, num_bins, hb_bins, calibrators=calibrators, notes=run_notes)
                except ValueError as exc:  # say which run is broken
                    raise ValueError(f"run {r.path}: {exc}") from None
                notes += [f"{'seed ' if r.seed is not None else ''}{name}: {note}" for note in run_notes]
                bar.update()
            seeds = sorted(r.seed for r in complete if r.seed is not None)
            spec = specs[method]
            row = MethodRow(
                method=method,
                label=method_label(method, spec),
                seeds=seeds,
                missing_seeds=[s for s in expected if s not in seeds],
                incomplete=[f"{r.path.name}" for r in method_runs if not r.complete],
                per_run=numbers,
                notes=notes,
                spec=spec,
            )
            for key in ALL_COLUMN_KEYS + EXTRA_KEYS:
                row.stats[key] = mean_std([n.get(key, math.nan) for n in numbers.values()], ddof=ddof)
            rows.append(row)
    return rows
