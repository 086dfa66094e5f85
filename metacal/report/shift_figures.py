"""Figures of the shift results page: a metric against the shift severity, one line per method row (mean over
seeds with a ±std band), in the style of :mod:`metacal.report.figures`; from the runs' per-sample files
(:mod:`metacal.shift.samples`), risk–coverage curves at severities 0 and 3 and a reliability grid at severity 3,
seeds pooled.

Drawing uses matplotlib's object API (``Figure``), so no global pyplot state is touched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
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


#: the reliability grid's rows at severity 3: (method, column, label); the grid pick is added when there is one
RELIABILITY_ROWS = (("ce", "uncalibrated", "CE"), ("ce", "ts_nll", "CE + TS"),
                    ("ce", "ts_perturbed", "CE + perturbation TS"), ("auto_gamma", "uncalibrated", "Focal, auto γ"),
                    ("auto_gamma_shift", "uncalibrated", "Focal, auto γ (shift-tuned)"))


def pooled(samples: Sequence[Mapping[tuple[int, str], tuple[np.ndarray, np.ndarray]]], severity: int,
           column: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(confidence, correct) of several runs' sample files concatenated (seeds pooled); None when any lacks it."""
    parts = [s.get((severity, column)) for s in samples]
    if not parts or any(p is None for p in parts):
        return None
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def risk_coverage(confidence: np.ndarray, correct: np.ndarray, points: int = 400) -> tuple[np.ndarray, np.ndarray]:
    """Coverage k/n and selective risk E[errors among the k most confident]/k at ``points`` coverages, from the
    tie-aware curve of :func:`metacal.metrics.selective.risk_coverage_from_confidence` (tied confidences are
    accepted together): the error count is exact at the end of each group of ties and linear inside it, its
    expectation when ties are broken at random (label smoothing caps many confidences at one value)."""
    import torch

    from metacal.metrics.selective import risk_coverage_from_confidence

    curve = risk_coverage_from_confidence(torch.as_tensor(confidence, dtype=torch.float64),
                                          torch.as_tensor(correct, dtype=torch.float64))
    ends = curve.coverage.numpy() * len(confidence)  # k at the end of each group of ties
    k = np.unique(np.linspace(1, len(confidence), points).astype(int))
    errors = np.interp(k, np.r_[0.0, ends], np.r_[0.0, curve.risk.numpy() * ends])
    return k / len(confidence), errors / k


def plot_risk_coverage(curves: Mapping[int, Mapping[str, tuple[np.ndarray, np.ndarray]]], path: Path) -> Path:
    """One panel per severity: selective risk (%) against coverage, one line per row."""
    from cycler import cycler
    from matplotlib import colormaps

    fig = Figure(figsize=(6 * len(curves), 4.2))
    for i, (severity, rows) in enumerate(curves.items()):
        ax = fig.add_subplot(1, len(curves), i + 1)
        ax.set_prop_cycle(cycler(color=colormaps["tab20"].colors) + cycler(linestyle=["-", "--"] * 10))
        for label, (conf, correct) in rows.items():
            coverage, risk = risk_coverage(conf, correct)
            ax.plot(coverage, 100 * risk, label=label, linewidth=1.2)
        ax.set_title("clean test set" if severity == 0 else f"severity {severity}, held-out families pooled")
        ax.set_xlabel("coverage (most confident first)")
        ax.set_ylabel("selective risk (%)")
        ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return _save(fig, path)


def plot_reliability_panels(panels: Mapping[str, tuple[np.ndarray, np.ndarray]], path: Path,
                            num_bins: int = 15) -> Path:
    """One reliability diagram per panel from top-label confidence and correctness: accuracy per equal-width
    confidence bin (bars) against the diagonal, the panel's ECE in its title."""
    import torch

    from metacal.metrics.binning import bin_statistics
    from metacal.metrics.calibration import calibration_error_from_confidence

    fig = Figure(figsize=(3.2 * len(panels), 3.4))
    for i, (title, (conf, correct)) in enumerate(panels.items()):
        ax = fig.add_subplot(1, len(panels), i + 1)
        c, k = torch.as_tensor(conf, dtype=torch.float64), torch.as_tensor(correct, dtype=torch.float64)
        stats = bin_statistics(c, k, num_bins)  # the ECE-15 bins of metacal.metrics, equal width
        ece = float(calibration_error_from_confidence(c, k, num_bins))
        shown = stats.nonempty.numpy()
        ax.bar(stats.edges[:-1].numpy()[shown], stats.accuracy.numpy()[shown], width=1.0 / num_bins, align="edge",
               alpha=0.7, edgecolor="k", linewidth=0.4)
        ax.plot([0, 1], [0, 1], "k--", linewidth=0.8)
        ax.set_title(f"{title}\nECE {100 * ece:.2f}%", fontsize=8)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("confidence", fontsize=8)
        if i == 0:
            ax.set_ylabel("accuracy", fontsize=8)
    return _save(fig, path)


def sample_figures(evaluated: Sequence, suite: str, picked: Mapping[object, str] | None, out: Path) -> dict[str, Path]:
    """The risk–coverage plot (severities 0 and 3, each method raw: TS keeps the ranking, so it keeps the curve)
    and the reliability grid at severity 3 (:data:`RELIABILITY_ROWS`, then the grid pick), seeds pooled, from
    every run's samples file; ``picked`` maps a seed to the grid pick's method. {} when a run has no samples file
    (evaluated before they were written)."""
    from metacal.report.labels import method_label
    from metacal.shift.samples import load_samples, samples_path

    paths = [samples_path(e.run.path, suite) for e in evaluated]
    if not paths or not all(p.is_file() for p in paths):
        return {}
    by_method: dict[str, list] = {}
    for e, path in zip(evaluated, paths):
        by_method.setdefault(e.run.method, []).append((e.name, load_samples(path)))
    specs = {e.run.method: e.run.spec for e in evaluated}  # what each method trained: its label (Focal γ = 2)
    groups = {method_label(m, specs[m]): [s for _, s in runs] for m, runs in by_method.items()}
    if picked:
        groups["Grid pick"] = [s for m, runs in by_method.items() for name, s in runs if picked.get(name) == m]
    curves = {sev: {label: c for label, samples in groups.items() if (c := pooled(samples, sev, "uncalibrated"))}
              for sev in (0, 3)}
    made = {"risk_coverage": plot_risk_coverage(curves, out.with_name(f"{out.stem}_risk_coverage.png"))}
    panels = {}
    for method, column, label in RELIABILITY_ROWS:
        runs = [s for _, s in by_method.get(method, [])]
        if runs and (c := pooled(runs, 3, column)) is not None:
            panels[label] = c
    if picked and (c := pooled(groups["Grid pick"], 3, "uncalibrated")) is not None:
        panels["Grid pick"] = c
    if panels:
        made["reliability_sev3"] = plot_reliability_panels(panels, out.with_name(f"{out.stem}_reliability_sev3.png"))
    return made
