"""The prediction-set page's figure: (left) coverage of CE + TS's sets under shift per score against the target;
(right) the mean APS set size at α = 0.1 per row, with the 95% t-interval of the mean over seeds."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from experiments.regimes.figure import interval  # noqa: E402

from .numbers import key  # noqa: E402
from .study import SCORES, SEVERITIES, SHIFT_ALPHA  # noqa: E402


def write_figure(table: dict, path: Path, score: str = "aps", alpha: float = 0.1) -> Path:
    from .page import label, shift_coverage, size_getter, values

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    severities = (0, *SEVERITIES)
    if ("ce", "ts_nll") in table:
        for s in SCORES:
            points = [(sev, interval(v)) for sev in severities
                      if (v := shift_coverage(table["ce", "ts_nll"], "ts_nll", s, sev))]
            if points:
                left.errorbar([p[0] for p in points], [100 * p[1][0] for p in points],
                              yerr=[100 * p[1][1] for p in points], marker="o", capsize=3, label=s.upper())
    left.axhline(100 * (1 - SHIFT_ALPHA), color="k", ls="--", lw=1, label="target")
    left.set(xlabel="severity (0 = clean test split)", ylabel="coverage % (held-out families)",
             title=f"CE + TS sets under shift, α = {SHIFT_ALPHA:g}")
    left.legend(fontsize=8)
    names, means, halves = [], [], []
    for (method, column), seeds in table.items():
        vals = values(seeds, size_getter(column, score, alpha))
        if vals:
            m, h = interval(vals)
            names.append(label(method, column))
            means.append(m)
            halves.append(h)
    right.barh(range(len(names)), means, xerr=halves, capsize=3, color="tab:blue", alpha=0.7)
    right.set_yticks(range(len(names)), names, fontsize=8)
    right.invert_yaxis()
    right.set(xlabel=f"mean {score.upper()} set size (clean test, α = {alpha:g})", title="set size per row")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
