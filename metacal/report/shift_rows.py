"""The method rows of the shift results page, read from a sweep whose runs were evaluated with
``python -m metacal.evaluate RUN --shift SUITE [--ood SET]`` (``<run>/shift/<suite>.json``, ``ood_<set>.json``).

Per run, every metric of a column (``uncalibrated``, ``ts_nll``, ``ts_perturbed``, ``ets``) is averaged over the
suite's families at each severity — over all families and over the held-out ones (those perturbation TS never
saw) — from the file's per-family cells (:func:`metacal.shift.evaluate.mean_of`); severity 0 is the clean test set.
Rows (:class:`metacal.report.aggregate.MethodRow`, seeds as keys of ``per_run``, so the paired statistics of
:mod:`metacal.report.paired` apply): each method raw and + TS; CE + perturbation TS and CE + ensemble TS; the
per-seed grid pick of :func:`metacal.report.comparisons.grid_pick` (lowest validation ECE among CE and the
fixed-γ focal runs), with that run's raw numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from metacal.run.method import Method
from metacal.report.aggregate import MethodRow, mean_std
from metacal.report.comparisons import grid_pick
from metacal.report.labels import method_label, method_order
from metacal.run.layout import Run, check_one_dataset, find_runs, read_json
from metacal.shift.evaluate import OUT_DIR, mean_of

OVERS = ("all", "held_out")
# the metrics of a cell kept on the page and in its CSV; after a dot: the entry of a nested summary dict
METRICS = ("error", "nll", "brier", "ece", "mce", "ace", "aurc", "augrc", "risk_at_coverage.0.8",
           "risk_at_coverage.0.9", "coverage_at_risk.0.01", "coverage_at_risk.0.05")
OOD_SCORES = ("msp", "max_logit", "energy", "entropy")
OOD_METRICS = ("auroc", "aupr_in", "aupr_out", "fpr95")
OOD = "ood"
CE_EXTRA = {"ts_perturbed": "perturbation TS", "ets": "ensemble TS"}  # columns shown for CE only


def key(over: str, severity: int | str, metric: str) -> str:
    """The per-run dict key of one cell: ``"held_out/3/ece"``; ``"ood/msp/auroc"`` for OOD numbers."""
    return f"{over}/{severity}/{metric}"


@dataclass
class Evaluated:
    """One run with its shift result (the ``shift`` part of ``<suite>.json``) and, if asked, its OOD part."""

    run: Run
    name: int | str  # the seed (the directory name when the run has none)
    result: dict[str, Any]
    ood: dict[str, Any] | None = None

    @property
    def shift(self) -> dict[str, Any]:
        return self.result["shift"]


def _where(run: Run, root: Path) -> str:
    return str(run.path.relative_to(root)) if run.path.is_relative_to(root) else str(run.path)


def _named(runs: Sequence[Run], root: Path, limit: int = 6) -> str:
    names = [_where(r, root) for r in runs]
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def load(root: str | Path, suite: str, ood: str | None = None, seeds: Sequence[int] | None = None,
         methods: Sequence[str] | None = None) -> list[Evaluated]:
    """Every run under ``root`` (of ``seeds`` and ``methods``, the sweep's directory names, when given) with its
    ``shift/<suite>.json`` (and ``shift/ood_<ood>.json``); a one-line ValueError/FileNotFoundError for an unknown
    suite, no runs, a requested seed or method missing, runs lacking a file (named), or runs evaluated on different
    families."""
    from metacal.data.shift_suites import SHIFT_SUITES
    from metacal.registry import unknown_name

    if suite not in SHIFT_SUITES:
        raise ValueError(unknown_name("shift suite", suite, SHIFT_SUITES.available()))
    root = Path(root)
    runs = find_runs(root)
    if methods is not None:
        unknown = sorted(set(methods) - {r.method for r in runs})
        if unknown:
            raise ValueError(f"--methods: no runs of {', '.join(unknown)} under {root}; found: "
                             f"{', '.join(sorted({r.method for r in runs})) or 'none'}")
        runs = [r for r in runs if r.method in set(methods)]
    if seeds is not None:
        runs = [r for r in runs if r.seed in set(seeds)]
    if not runs:
        raise ValueError(f"no run directories under {root}{' for seeds ' + str(list(seeds)) if seeds else ''} "
                         "(expected <method>/seed<S>/ as scripts/sweep.py lays them out)")
    check_one_dataset(runs, root)
    if seeds is not None:
        lacking = [f"{m} seed {s}" for m in sorted({r.method for r in runs}) for s in seeds
                   if not any(r.method == m and r.seed == s for r in runs)]
        if lacking:
            raise ValueError(f"--seeds: no run for {', '.join(lacking)} under {root}")
    found = [(r, read_json(r.path / OUT_DIR / f"{suite}.json")) for r in runs]
    missing = [r for r, data in found if not (data and isinstance(data.get("shift"), dict))]
    if missing:
        raise ValueError(f"{len(missing)} of {len(runs)} runs have no {OUT_DIR}/{suite}.json: {_named(missing, root)} "
                         f"(run python -m metacal.evaluate RUN --shift {suite} on each)")
    out = [Evaluated(r, r.seed if r.seed is not None else r.path.name, data) for r, data in found]
    if ood is not None:
        parts = [(e, read_json(e.run.path / OUT_DIR / f"ood_{ood}.json")) for e in out]
        missing = [e.run for e, data in parts if not (data and isinstance(data.get("ood"), dict))]
        if missing:
            raise ValueError(f"{len(missing)} of {len(runs)} runs have no {OUT_DIR}/ood_{ood}.json: "
                             f"{_named(missing, root)} (run python -m metacal.evaluate RUN --ood {ood} on each)")
        for e, data in parts:
            e.ood = data["ood"]
    layouts = {(tuple(e.shift["families"]), tuple(e.shift["held_out_families"])) for e in out}
    if len(layouts) > 1:
        raise ValueError(f"the runs under {root} were evaluated on different families or held-out families of "
                         f"{suite}: {sorted(layouts)}; re-evaluate them with one version of the suite")
    return out


def leaf(summary: dict[str, Any], metric: str) -> float:
    """``summary["risk_at_coverage"]["0.8"]`` for ``"risk_at_coverage.0.8"``; NaN when absent."""
    head, _, tail = metric.partition(".")
    value = summary.get(head, math.nan)
    if tail:
        value = value.get(tail, math.nan) if isinstance(value, dict) else math.nan
    return float(value) if isinstance(value, (int, float)) else math.nan


def family_means(shift: dict[str, Any], column: str) -> dict[tuple[str, int], dict[str, Any]]:
    """{(over, severity): the column's summary averaged over that set of families}; severity 0 is the clean
    test set. Only (over, severity) pairs with at least one family evaluated in ``column``."""
    families = {"all": list(shift["families"]), "held_out": list(shift["held_out_families"])}
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for severity in shift["severities"]:
        for over in OVERS:
            if severity == 0:
                summaries = [shift["clean"][column]] if column in shift["clean"] else []
            else:
                summaries = [c["metrics"][column] for c in shift["cells"] if c["severity"] == severity
                             and c["family"] in families[over] and column in c["metrics"]]
            if summaries:
                out[over, int(severity)] = mean_of(summaries)
    return out


def run_numbers(ev: Evaluated, column: str) -> dict[str, float]:
    """Every cell of one run in one column, keyed by :func:`key`, plus ``ece_val`` (the grid pick's criterion)."""
    out: dict[str, float] = {}
    for (over, severity), summary in family_means(ev.shift, column).items():
        out.update({key(over, severity, m): leaf(summary, m) for m in METRICS})
    if ev.ood is not None and isinstance(ev.ood.get(column), dict):
        for score, values in ev.ood[column].items():
            out.update({key(OOD, score, m): leaf(values, m) for m in OOD_METRICS})
    val_ece = ((ev.run.metrics or {}).get("val") or {}).get("ece")
    out["ece_val"] = float(val_ece) if isinstance(val_ece, (int, float)) else math.nan
    return out


def _row(method: str, label: str, evaluated: Sequence[Evaluated], column: str, spec: Method | None = None) -> MethodRow:
    per_run = {e.name: run_numbers(e, column) for e in evaluated}
    return MethodRow(method=method, label=label, seeds=sorted(s for s in per_run if isinstance(s, int)),
                     missing_seeds=[], per_run=per_run, spec=spec)


def method_rows(evaluated: Sequence[Evaluated]) -> tuple[list[MethodRow], dict[Any, str] | None]:
    """The page's rows in order (each method raw then + TS, CE's extra calibrators after CE + TS, the grid pick
    last) and the grid pick's choice per seed ({seed: label}; None when there is no grid to pick from)."""
    by_method: dict[str, list[Evaluated]] = {}
    for e in evaluated:
        by_method.setdefault(e.run.method, []).append(e)
    rows, raw = [], []
    for method in sorted(by_method, key=lambda m: method_order(m, by_method[m][0].run.spec)):
        group = by_method[method]
        spec = group[0].run.spec  # what the runs trained: the grid pick reads it (metacal/run/method.py)
        label = method_label(method, spec)
        raw.append(_row(method, label, group, "uncalibrated", spec))
        rows += [raw[-1], _row(f"{method}+ts", f"{label} + TS", group, "ts_nll")]
        if method == "ce":
            rows += [_row(f"ce+{col}", f"{label} + {name}", group, col) for col, name in CE_EXTRA.items()
                     if any(col in e.shift["clean"] for e in group)]
    pick = grid_pick(raw)
    if pick is None:
        return rows, None
    row, chosen = pick
    return rows + [row], chosen


def cell(row: MethodRow, name: str) -> tuple[float, float, int]:
    """(mean, sample std, n) over the row's seeds of one per-run number (:func:`metacal.report.aggregate.mean_std`)."""
    return mean_std([numbers.get(name, math.nan) for numbers in row.per_run.values()])


def ce_regime(evaluated: Sequence[Evaluated]) -> tuple[tuple[float, float, int], tuple[float, float, int]] | None:
    """CE's clean test ECE and its temperature-scaling T over seeds, from metrics.json (``test.ece``,
    ``test_after_ts.temperature``), else from the shift file (clean ``uncalibrated`` ECE, ``ts_nll``'s T);
    None without CE runs."""
    ce = [e for e in evaluated if e.run.method == "ce"]
    if not ce:
        return None
    eces, temps = [], []
    for e in ce:
        saved = e.run.metrics or {}
        ece = (saved.get("test") or {}).get("ece")
        t = (saved.get("test_after_ts") or {}).get("temperature")
        eces.append(float(ece) if isinstance(ece, (int, float)) else leaf(e.shift["clean"]["uncalibrated"], "ece"))
        fallback = e.result.get("calibrators", {}).get("ts_nll", {}).get("temperature", math.nan)
        temps.append(float(t) if isinstance(t, (int, float)) else float(fallback))
    return mean_std(eces), mean_std(temps)
