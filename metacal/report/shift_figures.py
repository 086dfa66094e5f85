"""Figures of the shift results page: a metric against the shift severity, one line per method row (mean over
seeds with a ±std band), in the style of :mod:`metacal.report.figures`.

Drawing uses matplotlib's object API (``Figure``), so no global pyplot state is touched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from matplotlib.figure import Figure

from metacal.report.figures import Series, _band, _save


def plot_vs_severity(series: Mapping[str, Series], path: Path, ylabel: str, scale: float = 100.0) -> Path:
    """``series[label] = (severities, mean, std)`` in fractions, drawn ×``scale`` against severity 0…5."""
    from cycler import cycler
    from matplotlib import colormaps

    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot(1, 1, 1)
    # many method rows: 20 distinct colours, solid/dashed alternating so neighbours in the legend differ twice
    ax.set_prop_cycle(cycler(color=colormaps["tab20"].colors) + cycler(linestyle=["-", "--"] * 10))
    for label, (x, mean, std) in series.items():
        _band(ax, x, mean, std, label=label, scale=scale, marker="o")
    ax.set_xlabel("shift severity (0 = clean test set)")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return _save(fig, path)
