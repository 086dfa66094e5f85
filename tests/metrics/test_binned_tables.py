"""Hand-derived bin tables for tiny inputs: every binned metric, with ties, empty bins, confidence 0 and 1.

All expected numbers are worked out by hand in the comments (bins are (lower, upper], 0 → first bin,
1.0 → top bin); the values chosen are exact binary fractions where they sit on bin edges.
"""

import math

import pytest
import torch

import metacal.metrics as M

# Shared top-label example, N = 8.
#   c = 0.0  0.25 0.25 0.5  0.6  1.0  1.0  0.9
#   a = 0    1    0    1    0    1    0    1
CONF = torch.tensor([0.0, 0.25, 0.25, 0.5, 0.6, 1.0, 1.0, 0.9], dtype=torch.float64)
CORR = torch.tensor([0, 1, 0, 1, 0, 1, 0, 1], dtype=torch.float64)


def test_equal_width_four_bins_table():
    # M = 4, edges 0, .25, .5, .75, 1:
    #  bin0 (0,.25] + the 0: {0.0, .25, .25}: n=3, C = .5/3 = 1/6, A = 1/3, gap 1/6
    #  bin1 (.25,.5]: {.5}: n=1, C = .5, A = 1, gap .5   (0.5 on the edge goes to the LOWER bin)
    #  bin2 (.5,.75]: {.6}: n=1, C = .6, A = 0, gap .6
    #  bin3 (.75,1]: {1, 1, .9}: n=3, C = 2.9/3, A = 2/3, gap 0.3
    s = M.bin_statistics(CONF, CORR, num_bins=4)
    assert s.edges.tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert s.count.tolist() == [3, 1, 1, 3]
    torch.testing.assert_close(s.mean_confidence, torch.tensor([1 / 6, 0.5, 0.6, 2.9 / 3], dtype=torch.float64))
    torch.testing.assert_close(s.accuracy, torch.tensor([1 / 3, 1.0, 0.0, 2 / 3], dtype=torch.float64))
    # ECE = 3/8·1/6 + 1/8·.5 + 1/8·.6 + 3/8·.3 = .0625 + .0625 + .075 + .1125 = .3125
    ce = M.calibration_error_from_confidence
    assert ce(CONF, CORR, 4, "width", "l1").item() == pytest.approx(0.3125, abs=1e-12)
    # MCE = max(1/6, .5, .6, .3) = .6
    assert ce(CONF, CORR, 4, "width", "max").item() == pytest.approx(0.6, abs=1e-12)
    # RMSCE = sqrt(3/8·1/36 + 1/8·.25 + 1/8·.36 + 3/8·.09) = sqrt(.0104166.. + .03125 + .045 + .03375)
    expected = math.sqrt(3 / 8 / 36 + 0.25 / 8 + 0.36 / 8 + 3 / 8 * 0.09)
    assert expected == pytest.approx(0.3470110, abs=1e-7)
    assert ce(CONF, CORR, 4, "width", "l2").item() == pytest.approx(expected, abs=1e-12)


def test_equal_width_empty_bins_are_skipped_and_ignored():
    # M = 8, edges k/8: 0.0 → bin0; .25 → bin1 (.125,.25]; .5 → bin3; .6 → bin4 (.5,.625]; .9, 1, 1 → bin7.
    # Bins 2, 5, 6 are empty.
    #  bin0 {0.0, a=0}: gap 0;  bin1 {.25,.25; a=1,0}: C .25, A .5, gap .25;  bin3 {.5, a=1}: gap .5
    #  bin4 {.6, a=0}: gap .6;  bin7 {1,1,.9; a=1,0,1}: C 2.9/3, A 2/3, gap .3
    s = M.bin_statistics(CONF, CORR, num_bins=8)
    assert s.count.tolist() == [1, 2, 0, 1, 1, 0, 0, 3]
    assert torch.isnan(s.accuracy[[2, 5, 6]]).all() and torch.isnan(s.mean_confidence[[2, 5, 6]]).all()
    # ECE = 1/8·0 + 2/8·.25 + 1/8·.5 + 1/8·.6 + 3/8·.3 = 0 + .0625 + .0625 + .075 + .1125 = .3125
    assert M.calibration_error_from_confidence(CONF, CORR, 8).item() == pytest.approx(0.3125, abs=1e-12)
    # MCE over non-empty bins only: max(0, .25, .5, .6, .3) = .6 (empty bins would give NaN if not ignored)
    assert M.calibration_error_from_confidence(CONF, CORR, 8, norm="max").item() == pytest.approx(0.6, abs=1e-12)


