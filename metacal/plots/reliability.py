"""Reliability diagram: per-bin accuracy bars, the gap to the diagonal shaded, a confidence histogram below,
ECE and MCE (equal width, ``num_bins``) in the title. Optional, on the same axes:

* ``bands``: a percentile bootstrap interval on each non-empty bin's accuracy (error bars at the bin centres;
  ``metacal.metrics.bootstrap.bin_accuracy_bands``).
* ``smooth``: the smooth reliability curve of Błasiok & Nakkiran 2023 as relplot computes it —
  ``relplot.prepare_rel_diagram(conf, correct, plot_confidence_band=False)["mesh"/"mu"]``, the kernel
  regression of correctness on confidence at smECE's bandwidth σ* (deterministic; relplot's own bagged band is
  not drawn) — with smECE in its label. Drawn only where relplot's density of the confidences is at least
  ``SMOOTH_MIN_DENSITY`` of its maximum: the kernel regression extrapolates into empty stretches, which relplot's
  own plot hides by drawing the curve with a width proportional to that density.

Drawn on a ``Figure`` with the Agg canvas attached directly (``FigureCanvasAgg``): headless, no pyplot state,
and the process-wide matplotlib backend is left alone. matplotlib is imported on the first drawing, so the
trainer and ``metacal.evaluate`` import this module without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from metacal.metrics.binning import bin_statistics
from metacal.metrics.bootstrap import BootstrapSpec, bin_accuracy_bands
from metacal.metrics.calibration import calibration_error_from_confidence
from metacal.metrics.inputs import check_probs_labels, top_label

BAND_LABEL = "{level:g}% bootstrap interval (B = {bootstrap})"
SMOOTH_LABEL = "smooth (relplot), smECE {smece:.2f}%"
SMOOTH_MIN_DENSITY = 0.01

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def plot_reliability(
    probs: torch.Tensor,
    labels: torch.Tensor,
    num_bins: int = 15,
    path: str | Path | None = None,
    title: str | None = None,
    bands: BootstrapSpec | None = None,
    smooth: bool = False,
) -> Figure:
    """Draw the top-label reliability diagram of N×K ``probs``; write a PNG to ``path`` if given. ``bands`` adds
    bootstrap intervals on the bin accuracies, ``smooth`` relplot's smooth reliability curve (module docstring)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    check_probs_labels(probs, labels)
    conf, _, correct = top_label(probs.detach(), labels.to(probs.device))
    stats = bin_statistics(conf, correct, num_bins, "width")
    ece = float(calibration_error_from_confidence(conf, correct, num_bins, "width", "l1"))
    mce = float(calibration_error_from_confidence(conf, correct, num_bins, "width", "max"))

    edges = stats.edges.double().cpu().numpy()
    lefts, width = edges[:-1], edges[1] - edges[0]
    centres = lefts + width / 2
    keep = stats.nonempty.cpu().numpy()
    acc = stats.accuracy.double().cpu().nan_to_num(0.0).numpy()
    mean_conf = stats.mean_confidence.double().cpu().nan_to_num(0.0).numpy()
    counts = stats.count.cpu().numpy()

    # Figure() + Agg canvas: no pyplot global state, nothing left open between calls.
    fig = Figure(figsize=(5.0, 6.2), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    top.bar(lefts[keep], acc[keep], width=width, align="edge", color="#3b75af", edgecolor="black",
            linewidth=0.6, label="accuracy")  # fmt: skip
    gap_bottom = [min(a, c) for a, c in zip(acc[keep], mean_conf[keep])]
    gap_height = [abs(a - c) for a, c in zip(acc[keep], mean_conf[keep])]
    top.bar(lefts[keep], gap_height, bottom=gap_bottom, width=width, align="edge", color="#d62728",
            alpha=0.35, edgecolor="#d62728", hatch="//", linewidth=0.6, label="gap to mean confidence")  # fmt: skip
    top.plot([0, 1], [0, 1], linestyle="--", color="gray", linewidth=1.0, label="perfect calibration")
    if bands is not None:
        lower, upper = (v.cpu().numpy() for v in bin_accuracy_bands(probs, labels, num_bins, bands))
        top.errorbar(centres[keep], acc[keep], yerr=[acc[keep] - lower[keep], upper[keep] - acc[keep]], fmt="none",
                     ecolor="black", elinewidth=1.0, capsize=2.5,
                     label=BAND_LABEL.format(level=100 * bands.level, bootstrap=bands.bootstrap))
    if smooth:
        curve = smooth_curve(conf, correct)
        shown = curve["density"] >= SMOOTH_MIN_DENSITY * curve["density"].max()
        top.plot(curve["mesh"], np.where(shown, curve["mu"], np.nan), color="#ff7f0e", linewidth=1.6,
                 label=SMOOTH_LABEL.format(smece=100 * curve["ce"]))
    top.set_xlim(0, 1)
    top.set_ylim(0, 1)
    top.set_ylabel("accuracy")
    top.legend(loc="upper left", fontsize=8)
    heading = f"ECE {100 * ece:.2f}%   MCE {100 * mce:.2f}%   ({num_bins} bins, N={conf.shape[0]})"
    top.set_title(heading if title is None else f"{title}\n{heading}", fontsize=10)

    bottom.bar(centres, counts, width=width, color="#7f7f7f", edgecolor="black", linewidth=0.6)
    bottom.axvline(float(conf.double().mean()), color="#d62728", linestyle="--", linewidth=1.0,
                   label="mean confidence")  # fmt: skip
    bottom.axvline(float(correct.double().mean()), color="#2ca02c", linestyle=":", linewidth=1.2,
                   label="accuracy")  # fmt: skip
    bottom.set_xlabel("confidence")
    if counts.max() > 20 * max(1, counts[keep].min()):  # one dominant bin (typical of trained nets)
        bottom.set_yscale("log")
        bottom.set_ylabel("count (log)")
    else:
        bottom.set_ylabel("count")
    bottom.legend(loc="upper left", fontsize=8)
    if path is not None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format="png")
    return fig


def smooth_curve(conf: torch.Tensor, correct: torch.Tensor) -> dict:
    """relplot's smooth reliability curve of top-label confidences and 0/1 correctness: ``mesh`` (x), ``mu``
    (E[correct | confidence] on the mesh), ``ce`` (smECE) — ``relplot.prepare_rel_diagram`` without its bagging."""
    import relplot

    f = conf.detach().double().cpu().numpy().clip(0.0, 1.0)
    y = correct.detach().double().cpu().numpy()
    return relplot.prepare_rel_diagram(f, y, plot_confidence_band=False, report_CE_std=False)
