"""metacal.plots.reliability: the reliability diagram (trainer, ``evaluate --plot``, reports): bars = per-bin
accuracies, title = ECE/MCE, PNG written."""

import pytest
import torch
from matplotlib.figure import Figure

import metacal.metrics as M
from metacal.plots.reliability import plot_reliability


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


def _calibrated(n, seed, sharpen=1.0):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, 5, generator=g, dtype=torch.float64) * 1.5
    labels = torch.multinomial(z.softmax(1), 1, generator=g).squeeze(1)
    return (sharpen * z).softmax(1), labels


def test_bootstrap_bands_bracket_the_bin_accuracy_with_binomial_width():
    probs, labels = _calibrated(3000, seed=1)
    spec = M.BootstrapSpec(400, 0.9, seed=0)
    fig = plot_reliability(probs, labels, num_bins=10, bands=spec)
    stats = M.bin_statistics(*M.top_label(probs, labels)[::2], num_bins=10)
    keep = stats.nonempty
    lower, upper = M.bin_accuracy_bands(probs, labels, 10, spec)
    acc, count = stats.accuracy[keep], stats.count[keep].double()
    assert torch.isnan(lower[~keep]).all() and torch.isnan(upper[~keep]).all()
    assert bool((lower[keep] <= acc).all()) and bool((acc <= upper[keep]).all())
    # a bin's accuracy is a proportion: its 90% interval is about 2·1.645·sqrt(A(1 − A)/n_b) wide
    big = count >= 100
    expected = 2 * 1.645 * (acc * (1 - acc) / count).sqrt()
    ratio = (upper[keep] - lower[keep])[big] / expected[big]
    assert int(big.sum()) >= 4 and bool(((ratio > 0.8) & (ratio < 1.2)).all()), ratio
    # what is drawn: one error bar per non-empty bin, from lower to upper at the bin centre
    band = next(c for c in fig.axes[0].containers if c.get_label().startswith("90% bootstrap interval (B = 400)"))
    segments = band.lines[2][0].get_segments()
    centres = (stats.edges[:-1] + 0.05)[keep]
    assert len(segments) == int(keep.sum())
    for seg, x, lo, hi in zip(segments, centres, lower[keep], upper[keep]):
        assert seg[0][0] == pytest.approx(float(x)) and seg[1][0] == pytest.approx(float(x))
        assert sorted([seg[0][1], seg[1][1]]) == pytest.approx([float(lo), float(hi)], abs=1e-12)


@pytest.mark.parametrize("sharpen", [1.0, 3.0])
def test_smooth_curve_is_relplots(sharpen):
    import numpy as np
    import relplot

    probs, labels = _calibrated(2000, seed=2, sharpen=sharpen)
    fig = plot_reliability(probs, labels, num_bins=15, smooth=True)
    line = next(ln for ln in fig.axes[0].lines if ln.get_label().startswith("smooth (relplot)"))
    p, y = probs.numpy(), labels.numpy()
    f, correct = p.max(axis=1), (p.argmax(axis=1) == y).astype(float)  # top label, computed independently
    ref = relplot.prepare_rel_diagram(f, correct, plot_confidence_band=False, report_CE_std=False)
    np.testing.assert_allclose(line.get_xdata(), ref["mesh"], rtol=0, atol=1e-15)
    shown = ref["density"] >= 0.01 * ref["density"].max()  # where relplot's density is ≥ 1 % of its peak
    assert shown.mean() > 0.3 and np.isnan(line.get_ydata()[~shown]).all()
    if sharpen == 1.0:  # K = 5: confidences ≥ 1/5, nothing to smooth near 0 — hidden, not extrapolated
        assert not shown[ref["mesh"] < 0.1].any()
    np.testing.assert_allclose(line.get_ydata()[shown], ref["mu"][shown], rtol=0, atol=1e-12)
    assert f"smECE {100 * relplot.smECE(f, correct):.2f}%" in line.get_label()
    # the curve is E[correct | confidence]: near the diagonal where the data are, for the calibrated model only
    weight = ref["density"] / ref["density"].sum()
    off_diagonal = float((weight * np.abs(ref["mu"] - ref["mesh"])).sum())
    assert (off_diagonal < 0.03) if sharpen == 1.0 else (off_diagonal > 0.1), off_diagonal
    assert M.smece(probs, labels) == pytest.approx(float(ref["ce"]), abs=1e-12)