def test_equal_mass_with_ties_table():
    # M = 4, N = 8: bin b holds ranks [2b, 2b+2).
    # Sorted (stable): 0.0(a0) .25(a1) .25(a0) .5(a1) .6(a0) .9(a1) 1(a1) 1(a0)
    # Lowest rank of each tie group: 0 1 1 3 4 5 6 6 → bins 0 0 0 1 2 2 3 3 (the .25 pair stays together in bin0)
    #  bin0 {0, .25, .25}: n3, C 1/6, A 1/3, gap 1/6;   bin1 {.5}: n1, C .5, A 1, gap .5
    #  bin2 {.6, .9}: n2, C .75, A .5, gap .25;          bin3 {1, 1}: n2, C 1, A .5, gap .5
    s = M.bin_statistics(CONF, CORR, num_bins=4, scheme="mass")
    assert s.count.tolist() == [3, 1, 2, 2]
    torch.testing.assert_close(s.mean_confidence, torch.tensor([1 / 6, 0.5, 0.75, 1.0], dtype=torch.float64))
    torch.testing.assert_close(s.accuracy, torch.tensor([1 / 3, 1.0, 0.5, 0.5], dtype=torch.float64))
    # edges: 0, then the largest confidence of each bin, last edge 1
    assert s.edges.tolist() == [0.0, 0.25, 0.5, 0.9, 1.0]
    # ACE = 3/8·1/6 + 1/8·.5 + 2/8·.25 + 2/8·.5 = .0625 + .0625 + .0625 + .125 = .3125
    assert M.calibration_error_from_confidence(CONF, CORR, 4, "mass").item() == pytest.approx(0.3125, abs=1e-12)
    # equal-mass MCE = .5, and the result does not depend on the input order
    perm = torch.tensor([7, 2, 5, 0, 3, 6, 1, 4])
    s2 = M.bin_statistics(CONF[perm], CORR[perm], num_bins=4, scheme="mass")
    assert s2.count.tolist() == [3, 1, 2, 2]
    torch.testing.assert_close(s2.accuracy, s.accuracy)


# Probability example, K = 2, N = 4:
#   p = [.8 .2], [.6 .4], [.3 .7], [.5 .5];  y = 0, 1, 1, 0
PROBS = torch.tensor([[0.8, 0.2], [0.6, 0.4], [0.3, 0.7], [0.5, 0.5]], dtype=torch.float64)
LABELS = torch.tensor([0, 1, 1, 0])


def test_top_label_metrics_on_probs_with_argmax_tie():
    # Top label: c = .8 (pred 0, right), .6 (pred 0, wrong), .7 (pred 1, right), .5 (tie → first index 0, right)
    # M = 2: bin0 (0,.5] {.5 ✓}: gap .5;  bin1 (.5,1] {.8 ✓, .6 ✗, .7 ✓}: C .7, A 2/3, gap 1/30
    # ECE = 1/4·.5 + 3/4·1/30 = .125 + .025 = .15;  MCE = .5
    assert M.ece(PROBS, LABELS, 2).item() == pytest.approx(0.15, abs=1e-12)
    assert M.mce(PROBS, LABELS, 2).item() == pytest.approx(0.5, abs=1e-12)
    # RMSCE = sqrt(1/4·.25 + 3/4·1/900) = sqrt(.0625 + 1/1200)
    assert M.rmsce(PROBS, LABELS, 2).item() == pytest.approx(math.sqrt(0.0625 + 1 / 1200), abs=1e-12)
    # ACE with 2 equal-mass bins: sorted c .5(✓) .6(✗) | .7(✓) .8(✓):
    #  bin0: A = .5, C = .55, gap .05;  bin1: A = 1, C = .75, gap .25 → ACE = 2/4·.05 + 2/4·.25 = .15
    assert M.ace(PROBS, LABELS, 2).item() == pytest.approx(0.15, abs=1e-12)


def test_classwise_ece_table():
    # M = 2 per class (edges 0, .5, 1), CECE = Σ_c Σ_m |Σ hit − Σ p| / (N K), N K = 8
    # class 0: p = .8 .6 .3 .5, hit = 1 0 0 1: bin0 {.3, .5}: |1 − .8| = .2;  bin1 {.8, .6}: |1 − 1.4| = .4
    # class 1: p = .2 .4 .7 .5, hit = 0 1 1 0: bin0 {.2, .4, .5}: |1 − 1.1| = .1;  bin1 {.7}: |1 − .7| = .3
    # CECE = (.2 + .4 + .1 + .3) / 8 = .125
    assert M.classwise_ece(PROBS, LABELS, 2).item() == pytest.approx(0.125, abs=1e-12)


