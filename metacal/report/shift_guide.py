"""The method guide's block "When the deployment data may shift", from the shift pages' CSVs.

A shift page (:mod:`metacal.report.shift_page`) writes ``<stem>.csv`` (every cell: mean, std, n over seeds) and
``<stem>_paired.csv`` (:func:`paired_csv`: every row against CE + TS and CE + perturbation TS, paired over seeds).

The rule. A user does not know how strong the shift will be, so every row is judged by its test ECE over the
held-out families averaged over severities 0–5 (0 = the clean test set), not at one severity. The in-distribution
recommendation on these over-confident regimes is CE + TS; another row is recommended only when it is resolved
better than CE + TS on that mean, paired over seeds. The paired CSV holds the per-severity differences and their
95% t-intervals; the interval of their mean over severities is taken with the mean of the per-severity half-widths
(:func:`mean_difference`). A spread of a mean is at most the mean of the spreads (sd(Σ X_s) ≤ Σ sd(X_s)), so this
interval is never narrower than the exact paired one: "resolved" here is conservative. Beside each row: its worst
severity, its ECE at severity 3 (information only), its clean ECE and clean error.
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
from metacal.report.paired import TIE
from metacal.report.shift_rows import key

REFERENCES = ("ce+ts", "ce+ts_perturbed")  # the post-hoc baselines every shifted row is paired with
IN_DISTRIBUTION = "ce+ts"  # the in-distribution recommendation on the over-confident regimes the shift pages have
SEVERITIES = (0, 1, 2, 3, 4, 5)  # judged: the mean over these (0 = clean)
SEVERITY = 3  # shown beside it for information: the middle of the suites' five
SHOWN = ("ce+ts", "ce+ts_perturbed", "auto_gamma", "auto_gamma_shift")  # rows always in the block, when measured
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


def mean_ece(page: ShiftPageNumbers, method: str) -> float:
    """Mean test ECE over the held-out families and :data:`SEVERITIES` (NaN when a severity is missing)."""
    values = [page.mean(method, "ece", s) for s in SEVERITIES]
    return sum(values) / len(values) if all(math.isfinite(v) for v in values) else math.nan


def worst_severity(page: ShiftPageNumbers, method: str) -> tuple[int, float]:
    """(severity, ECE) where the row's held-out ECE is highest."""
    return max(((s, page.mean(method, "ece", s)) for s in SEVERITIES), key=lambda item: (item[1], item[0]))


def mean_difference(page: ShiftPageNumbers, method: str, reference: str = IN_DISTRIBUTION
                    ) -> tuple[float, float, bool] | None:
    """(d̄, half-width, resolved): the mean over severities of the paired ECE differences method − reference and its
    conservative interval (module docstring); None unless every severity has a paired interval."""
    if method == reference:
        return None
    pairs = [page.paired.get((method, reference, s, "ece")) for s in SEVERITIES]
    if any(p is None or p[0] < 2 or math.isnan(p[2]) for p in pairs):
        return None
    d = sum(p[1] for p in pairs) / len(pairs)
    half = sum((p[3] - p[2]) / 2 for p in pairs) / len(pairs)
    return d, half, abs(d) > half + TIE


def recommended(page: ShiftPageNumbers) -> str:
    """The row with the lowest mean ECE over severities 0–5 when it is resolved better than CE + TS on that mean,
    else CE + TS (:data:`IN_DISTRIBUTION`)."""
    measured = {m: mean_ece(page, m) for m in page.labels}
    measured = {m: v for m, v in measured.items() if math.isfinite(v)}
    if not measured:
        raise ValueError(f"{page.stem}.csv has no held-out test ECE at every severity {SEVERITIES[0]}–{SEVERITIES[-1]}")
    best = min(measured, key=lambda m: (measured[m], m))
    d = mean_difference(page, best)
    return best if best == IN_DISTRIBUTION or (d is not None and d[2] and d[0] < 0) else IN_DISTRIBUTION


def _pct(x: float) -> str:
    return f"{100 * x:.2f}" if math.isfinite(x) else "–"


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


