"""The README's compact method guide: per regime of CE, one short table of the methods a new user chooses
between — CE, CE + temperature scaling, the recommended training-time method (Focal, auto γ) and the paper's
method (FLγ-SECE) — and the verdict, with a link to the full guide (docs/method_guide.md).

Every number comes from the results pages' CSVs through :class:`metacal.report.guide.Page`, as in the full
guide: a cell is the mean test ECE over seeds and, in parentheses, the mean test error (both in %).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

from metacal.report.guide import COMMAND, REGIME_TITLE, TS, Page, load_pages, verdict
from metacal.report.guide_spec import GuideSpec
from metacal.report.regime_guide import regimes_markdown
from metacal.report.shift_guide import shift_markdown

# the rows of the README's tables, in order; a method no page of the regime has gets no row
COMPACT: tuple[str, ...] = ("ce", TS, "auto_gamma", "flgamma_sece")
ROLE = {"auto_gamma": "calibrated as trained", "flgamma_sece": "the paper's method"}


def _pct(x: float) -> str:
    return f"{100 * x:.2f}" if math.isfinite(x) else "–"


def temperature_range(pages: Sequence[Page]) -> str:
    """``"1.33–2.04"``: the lowest and highest TS temperature of CE over ``pages`` (one value when they agree)."""
    low, high = (f"{t:.2f}" for t in (min(p.temperature for p in pages), max(p.temperature for p in pages)))
    return low if low == high else f"{low}–{high}"


def compact_table(pages: Sequence[Page], methods: Sequence[str] = COMPACT) -> list[str]:
    """method | per page: test ECE % (error %)."""
    lines = ["| method | " + " | ".join(p.name for p in pages) + " |", "|---|" + "---:|" * len(pages)]
    for m in methods:
        if m != TS and not any(m in p.rows for p in pages):
            continue
        label = next(p.label(m) for p in pages if m == TS or m in p.rows)
        label += f" ({ROLE[m]})" if m in ROLE else ""
        cells = ["–" if m != TS and m not in p.rows else
                 f"{_pct(p.value(m, 'ece_mean'))} ({_pct(p.value(m, 'error_mean'))})" for p in pages]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def compact_markdown(results: str | Path, spec: GuideSpec, link: str | None = None,
                     full: str = "docs/method_guide.md", command: str = COMMAND) -> str:
    """The README block's body (between the markers): the measured ranges of T, then per regime its pages'
    temperatures, the compact table and the verdict, then the shift block (:mod:`metacal.report.shift_guide`). Links: pages as ``<link>/<stem>.md``, the full guide as
    ``full``."""
    loaded = load_pages(results, spec.pages)
    unknown = [f"{p.stem}.csv" for p in loaded if p.regime is None]
    if unknown:
        raise ValueError(f"method guide: no TS temperature of CE (t_nll_mean) in {', '.join(unknown)}")
    link = (link if link is not None else Path(results).as_posix()).rstrip("/")
    groups = {r: [p for p in loaded if p.regime == r] for r in ("over", "under")}
    ranges = [f"T = {temperature_range(g)} on the {r}-confident pages" for r, g in groups.items() if g]
    lines = [f"*Generated from the results pages' CSVs ([{link}/]({link}/)); do not edit by hand. Regenerate: "
             f"`{command}`. Every method, its cost and the paired differences: [{full}]({full}).*", "",
             f"Measured temperature of CE: {' and '.join(ranges)}. Cells: test ECE % (test error %), means over "
             "seeds.", ""]
    for regime, group in groups.items():
        if not group:
            continue
        temps = ", ".join(f"T = {p.temperature:.2f} on [{p.name}]({link}/{p.stem}.md) "
                          f"({p.rows['ce'].get('n_runs', '?')} seeds)" for p in group)
        lines += [f"**{REGIME_TITLE[regime]}** ({temps})", "", *compact_table(group), "",
                  verdict(regime, group, spec.recommend), ""]
    lines += shift_markdown(results, link, spec.shift_pages, compact=True)
    lines += regimes_markdown(results, link, spec.regime_pages, compact=True)
    return "\n".join(lines).rstrip("\n") + "\n"