def test_classwise_ece_takes_k_from_probs_width():
    # Same data padded with a third, never-used class of probability 0: K = 3, so the sum .2+.4+.1+.3 = 1.0
    # is divided by N K = 12 (class 2 adds |0 − 0| = 0). max(label)+1 = 2 would give .125 instead.
    probs3 = torch.cat([PROBS, torch.zeros(4, 1, dtype=torch.float64)], dim=1)
    assert M.classwise_ece(probs3, LABELS, 2).item() == pytest.approx(1.0 / 12, abs=1e-12)


def test_classwise_ace_table():
    # R = 2 equal-mass ranges per class, weight 1/(R K) = 1/4 each.
    # class 0: sorted p .3(h0) .5(h1) | .6(h0) .8(h1): |.5 − .4| = .1, |.5 − .7| = .2
    # class 1: sorted p .2(h0) .4(h1) | .5(h0) .7(h1): |.5 − .3| = .2, |.5 − .6| = .1
    # CACE = (.1 + .2 + .2 + .1) / 4 = .15
    assert M.classwise_ace(PROBS, LABELS, 2).item() == pytest.approx(0.15, abs=1e-12)


def test_scores_table():
    # Brier: (.2²+.2²) + (.6²+.6²) + (.3²+.3²) + (.5²+.5²) = .08 + .72 + .18 + .5 = 1.48; /4 = .37
    assert M.brier(PROBS, LABELS).item() == pytest.approx(0.37, abs=1e-12)
    # NLL = −(ln .8 + ln .4 + ln .7 + ln .5)/4
    expected = -(math.log(0.8) + math.log(0.4) + math.log(0.7) + math.log(0.5)) / 4
    assert M.nll(PROBS, LABELS).item() == pytest.approx(expected, abs=1e-12)
    # error: only row 2 (pred 0, label 1) is wrong → 1/4
    assert M.error_rate(PROBS, LABELS).item() == pytest.approx(0.25, abs=1e-12)
    # over-confidence: mean top-label confidence (.8 + .6 + .7 + .5)/4 = .65 − accuracy 3/4 = −.10
    assert M.overconfidence(PROBS, LABELS).item() == pytest.approx(-0.10, abs=1e-12)


def test_ks_error_with_ties():
    # c = .2 .6 .6 .9, a = 0 1 0 1, N = 4. Cumulative (c − a)/N at the end of each tie group:
    #  after .2: .2/4 = .05;  after both .6: (.2 − .4 + .6)/4 = .1;  after .9: (.4 − .1)/4 = .075 → KS = .1
    # (inside the tie group the partial sum could be .2 or −.05 depending on order: not counted)
    c = torch.tensor([0.2, 0.6, 0.6, 0.9], dtype=torch.float64)
    a = torch.tensor([0.0, 1.0, 0.0, 1.0], dtype=torch.float64)
    assert M.ks_error_from_confidence(c, a).item() == pytest.approx(0.1, abs=1e-12)
    assert M.ks_error_from_confidence(c[[0, 2, 1, 3]], a[[0, 2, 1, 3]]).item() == pytest.approx(0.1, abs=1e-12)


def test_ece_sweep_table():
    # c = .1 .2 .3 .4 .6 .7 .8 .9, a = 0 0 1 0 1 1 0 1 (already sorted)
    # M=2 (ranks 0-3 | 4-7): A = .25, .75 monotone.  M=3 (starts 0, 2, 5): A = 0, 2/3, 2/3 monotone.
    # M=4 (pairs): A = 0, .5, 1, .5 → not monotone → sweep stops, uses M = 3.
    # ECE(M=3) = 2/8·|0 − .15| + 3/8·|2/3 − 1.3/3| + 3/8·|2/3 − .8| = .0375 + .0875 + .05 = .175
    c = torch.tensor([0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9], dtype=torch.float64)
    a = torch.tensor([0, 0, 1, 0, 1, 1, 0, 1], dtype=torch.float64)
    value, bins = M.ece_sweep_from_confidence(c, a)
    assert bins == 3
    assert value.item() == pytest.approx(0.175, abs=1e-12)


def test_ece_sweep_goes_to_n_bins_when_every_binning_is_monotone():
    # errors at the 3 lowest confidences, correct above: any equal-mass binning has non-decreasing accuracy,
    # so the sweep reaches M = N = 8 (one sample per bin): ECE = mean |a − c|
    #  = (.1 + .2 + .3 + (1 − .4) + (1 − .6) + (1 − .7) + (1 − .8) + (1 − .9))/8 = (.6 + 1.6)/8 = .275
    c = torch.tensor([0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9], dtype=torch.float64)
    a = torch.tensor([0, 0, 0, 1, 1, 1, 1, 1], dtype=torch.float64)
    value, bins = M.ece_sweep_from_confidence(c, a)
    assert bins == 8 and value.item() == pytest.approx(0.275, abs=1e-12)
    assert M.ece_sweep_from_confidence(c, a, max_bins=5)[1] == 5  # the cap still applies
    # all correct (a trained net on an easy test set): N bins at once; ECE = mean(1 − c) = 1 − .5 = .5
    value, bins = M.ece_sweep_from_confidence(c, torch.ones(8, dtype=torch.float64))
    assert bins == 8 and value.item() == pytest.approx(0.5, abs=1e-12)


