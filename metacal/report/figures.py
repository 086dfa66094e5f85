"""Report figures (PNG), after Wang & Golebiowski 2024: reliability diagrams per method (Fig. 2), ECE/MCE vs number of bins
(Fig. 5), error vs ECE with the Pareto front (Fig. 10), test ECE per epoch (Fig. 3a–b), γ mean/std per epoch
on the test set (Fig. 3c–d). Data preparation (``pareto_front``, ``epoch_series``) is separate from drawing.

Drawing uses matplotlib's object API (``Figure``), so no global pyplot state is touched.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from metacal.plots.reliability import plot_reliability
from metacal.run.layout import Run

Series = tuple[np.ndarray, np.ndarray, np.ndarray]  # (x, mean, std) — std NaN where one run only


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the non-dominated points when both coordinates are minimised, sorted by x then y.

    Point i is dominated if some j has x_j <= x_i and y_j <= y_i with at least one strict inequality.
    Points with NaN never enter the front.
    """
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    finite = np.isfinite(pts).all(axis=1)
    le = (pts[None, :, :] <= pts[:, None, :]).all(axis=2)  # le[i, j]: point j <= point i in both
    lt = (pts[None, :, :] < pts[:, None, :]).any(axis=2)
    dominated = (le & lt & finite[None, :]).any(axis=1)
    front = [i for i in range(len(pts)) if finite[i] and not dominated[i]]
    return sorted(front, key=lambda i: (pts[i, 0], pts[i, 1]))


def epoch_series(runs: Sequence[Run], split: str, key: str) -> Series | None:
    """Mean and sample std over runs of ``history[epoch][split][key]`` per epoch (epochs any run has).

    None when no run records the key (e.g. γ statistics of a run without γ-Net).
    """
    per_epoch: dict[float, list[float]] = {}
    for run in runs:
        for rec in run.history:
            values = rec.get(split)  # None for epochs where the trainer skipped the test set
            value = values.get(key) if isinstance(values, dict) else None
            epoch = rec.get("epoch")
            if isinstance(value, (int, float)) and isinstance(epoch, (int, float)) and math.isfinite(value):
                per_epoch.setdefault(float(epoch), []).append(float(value))
    if not per_epoch:
        return None
    epochs = np.array(sorted(per_epoch))
    mean = np.array([np.mean(per_epoch[e]) for e in epochs])
    std = np.array([np.std(per_epoch[e], ddof=1) if len(per_epoch[e]) > 1 else math.nan for e in epochs])
    return epochs, mean, std


def _save(fig: Figure, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    return path


def _band(ax, x: np.ndarray, mean: np.ndarray, std: np.ndarray, label: str, scale: float = 1.0, marker=None):
    line, = ax.plot(x, mean * scale, label=label, marker=marker, markersize=3)
    if np.isfinite(std).any():
        s = np.nan_to_num(std, nan=0.0)
        ax.fill_between(x, (mean - s) * scale, (mean + s) * scale, alpha=0.2, color=line.get_color(), linewidth=0)


def plot_reliability_grid(
    entries: Sequence[tuple[str, np.ndarray, np.ndarray]], path: Path, num_bins: int = 15, ncols: int = 4
) -> Path:
    """One reliability diagram per (title, probs, labels), drawn by metacal.plots.reliability.plot_reliability
    and tiled into one PNG."""
    import torch

    if not entries:
        raise ValueError("no predictions to draw reliability diagrams from")
    images = []
    for title, probs, labels in entries:
        fig = plot_reliability(torch.as_tensor(probs), torch.as_tensor(labels), num_bins=num_bins, title=title)
        fig.canvas.draw()
        images.append(np.asarray(fig.canvas.buffer_rgba()).copy())
    ncols = min(ncols, len(images))
    nrows = math.ceil(len(images) / ncols)
    h, w = images[0].shape[:2]
    grid = Figure(figsize=(ncols * w / 110, nrows * h / 110))
    for i, img in enumerate(images):
        ax = grid.add_subplot(nrows, ncols, i + 1)
        ax.imshow(img)
        ax.set_axis_off()
    grid.subplots_adjust(left=0, right=1, bottom=0, top=1, wspace=0.02, hspace=0.02)
    return _save(grid, path)


def plot_vs_bins(curves: Mapping[str, Mapping[str, Series]], path: Path) -> Path:
    """ECE (left) and MCE (right), in %, against the number of bins (log x), one line per method (Fig. 5).
    ``curves[label] = {"ece": (bins, mean, std), "mce": (...)}``."""
    fig = Figure(figsize=(11, 4))
    for j, key in enumerate(("ece", "mce")):
        ax = fig.add_subplot(1, 2, j + 1)
        for label, series in curves.items():
            _band(ax, *series[key], label=label, scale=100.0, marker="o")
        ax.set_xscale("log")
        ax.set_xlabel("number of bins")
        ax.set_ylabel(f"test {key.upper()} (%)")
        ax.grid(alpha=0.3)
    fig.axes[0].legend(fontsize=7)
    return _save(fig, path)


def plot_pareto(points: Mapping[str, tuple[float, float, float, float]], path: Path) -> Path:
    """Test error vs test ECE (%), mean ± std per method, with the Pareto front (Fig. 10).
    ``points[label] = (error_mean, error_std, ece_mean, ece_std)`` in fractions."""
    labels = list(points)
    xy = [(points[k][0], points[k][2]) for k in labels]
    front = pareto_front(xy)
    fig = Figure(figsize=(6, 4.5))
    ax = fig.add_subplot(1, 1, 1)
    for k in labels:
        em, es, cm, cs = points[k]
        ax.errorbar(em * 100, cm * 100, xerr=np.nan_to_num(es) * 100, yerr=np.nan_to_num(cs) * 100, fmt="o",
                    capsize=2, label=k)
        ax.annotate(k, (em * 100, cm * 100), fontsize=7, xytext=(3, 3), textcoords="offset points")
    if front:
        fx = [xy[i][0] * 100 for i in front]
        fy = [xy[i][1] * 100 for i in front]
        ax.step(fx, fy, where="post", color="k", linestyle="--", linewidth=1, marker="o", markersize=11,
                markerfacecolor="none", label="Pareto front")
    ax.set_xlabel("test error (%)")
    ax.set_ylabel("test ECE (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, path)


def plot_epoch_curves(series: Mapping[str, Series], path: Path, ylabel: str, scale: float = 100.0) -> Path:
    """One line (mean over seeds, ±std band) per method against the epoch (Fig. 3a–b)."""
    from cycler import cycler
    from matplotlib import colormaps

    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot(1, 1, 1)
    # up to 20 methods with distinct colours; solid/dashed alternate so neighbours in the legend differ twice
    ax.set_prop_cycle(cycler(color=colormaps["tab20"].colors) + cycler(linestyle=["-", "--"] * 10))
    for label, s in series.items():
        _band(ax, *s, label=label, scale=scale)
    ax.set_xlabel("epoch")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))  # outside: the curves stay visible
    return _save(fig, path)


def plot_gamma(mean_series: Mapping[str, Series], std_series: Mapping[str, Series], path: Path) -> Path:
    """γ-Net runs: mean (left) and std (right) of the per-sample γ on the test set per epoch (Fig. 3c–d)."""
    fig = Figure(figsize=(11, 4))
    for j, (name, series) in enumerate((("γ mean", mean_series), ("γ std", std_series))):
        ax = fig.add_subplot(1, 2, j + 1)
        for label, s in series.items():
            _band(ax, *s, label=label)
        ax.set_xlabel("epoch")
        ax.set_ylabel(f"test {name}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return _save(fig, path)
