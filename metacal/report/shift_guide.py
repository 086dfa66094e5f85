"""The method guide's block "When the deployment data may shift", from the shift pages' CSVs.

A shift page (:mod:`metacal.report.shift_page`) writes ``<stem>.csv`` (every cell: mean, std, n over seeds) and
``<stem>_paired.csv`` (:func:`paired_csv`: every row against CE + TS and CE + perturbation TS, paired over seeds).
Per page the block names the row with the lowest mean test ECE at severity 3 over the held-out families and
says whether it is resolved against CE + TS and CE + perturbation TS (post-hoc maps of the CE run, which need no
retraining); beside them and the automatic γ rows it gives its ECE there with the paired differences, its clean
ECE and its clean error: what it buys under shift and what it costs without.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from metacal.report.aggregate import MethodRow
from metacal.report.paired import LEVEL, compare
from metacal.report.shift_rows import key

REFERENCES = ("ce+ts", "ce+ts_perturbed")  # the post-hoc baselines every shifted row is paired with
SEVERITY = 3  # the judged severity: the middle of the suites' five
SHOWN = ("ce+ts", "ce+ts_perturbed", "auto_gamma", "auto_gamma_shift")  # rows always in the block, when measured
COMPACT_SHOWN = ("ce+ts", "ce+ts_perturbed")  # the README's rows: the recommended one against the two references
TITLE = "When the deployment data may shift"


def paired_csv(rows: Sequence[MethodRow], severities: Sequence[int], over: str = "held_out") -> str:
    """One line per (row, reference, severity, metric ∈ {ece, error}) with at least one shared seed: n, the mean
    difference row − reference (fractions) and its paired t-interval (empty for one seed), and whether it is
    resolved (the interval excludes 0)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["method", "reference", "over", "severity", "metric", "n", "mean", "low", "high", "resolved"])
    for ref in REFERENCES:
        reference = next((r for r in rows if r.method == ref), None)
        for row in rows if reference is not None else ():
            for s in severities:
                for metric in ("ece", "error"):
                    d = compare(row, reference, key(over, s, metric))
                    if row is reference or d.n == 0:
                        continue
                    low, high = d.interval if d.n > 1 else (math.nan, math.nan)
                    writer.writerow([row.method, ref, over, s, metric, d.n, repr(d.mean),
                                     "" if math.isnan(low) else repr(low), "" if math.isnan(high) else repr(high),
                                     int(d.resolved)])
    return buf.getvalue()


@dataclass
class ShiftPageNumbers:
    """One shift page's numbers as the block needs them: {(method, over, severity, metric): mean}, labels, and
    {(method, reference, severity, metric): (n, mean, low, high, resolved)}."""

    stem: str
    name: str
    means: dict[tuple[str, str, int, str], float]
    labels: dict[str, str]
    paired: dict[tuple[str, str, int, str], tuple[int, float, float, float, bool]]

    def mean(self, method: str, metric: str, severity: int, over: str = "held_out") -> float:
        return self.means.get((method, over, severity, metric), math.nan)


def _float(text: str) -> float:
    return float(text) if text != "" else math.nan