def test_debiased_l2_ce_table():
    # Kumar, Liang & Ma 2019: Ê² = Σ_{n_b ≥ 2} (n_b/N)[(A_b − C_b)² − A_b(1 − A_b)/(n_b − 1)]
    # M = 2 (edges 0, .5, 1): bin0 {0, .25, .25, .5; a 0 1 0 1}: n 4, A .5, C .25, gap² 1/16
    #                          bin1 {.6, 1, 1, .9; a 0 1 0 1}:   n 4, A .5, C .875, gap² 9/64
    #  variance term A(1 − A)/(n − 1) = .25/3 = 1/12 in both
    #  Ê² = ½(1/16 − 1/12) + ½(9/64 − 1/12) = ½(−1/48) + ½(11/192) = 7/384
    #  plug-in RMSCE² = ½(1/16 + 9/64) = 13/128 = 7/384 + 1/12 (the correction is Σ_b w_b/12 = 1/12)
    squared = M.debiased_l2_ce_from_confidence(CONF, CORR, 2, squared=True).item()
    assert squared == pytest.approx(7 / 384, abs=1e-12)
    assert M.debiased_l2_ce_from_confidence(CONF, CORR, 2).item() == pytest.approx(math.sqrt(7 / 384), abs=1e-12)
    plug_in = M.calibration_error_from_confidence(CONF, CORR, 2, "width", "l2").item()
    assert plug_in**2 == pytest.approx(13 / 128, abs=1e-12)
    # M = 4 (table above): bin0 n 3, A 1/3, gap 1/6 → 3/8·(1/36 − (2/9)/2) = −1/32; bins 1, 2 hold one sample
    # each → 0 (no variance estimate from one label); bin3 n 3, A 2/3, gap .3 → 3/8·(.09 − 1/9) = −57/7200.
    # Ê² = −225/7200 − 57/7200 = −47/1200 < 0: reported unclipped with squared=True, as 0 otherwise
    assert M.debiased_l2_ce_from_confidence(CONF, CORR, 4, squared=True).item() == pytest.approx(-47 / 1200, abs=1e-12)
    assert M.debiased_l2_ce_from_confidence(CONF, CORR, 4).item() == 0.0
    # the N×K entry point: PROBS/LABELS below have c = .8 .6 .7 .5 and a = 1 0 1 1; M = 2 → all four in bin1
    # (.5 goes to bin0): bin0 {.5; a 1} n 1 → 0; bin1 {.8 .6 .7; a 1 0 1}: A 2/3, C .7, gap² 1/900,
    # variance (2/9)/2 = 1/9 → Ê² = 3/4·(1/900 − 1/9) = 3/4·(−99/900) = −.0825
    assert M.debiased_l2_ce(PROBS, LABELS, 2, squared=True).item() == pytest.approx(-0.0825, abs=1e-12)


def test_ece_vs_bins_matches_single_calls():
    # ece_vs_bins must equal ECE / MCE at each bin count (hand numbers above for 4 and 8 bins via K=... probs)
    out = M.ece_vs_bins(PROBS, LABELS, bins=(2, 10))
    assert out["bins"] == [2, 10]
    assert out["ece"][0] == pytest.approx(0.15, abs=1e-12) and out["mce"][0] == pytest.approx(0.5, abs=1e-12)
    # 10 bins (edges k/10): .5 → (.4,.5], .6 → (.5,.6], .7 → (.6,.7], .8 → (.7,.8]: one sample each,
    # gaps |1−.5| = .5, |0−.6| = .6, |1−.7| = .3, |1−.8| = .2 → ECE = (.5+.6+.3+.2)/4 = .4, MCE = .6
    assert out["ece"][1] == pytest.approx(0.4, abs=1e-9) and out["mce"][1] == pytest.approx(0.6, abs=1e-9)


def test_bad_inputs_raise_one_line_value_errors():
    with pytest.raises(ValueError, match="sum to 1"):
        M.ece(PROBS * 0.5, LABELS)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        M.ece(PROBS, torch.tensor([0, 1, 2, 0]))
    with pytest.raises(ValueError, match="NaN"):
        M.ece(torch.full((4, 2), float("nan")), LABELS)
    with pytest.raises(ValueError, match="num_bins"):
        M.ece(PROBS, LABELS, 0)
    with pytest.raises(ValueError, match="scheme"):
        M.bin_statistics(CONF, CORR, 4, scheme="quantile")
