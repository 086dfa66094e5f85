"""Histogram binning: hand table, ECE ≈ 0 on the fitting set, one-vs-rest renormalisation, state_dict."""

import pytest
import torch

import metacal.metrics as M
from metacal.posthoc import HistogramBinning


def overconfident(n=3000, k=10, seed=0, sharpen=2.5):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, k, generator=g, dtype=torch.float64) * 2
    labels = torch.multinomial(z.softmax(1), 1, generator=g).squeeze(1)
    return (z * sharpen).softmax(1), labels


def test_top_label_hand_table():
    # K = 2, M = 2 bins (0,.5] and (.5,1]. Top confidences: .6 ✓, .7 ✗, .9 ✓, .5 (tie → class 0) ✓
    #  bin0 {.5 ✓}: η0 = 1;  bin1 {.6 ✓, .7 ✗, .9 ✓}: η1 = 2/3
    probs = torch.tensor([[0.6, 0.4], [0.3, 0.7], [0.9, 0.1], [0.5, 0.5]], dtype=torch.float64)
    labels = torch.tensor([0, 0, 0, 0])
    hb = HistogramBinning(num_bins=2, mode="top").fit(probs, labels)
    torch.testing.assert_close(hb.bin_values, torch.tensor([1.0, 2 / 3], dtype=torch.float64))
    out = hb.transform(torch.tensor([[0.2, 0.8], [0.55, 0.45]], dtype=torch.float64))
    # row 0: top = class 1 (.8 → bin1) → [1/3, 2/3];  row 1: top class 0, .55 → bin1 → [2/3, 1/3]
    torch.testing.assert_close(out, torch.tensor([[1 / 3, 2 / 3], [2 / 3, 1 / 3]], dtype=torch.float64))


def test_empty_bin_keeps_confidence_and_uniform_split_keeps_prediction():
    # M = 4, fitted only on confidences in (.75, 1] (η3 = .5); bins 0–2 empty → unchanged
    probs = torch.tensor([[0.8, 0.1, 0.1], [0.9, 0.05, 0.05]], dtype=torch.float64)
    hb = HistogramBinning(num_bins=4, mode="top").fit(probs, torch.tensor([0, 1]))
    assert torch.isnan(hb.bin_values[:3]).all() and hb.bin_values[3].item() == 0.5
    test = torch.tensor([[0.6, 0.3, 0.1], [0.8, 0.2, 0.0]], dtype=torch.float64)
    out = hb.transform(test)
    # row 0 (.6 in empty bin2): unchanged
    torch.testing.assert_close(out[0], test[0])
    # row 1 (.8 → η = .5): proportional split of .5 would be [.5, .5, 0] — ties the prediction — it does not
    # exceed .5, so it is kept: [.5, .5, 0]
    torch.testing.assert_close(out[1], torch.tensor([0.5, 0.5, 0.0], dtype=torch.float64))
    # η = .4 case: proportional split [.4, .6·(.2/.2)=.6, 0] would overtake → uniform [.4, .3, .3]
    hb.load_state_dict({"mode": "top", "num_bins": 4, "bin_values": torch.tensor([float("nan")] * 3 + [0.4])})
    torch.testing.assert_close(hb.transform(test[1:]), torch.tensor([[0.4, 0.3, 0.3]], dtype=torch.float64))


def test_top_label_ece_is_zero_on_fitting_set():
    probs, labels = overconfident()
    before = M.ece(probs, labels).item()
    hb = HistogramBinning(15, "top").fit(probs, labels)
    out = hb.transform(probs)
    assert before > 0.1
    # every bin's new confidence is its accuracy; the only rows that can differ are those in a bin with
    # η_b < 1/K, whose prediction cannot be kept (a few low-confidence rows here) → ECE ≈ 0, not exactly 0
    eta = hb.calibrate_confidence(probs.max(1).values)
    kept = eta > 1.0 / probs.shape[1]
    assert kept.float().mean() > 0.97
    assert torch.equal(out.argmax(1)[kept], probs.argmax(1)[kept])
    assert M.ece(out, labels).item() < 1e-3
    assert M.ece(out[kept], labels[kept]).item() < 0.02  # residual only from re-binning the kept subset
    torch.testing.assert_close(out.sum(1), torch.ones(len(out), dtype=torch.float64))
    # with fewer classes (all η_b > 1/K) the fitting-set ECE is exactly 0 up to rounding
    p4, y4 = overconfident(k=3, seed=0)
    hb4 = HistogramBinning(15, "top").fit(p4, y4)
    assert (hb4.bin_values[~torch.isnan(hb4.bin_values)] > 1 / 3).all()
    assert M.ece(hb4.transform(p4), y4).item() < 1e-12


def test_one_vs_rest_renormalises_and_reduces_classwise_ece():
    probs, labels = overconfident(seed=1)
    hb = HistogramBinning(15, "ovr").fit(probs, labels)
    out = hb.transform(probs)
    torch.testing.assert_close(out.sum(1), torch.ones(len(out), dtype=torch.float64))
    assert M.classwise_ece(out, labels).item() < 0.5 * M.classwise_ece(probs, labels).item()
    # hand check of one class-bin: η_{b,c} = fraction of label c among samples with p_c in bin b
    c, b = 3, 14
    in_bin = (probs[:, c] > 14 / 15) & (probs[:, c] <= 1.0)
    assert hb.bin_values[c, b].item() == pytest.approx((labels[in_bin] == c).double().mean().item(), abs=1e-12)


def test_state_dict_round_trip():
    probs, labels = overconfident(n=500, seed=2)
    for mode in ("top", "ovr"):
        hb = HistogramBinning(10, mode).fit(probs, labels)
        other = HistogramBinning(mode="top")
        other.load_state_dict(hb.state_dict())
        assert other.mode == mode and other.num_bins == 10
        torch.testing.assert_close(other.transform(probs), hb.transform(probs), equal_nan=True)
    with pytest.raises(RuntimeError, match="before fit"):
        HistogramBinning().transform(probs)
    with pytest.raises(ValueError, match="mode"):
        HistogramBinning(mode="isotonic")