def load_shift_page(results: str | Path, stem: str, name: str) -> ShiftPageNumbers:
    """Read ``<stem>.csv`` and ``<stem>_paired.csv`` under ``results`` (FileNotFoundError naming the command
    that writes them when either is missing)."""
    cells, paired = Path(results) / f"{stem}.csv", Path(results) / f"{stem}_paired.csv"
    for path in (cells, paired):
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing: regenerate the shift page with the command on its first lines")
    means, labels = {}, {}
    with cells.open(encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            labels[r["method"]] = r["label"]
            if r["severity"] != "":
                means[(r["method"], r["over"], int(r["severity"]), r["metric"])] = float(r["mean"])
    pairs = {}
    with paired.open(encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            pairs[(r["method"], r["reference"], int(r["severity"]), r["metric"])] = (
                int(r["n"]), float(r["mean"]), _float(r["low"]), _float(r["high"]), r["resolved"] == "1")
    return ShiftPageNumbers(stem, name, means, labels, pairs)


def recommended(page: ShiftPageNumbers, severity: int = SEVERITY) -> str:
    """The row with the lowest mean test ECE at ``severity`` over the held-out families."""
    measured = {m: page.mean(m, "ece", severity) for m in page.labels}
    measured = {m: v for m, v in measured.items() if math.isfinite(v)}
    if not measured:
        raise ValueError(f"{page.stem}.csv has no held-out test ECE at severity {severity}")
    return min(measured, key=lambda m: (measured[m], m))


def _pct(x: float) -> str:
    return f"{100 * x:.2f}" if math.isfinite(x) else "–"


def _delta(page: ShiftPageNumbers, method: str, reference: str, severity: int) -> str:
    d = page.paired.get((method, reference, severity, "ece"))
    if method == reference or d is None:
        return "–"
    n, mean, low, high, resolved = d
    text = f"{100 * mean:+.2f}" + ("" if math.isnan(low) else f" [{100 * low:+.2f}, {100 * high:+.2f}]")
    return f"**{text}**" if resolved else text


def clean_cost(page: ShiftPageNumbers, method: str) -> str:
    """`` On clean data it differs from CE + TS by …``: the paired Δ test ECE and Δ error at severity 0 against
    CE + TS (points; "" for CE + TS itself or without pairs)."""
    parts = []
    for metric, name in (("ece", "ECE"), ("error", "error")):
        d = page.paired.get((method, "ce+ts", 0, metric))
        if method == "ce+ts" or d is None:
            return ""
        parts.append(f"{100 * d[1]:+.2f} points of {name}" + (" (resolved)" if d[4] else ""))
    return f" On clean data it differs from CE + TS by {' and '.join(parts)}."


def page_block(page: ShiftPageNumbers, link: str, severity: int = SEVERITY,
               shown: Sequence[str] = SHOWN) -> list[str]:
    """The regime's verdict sentence and table (rows: the recommended one, then ``shown``)."""
    best = recommended(page, severity)
    label = page.labels[best]
    versus = {ref: page.paired.get((best, ref, severity, "ece")) for ref in REFERENCES if ref != best}
    unresolved = [page.labels.get(ref, ref) for ref, d in versus.items() if d is None or not d[4]]
    if best.startswith("ce+"):  # a post-hoc map of the CE run
        verdict = f"use {label}, fitted on the CE run after training: the lowest mean ECE at severity {severity}"
        if unresolved:
            verdict += f" (not resolved against {' or '.join(unresolved)})"
    elif not unresolved:
        verdict = f"use {label}: lower ECE at severity {severity} than CE + TS and CE + perturbation TS (resolved)"
    else:
        verdict = (f"{label} has the lowest mean ECE at severity {severity}, but not resolved against "
                   f"{' or '.join(unresolved)}, which need no retraining")
    lines = [f"**[{page.name}]({link}/{page.stem}.md)**: {verdict}.{clean_cost(page, best)}", "",
             f"| method | ECE, severity {severity} | Δ vs CE + TS | Δ vs CE + perturbation TS | clean ECE | "
             "clean error |", "|---|---:|---:|---:|---:|---:|"]
    for method in dict.fromkeys([best, *shown]):
        if method not in page.labels:
            continue
        deltas = " | ".join(_delta(page, method, ref, severity) for ref in REFERENCES)
        lines.append(f"| {page.labels[method]} | {_pct(page.mean(method, 'ece', severity))} | {deltas} | "
                     f"{_pct(page.mean(method, 'ece', 0))} | {_pct(page.mean(method, 'error', 0))} |")
    return lines + [""]


def shift_markdown(results: str | Path, link: str, pages: Mapping[str, str],
                   severity: int = SEVERITY, shown: Sequence[str] = SHOWN) -> list[str]:
    """The whole block for ``pages`` (CSV stem → regime name): heading, how to read it, one verdict and table per
    shift page (rows: the recommended
    one, then ``shown``; the README's compact guide shows :data:`COMPACT_SHOWN`)."""
    if not pages:
        return []
    lines = [f"**{TITLE}** (test ECE % under the shift suites' held-out families, mean over the families and "
             f"seeds; Δ in points, paired over seeds with its {100 * LEVEL:g}% t-interval, **bold** when resolved; "
             "clean = the unshifted test set; perturbation TS is fitted on validation perturbed by the suite's other "
             "families)", ""]
    for stem, name in pages.items():
        lines += page_block(load_shift_page(results, stem, name), link, severity, shown)
    return lines

