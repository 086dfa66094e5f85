"""The ``gamma_oracle`` figure: ECE and error against the fixed focal γ, and FLγ-SECE's learned γ per epoch
against the best fixed γ chosen on validation, the bar a meta-learned γ must reach."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np
from matplotlib.figure import Figure

from .page import save_figure


def _grid_panel(ax, grid: Sequence[dict[str, Any]], meta: dict[str, Any], best: dict[str, Any], metric: str,
                label: str) -> None:
    """Mean ± std over seeds of ``<metric>_val`` and ``<metric>_test`` per γ; FLγ-SECE as dotted lines."""
    gammas = np.array([s["gamma"] for s in grid], dtype=float)
    for split, colour in (("val", "tab:blue"), ("test", "tab:orange")):
        mean = np.array([s[f"{metric}_{split}"] for s in grid], dtype=float) * 100
        std = np.nan_to_num(np.array([s[f"{metric}_{split}_std"] for s in grid], dtype=float)) * 100
        ax.errorbar(gammas, mean, yerr=std, marker="o", markersize=4, capsize=3, color=colour,
                    label=f"focal, fixed γ ({split})")
        ax.axhline(meta[f"{metric}_{split}"] * 100, color=colour, linestyle=":", label=f"FLγ-SECE ({split})")
    ax.axvline(best["gamma"], color="grey", linestyle="--", linewidth=1, label=f"best γ on val = {best['gamma']:g}")
    ax.set_xlabel("fixed focal γ")
    ax.set_ylabel(label)
    ax.grid(alpha=0.3)


def oracle_figure(summaries: Sequence[dict[str, Any]], best: dict[str, Any], meta: dict[str, Any],
                  trajectory: Sequence[dict[str, float]], path: Path,
                  per_seed: Sequence[Sequence[dict[str, float]]] = ()) -> Path:
    """Three panels: ECE vs γ, error vs γ, FLγ-SECE's γ per epoch (band: mean within-epoch std)."""
    grid = [s for s in summaries if s["gamma"] is not None]
    fig = Figure(figsize=(15, 4.2))
    axes = [fig.add_subplot(1, 3, i + 1) for i in range(3)]
    _grid_panel(axes[0], grid, meta, best, "ece", "ECE-15 (%)")
    _grid_panel(axes[1], grid, meta, best, "error", "error (%)")
    axes[0].legend(fontsize=7)
    ax = axes[2]
    for traj in per_seed:
        ax.plot([p["epoch"] for p in traj], [p["gamma_mean"] for p in traj], color="tab:green", alpha=0.35,
                linewidth=0.8)
    epochs = np.array([p["epoch"] for p in trajectory], dtype=float)
    mean = np.array([p["gamma_mean"] for p in trajectory], dtype=float)
    std = np.nan_to_num(np.array([p["gamma_std"] for p in trajectory], dtype=float))
    ax.plot(epochs, mean, color="tab:green", marker="o", markersize=3, label="FLγ-SECE γ (mean over seeds)")
    ax.fill_between(epochs, mean - std, mean + std, color="tab:green", alpha=0.2, linewidth=0,
                    label="± within-epoch std")
    ax.axhline(best["gamma"], color="grey", linestyle="--", label=f"best fixed γ on val = {best['gamma']:g}")
    ax.set_xlabel("epoch")
    ax.set_ylabel("training γ")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return save_figure(fig, path)
