"""Ablation pages: tables (Markdown for people in %, CSV for machines in fractions) and figures on one page.

Numbers come from the study's computation only; the page records the command that regenerates it and the
machine (``metacal.report.machine``). Cells use ``metacal.report.tables.format_cell``.
"""

from __future__ import annotations

import csv
import io
import math
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from matplotlib.figure import Figure

from metacal.machine import machine_markdown
from metacal.report.tables import format_cell


@dataclass(frozen=True)
class Column:
    """``key`` in the row dicts; ``scale`` 100 shows a fraction in %; ``std_key`` adds ``± std``."""

    key: str
    header: str
    scale: float = 1.0
    digits: int = 3
    std_key: str | None = None


@dataclass
class Table:
    slug: str
    rows: list[dict[str, Any]]
    columns: list[Column]


@dataclass
class Section:
    heading: str
    text: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    figures: list[tuple[str, Path]] = field(default_factory=list)  # (caption, path)


@dataclass
class PageResult:
    markdown: Path
    csvs: dict[str, Path]
    figures: list[Path]
    tables: dict[str, Table]


def cell(value: Any, column: Column, std: Any = None) -> str:
    if isinstance(value, str):
        return value
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, (bool, int)) and column.scale == 1.0 and column.std_key is None:
        return str(value)
    s = float(std) if isinstance(std, (int, float)) else math.nan
    return format_cell(float(value), s, 1, column.scale, column.digits)


def markdown_table(table: Table) -> str:
    lines = ["| " + " | ".join(c.header for c in table.columns) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(table.columns))) + "|"]
    for row in table.rows:
        cells = [cell(row.get(c.key), c, row.get(c.std_key) if c.std_key else None) for c in table.columns]
        lines.append("| " + " | ".join(x.replace("|", "\\|") for x in cells) + " |")
    return "\n".join(lines) + "\n"


def csv_text(table: Table) -> str:
    """Every key of the rows (union, first-seen order); floats as repr (fractions), empty = missing."""
    keys: list[str] = []
    for row in table.rows:
        keys += [k for k in row if k not in keys]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(keys)
    for row in table.rows:
        out = []
        for k in keys:
            v = row.get(k)
            out.append("" if v is None or (isinstance(v, float) and not math.isfinite(v))
                       else repr(v) if isinstance(v, float) else v)
        writer.writerow(out)
    return buf.getvalue()


def line_panels(series: dict[str, list[dict[str, Any]]], x: str, panels: Sequence[tuple[str, str]],
                xlabel: str) -> Figure:
    """One panel per (key, y-label): every series' 100·key against ``x``, marked points, the legend in panel 1."""
    fig = Figure(figsize=(11, 4))
    for j, (key, title) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), j + 1)
        for label, pts in series.items():
            ax.plot([p[x] for p in pts], [100 * p[key] for p in pts], marker="o", markersize=3, label=label)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(title)
        ax.grid(alpha=0.3)
    fig.axes[0].legend(fontsize=7)
    return fig


def save_figure(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    return path


def write_page(out_dir: str | Path, name: str, title: str, command: str, intro: Sequence[str],
               sections: Sequence[Section], quick: bool) -> PageResult:
    """Write ``<out_dir>/<name>.md``, one CSV per table (``<name>.csv`` for the first, ``<name>_<slug>.csv``
    for the others) and return the paths. Figures must already be saved under ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    md = out / f"{name}.md"
    lines = [f"# {title}" + (" — QUICK MODE (smoke test, not a result)" if quick else ""), ""]
    lines += ["Regenerate this page (numbers, CSV and figures) with:", "", "```", command, "```", "",
              f"Generated {datetime.now(timezone.utc).isoformat(timespec='seconds')} on:", "",
              machine_markdown().rstrip(), ""]
    lines += list(intro) + [""]
    csvs: dict[str, Path] = {}
    tables: dict[str, Table] = {}
    figs: list[Path] = []
    for section in sections:
        lines += [f"## {section.heading}", ""]
        if section.text:
            lines += list(section.text) + [""]
        for table in section.tables:
            path = out / (f"{name}.csv" if not csvs else f"{name}_{table.slug}.csv")
            path.write_text(csv_text(table), encoding="utf-8")
            csvs[table.slug] = path
            tables[table.slug] = table
            lines += [markdown_table(table).rstrip(), "", f"As fractions: [{path.name}]({path.name}).", ""]
        for caption, fig_path in section.figures:
            figs.append(Path(fig_path))
            lines += [f"![{caption}]({os.path.relpath(fig_path, out)})", "", f"*{caption}*", ""]
    md.write_text("\n".join(lines), encoding="utf-8")
    return PageResult(md, csvs, figs, tables)
