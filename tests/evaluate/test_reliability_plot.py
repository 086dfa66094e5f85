"""The reliability diagram behind ``--plot``: bars = per-bin accuracies, title = ECE/MCE, PNG written."""

import pytest
import torch
from matplotlib.figure import Figure

import metacal.metrics as M
from metacal.report.reliability import plot_reliability


def test_bars_title_and_png(tmp_path):
    # hand example (K = 2, 2 bins): bin0 (0,.5] {.5 ✓} → accuracy 1; bin1 (.5,1] {.8 ✓,.6 ✗,.7 ✓} → 2/3
    # ECE = .15, MCE = .5 (see tests/metrics/test_binned_tables.py)
    probs = torch.tensor([[0.8, 0.2], [0.6, 0.4], [0.3, 0.7], [0.5, 0.5]], dtype=torch.float64)
    labels = torch.tensor([0, 1, 1, 0])
    path = tmp_path / "sub" / "rel.png"
    fig = plot_reliability(probs, labels, num_bins=2, path=path, title="hand")
    assert isinstance(fig, Figure)
    top, bottom = fig.axes
    assert "ECE 15.00%" in top.get_title() and "MCE 50.00%" in top.get_title() and "hand" in top.get_title()
    accuracy_bars = top.containers[0]
    assert [b.get_height() for b in accuracy_bars] == pytest.approx([1.0, 2 / 3])
    gap_bars = top.containers[1]  # shaded from min(acc, conf) to max(acc, conf): heights .5 and 1/30
    assert [b.get_height() for b in gap_bars] == pytest.approx([0.5, 1 / 30])
    assert [b.get_height() for b in bottom.containers[0]] == [1, 3]  # confidence histogram (counts)
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_empty_bins_drawn_as_nothing_and_title_matches_metrics():
    g = torch.Generator().manual_seed(0)
    probs = (torch.randn(500, 4, generator=g) * 3).softmax(1)
    labels = torch.randint(0, 4, (500,), generator=g)
    fig = plot_reliability(probs, labels, num_bins=15)
    stats = M.bin_statistics(*M.top_label(probs, labels)[::2], num_bins=15)
    assert len(fig.axes[0].containers[0]) == int(stats.nonempty.sum())  # bins with max prob < 1/4 are empty
    assert f"ECE {100 * M.ece(probs, labels).item():.2f}%" in fig.axes[0].get_title()
