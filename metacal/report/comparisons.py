"""The "Paired comparisons" section of a results page and its CSV: every method against CE and against the fixed-γ
focal chosen on validation, seed by seed, with the statistics of :mod:`metacal.report.paired`."""

from __future__ import annotations

import csv
import io
import math
from typing import Sequence

from metacal.report.aggregate import MethodRow
from metacal.report.claim import best_fixed_gamma, find_row, fixed_gamma_rows
from metacal.report.paired import LEVEL, PairedDiff, interval_text, needed_text, p_text, resolved_text, table_rows

# metric key → how the table names it (the page's two headline numbers)
PAIRED_METRICS: dict[str, str] = {"ece": "ECE", "error": "error"}


def ts_reference(ce: MethodRow) -> MethodRow | None:
    """CE + temperature scaling as a reference row: per seed, CE's test ECE after TS fitted by NLL on validation
    (``ece_ts_nll``, Guo et al. 2017) and CE's test error (TS keeps the predicted class); None when no seed has
    it."""
    per_run = {s: {"ece": n.get("ece_ts_nll", math.nan), "error": n.get("error", math.nan)}
               for s, n in ce.per_run.items()}
    if not any(math.isfinite(n["ece"]) for n in per_run.values()):
        return None
    return MethodRow(method="ce+ts", label="CE + TS", seeds=list(ce.seeds), missing_seeds=list(ce.missing_seeds),
                     per_run=per_run)


def grid_pick(rows: Sequence[MethodRow]) -> tuple[MethodRow, dict] | None:
    """The γ grid a user would train, kept one run per seed: on each seed, the run with the lowest validation
    ECE (its selected epoch's, ``ece_val``) among CE (γ = 0) and the fixed-γ focal rows. Only seeds on which
    every grid row has that number; (row, {seed: the picked row's label}), or None without CE or with fewer
    than two fixed-γ focal rows."""
    ce = find_row(rows, "ce")
    grid = fixed_gamma_rows(rows)
    if ce is None or len(grid) < 2:
        return None
    grid = [ce, *grid]
    val = lambda r, s: r.per_run.get(s, {}).get("ece_val", math.nan)  # noqa: E731
    seeds = [s for s in ce.per_run if all(math.isfinite(val(r, s)) for r in grid)]
    if not seeds:
        return None
    picked = {s: min(grid, key=lambda r: val(r, s)) for s in seeds}
    row = MethodRow(method="grid_pick", label="Grid pick", seeds=[s for s in seeds if isinstance(s, int)],
                    missing_seeds=[], per_run={s: dict(picked[s].per_run[s]) for s in seeds})
    return row, {s: r.label for s, r in picked.items()}


def references(rows: Sequence[MethodRow]) -> list[tuple[MethodRow, str]]:
    """(reference row, why it is one): CE; CE + temperature scaling; the fixed-γ focal with the lowest mean
    validation ECE; the grid pick per seed (:func:`grid_pick`)."""
    refs = []
    ce = find_row(rows, "ce")
    if ce is not None:
        refs.append((ce, "the baseline"))
        ts = ts_reference(ce)
        if ts is not None:
            refs.append((ts, "CE's test ECE after temperature scaling fitted by NLL on validation; CE's error"))
    fixed = best_fixed_gamma(rows)
    others = [r.label for r in fixed_gamma_rows(rows)]
    if fixed is not None:
        refs.append((fixed, f"the fixed γ chosen on mean validation ECE among {', '.join(others)}"))
    pick = grid_pick(rows)
    if pick is not None:
        row, labels = pick
        chosen = "; ".join(f"seed {s}: {label}" for s, label in labels.items())
        refs.append((row, f"per seed, the run with the lowest validation ECE among CE, {', '.join(others)} — "
                          f"{chosen}"))
    return refs


def comparisons(rows: Sequence[MethodRow], metrics: Sequence[str] = tuple(PAIRED_METRICS),
                level: float = LEVEL) -> list[tuple[MethodRow, str, list[tuple[MethodRow, dict[str, PairedDiff]]]]]:
    """Per reference: (reference, why, [(method row, {metric: PairedDiff}), …])."""
    return [(ref, why, table_rows(rows, ref, metrics, level)) for ref, why in references(rows)]


def paired_markdown(rows: Sequence[MethodRow], csv_name: str | None = None,
                    metrics: Sequence[str] = tuple(PAIRED_METRICS), level: float = LEVEL) -> list[str]:
    """The section: one table per reference, columns per metric Δ [interval] | p | resolved | seeds needed."""
    pct = f"{100 * level:g}%"
    lines = ["## Paired comparisons over seeds", "",
             f"Each method against a reference, seed by seed: Δ = method − reference on the same seed (same split, "
             f"same initial weights, same batch order, same test set), in points; mean over the seeds both have, "
             f"its {pct} t-interval and the two-sided paired t-test p (scipy.stats.ttest_rel). Resolved: the "
             f"interval excludes 0 (equivalently p < {1 - level:.2g}). Seeds needed: the fewest seeds n with "
             f"t·s/√n < |Δ| (t the {pct} two-sided t quantile on n − 1 degrees of freedom, s the spread of the "
             "per-seed differences) — how many seeds a difference of this size and spread would need to be "
             "resolved (about even odds at that n); — when Δ = 0 or fewer than 2 seeds are shared. Negative Δ: "
             "lower than the reference, better for ECE and error. The intervals are over seeds on one test set. "
             "Formulas: metacal/report/paired.py.", ""]
    tables = comparisons(rows, metrics, level)
    if not tables:
        return lines + ["No reference: the runs have neither a CE nor a fixed-γ focal row.", ""]
    headers = ["Method", "Seeds"]
    for m in metrics:
        name = PAIRED_METRICS.get(m, m)
        headers += [f"Δ {name} (points) [{pct} CI]", "p", "resolved", "seeds needed"]
    for ref, why, results in tables:
        lines += [f"### Against {ref.label} ({why})", "", "| " + " | ".join(headers) + " |",
                  "|" + "|".join(["---", "---:"] + ["---:", "---:", "---", "---:"] * len(metrics)) + "|"]
        for row, diffs in results:
            n = max(d.n for d in diffs.values())
            cells = [row.label, str(n)]
            for m in metrics:
                d = diffs[m]
                cells += [interval_text(d), p_text(d.p_value), resolved_text(d), needed_text(d)]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        lines.append("")
    if csv_name:
        lines += [f"Same comparisons as fractions: [{csv_name}]({csv_name}).", ""]
    return lines


def paired_csv(rows: Sequence[MethodRow], metrics: Sequence[str] = tuple(PAIRED_METRICS),
               level: float = LEVEL) -> str:
    """One line per (reference, method, metric): n, seeds, mean, sd, low, high, p, resolved, seeds_needed —
    fractions; empty = undefined."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["reference", "method", "metric", "level", "n", "seeds", "mean", "sd", "low", "high", "p",
                     "resolved", "seeds_needed"])
    num = lambda x: repr(float(x)) if math.isfinite(x) else ""  # noqa: E731
    for ref, _, results in comparisons(rows, metrics, level):
        for row, diffs in results:
            for m in metrics:
                d = diffs[m]
                low, high = d.interval
                writer.writerow([ref.method, row.method, m, level, d.n, " ".join(map(str, d.keys)), num(d.mean),
                                 num(d.sd), num(low), num(high), num(d.p_value), int(d.resolved),
                                 "" if d.seeds_needed is None else d.seeds_needed])
    return buf.getvalue()
