"""Reliability diagram: per-bin accuracy bars, the gap to the diagonal shaded, a confidence histogram below,
ECE and MCE (equal width, ``num_bins``) in the title.

Drawn on a ``Figure`` with the Agg canvas attached directly (``FigureCanvasAgg``): headless, no pyplot state,
and the process-wide matplotlib backend is left alone (importing this module does not switch it).
"""

from __future__ import annotations

from pathlib import Path

import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from metacal.metrics.binning import bin_statistics
from metacal.metrics.calibration import calibration_error_from_confidence
from metacal.metrics.inputs import check_probs_labels, top_label


def plot_reliability(
    probs: torch.Tensor,
    labels: torch.Tensor,
    num_bins: int = 15,
    path: str | Path | None = None,
    title: str | None = None,
) -> Figure:
    """Draw the top-label reliability diagram of N×K ``probs``; write a PNG to ``path`` if given."""
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