def _mean_delta(page: ShiftPageNumbers, method: str) -> str:
    d = mean_difference(page, method)
    if d is None:
        return "–"
    text = f"{100 * d[0]:+.2f} [{100 * (d[0] - d[1]):+.2f}, {100 * (d[0] + d[1]):+.2f}]"
    return f"**{text}**" if d[2] else text


def page_block(page: ShiftPageNumbers, link: str, shown: Sequence[str] = SHOWN) -> list[str]:
    """The regime's verdict sentence and table (rows: the recommended one, the lowest mean if another, ``shown``)."""
    best = recommended(page)
    lowest = min((m for m in page.labels if math.isfinite(mean_ece(page, m))), key=lambda m: (mean_ece(page, m), m))
    label = page.labels.get(best, "CE + TS")
    if best == IN_DISTRIBUTION and lowest == best:
        verdict = f"use {label}, as without shift: it has the lowest mean ECE over severities 0–5"
    elif best == IN_DISTRIBUTION:
        verdict = (f"use {label}, as without shift: {page.labels[lowest]} has a lower mean ECE over severities 0–5, "
                   "but not resolved against it")
    else:
        how = ", fitted on the CE run after training" if best.startswith("ce+") else ""
        verdict = f"use {label}{how}: resolved lower mean ECE over severities 0–5 than CE + TS"
    lines = [f"**[{page.name}]({link}/{page.stem}.md)**: {verdict}.{clean_cost(page, best)}", "",
             "| method | mean ECE, severities 0–5 | Δ vs CE + TS | worst severity: ECE | ECE, severity 3 | clean ECE | "
             "clean error |", "|---|---:|---:|---:|---:|---:|---:|"]
    for method in dict.fromkeys([best, lowest, *shown]):
        if method not in page.labels:
            continue
        worst, worst_ece = worst_severity(page, method)
        lines.append(f"| {page.labels[method]} | {_pct(mean_ece(page, method))} | {_mean_delta(page, method)} | "
                     f"{worst}: {_pct(worst_ece)} | {_pct(page.mean(method, 'ece', SEVERITY))} | "
                     f"{_pct(page.mean(method, 'ece', 0))} | {_pct(page.mean(method, 'error', 0))} |")
    return lines + [""]


def shift_markdown(results: str | Path, link: str, pages: Mapping[str, str], shown: Sequence[str] = SHOWN,
                   compact: bool = False) -> list[str]:
    """The whole block for ``pages`` (CSV stem → regime name): heading, the rule, one verdict and table per shift
    page (rows: the recommended one, the lowest mean, then ``shown``); ``compact`` (the README): the verdicts alone,
    with the mean ECE of CE + TS and of the lowest row."""
    if not pages:
        return []
    rule = ("the severity of a shift is unknown, so each row is judged by its test ECE averaged over severities 0–5 "
            "(0 = clean) of the suites' held-out families, and a row other than CE + TS is recommended only when it "
            "is resolved better than CE + TS on that mean")
    if compact:
        lines = [f"**{TITLE}** — {rule} (full tables: the method guide):", ""]
        for stem, name in pages.items():
            page = load_shift_page(results, stem, name)
            lowest = min((m for m in page.labels if math.isfinite(mean_ece(page, m))),
                         key=lambda m: (mean_ece(page, m), m))
            verdict = page_block(page, link, ())[0]
            lines.append(f"- {verdict} Mean ECE: CE + TS {_pct(mean_ece(page, IN_DISTRIBUTION))}%"
                         + ("" if lowest == IN_DISTRIBUTION else
                            f", {page.labels[lowest]} {_pct(mean_ece(page, lowest))}% ({_mean_delta(page, lowest)})")
                         + ".")
        return lines + [""]
    lines = [f"**{TITLE}** — {rule}. (ECE %, means over the families and seeds; Δ in points, paired over seeds with a "
             f"{100 * LEVEL:g}% interval that is never narrower than the exact one, **bold** when resolved; "
             "perturbation TS is fitted on validation perturbed by the suite's other families.)", ""]
    for stem, name in pages.items():
        lines += page_block(load_shift_page(results, stem, name), link, shown)
    return lines
