"""Markdown (for people, in %) and CSV (for machines, fractions) renderings of aggregated method rows."""

from __future__ import annotations

import csv
import io
import math
from typing import Sequence

from metacal.report.aggregate import ALL_COLUMN_KEYS, COLUMN_KEYS, EXTRA_KEYS, MethodRow
from metacal.report.posthoc_columns import ALL, column_header, column_key

# key → (Markdown header, factor applied for people). NLL is in nats and time in seconds, as in Wang & Golebiowski 2024.
COLUMNS: dict[str, tuple[str, float]] = {
    "error": ("Error (%)", 100.0),
    "nll": ("NLL", 1.0),
    "ece": ("ECE (%)", 100.0),
    "mce": ("MCE (%)", 100.0),
    "ace": ("ACE (%)", 100.0),
    "classwise_ece": ("Classwise ECE (%)", 100.0),
    **{column_key(name): (column_header(name), 100.0) for name in ALL},  # "ECE after …", registry order
    "s_per_epoch": ("s/epoch", 1.0),
}
assert tuple(COLUMNS) == ALL_COLUMN_KEYS


def format_cell(mean: float, std: float, n: int, scale: float = 1.0, digits: int = 3) -> str:
    """``"4.812 ± 0.122"``; just the mean for one run (std undefined); ``"–"`` when no run has the number."""
    if n == 0 or not math.isfinite(mean):
        return "–"
    text = f"{mean * scale:.{digits}f}"
    if math.isfinite(std):
        text += f" ± {std * scale:.{digits}f}"
    return text


def seeds_cell(row: MethodRow) -> str:
    """Number of complete runs, with the missing seeds named (``"2 (missing: 1)"``)."""
    text = str(row.num_runs)
    if row.missing_seeds:
        text += " (missing: " + ", ".join(str(s) for s in row.missing_seeds) + ")"
    return text


def markdown_table(rows: Sequence[MethodRow], digits: int = 3, keys: Sequence[str] = COLUMN_KEYS) -> str:
    """A table laid out like Wang & Golebiowski 2024, Table 1: Method | Seeds | Error | NLL | ECE | ... | s/epoch,
    mean ± std over seeds; ``keys`` (default all, see ``aggregate.column_keys``) chooses the columns.

    A column computed from fewer runs than the row has is marked ``(n=k)``.
    """
    headers = ["Method", "Seeds"] + [COLUMNS[k][0] for k in keys]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(["---"] * 2 + ["---:"] * len(keys)) + "|"]
    for row in rows:
        cells = [row.label, seeds_cell(row)]
        for key in keys:
            mean, std, n = row.stats[key]
            cell = format_cell(mean, std, n, COLUMNS[key][1], digits)
            if 0 < n < row.num_runs:
                cell += f" (n={n})"
            cells.append(cell)
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def csv_table(rows: Sequence[MethodRow], keys: Sequence[str] = COLUMN_KEYS) -> str:
    """CSV with one row per method: method, label, n_runs, seeds, missing_seeds, then ``<key>_mean``,
    ``<key>_std``, ``<key>_n`` for every column of ``keys`` and EXTRA_KEYS — fractions (NLL in nats, time in
    seconds); empty = unavailable."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    header = ["method", "label", "n_runs", "seeds", "missing_seeds"]
    for key in tuple(keys) + EXTRA_KEYS:
        header += [f"{key}_mean", f"{key}_std", f"{key}_n"]
    writer.writerow(header)
    for row in rows:
        out = [row.method, row.label, row.num_runs, " ".join(map(str, row.seeds)),
               " ".join(map(str, row.missing_seeds))]
        for key in tuple(keys) + EXTRA_KEYS:
            mean, std, n = row.stats.get(key, (math.nan, math.nan, 0))
            out += [repr(mean) if math.isfinite(mean) else "", repr(std) if math.isfinite(std) else "", n]
        writer.writerow(out)
    return buf.getvalue()
