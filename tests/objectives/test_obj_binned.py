"""DECE and SB-ECE: hard-binning limits (oracle: torchmetrics), the reference formulas, hand values, gradcheck."""

import math

import pytest
import torch
from torchmetrics.functional.classification import multiclass_calibration_error

from metacal.objectives import dece, sbece, sbece_label
from metacal.objectives.dece import soft_bin_membership
from metacal.objectives.sbece import DEFAULT_TEMPERATURE, soft_bin_anchors_membership, temperature_from_decay

M = 15


def _batch_off_boundaries(seed: int, n: int = 120, k: int = 4):
    """Random logits whose confidences stay > 1e-3 from every bin edge j/M and whose true-class probability
    differs from every other class by > 1e-3 (so soft accuracy → hard accuracy as t_a → ∞)."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, k, generator=g, dtype=torch.float64) * 1.5
    targets = torch.randint(0, k, (n,), generator=g)
    probs = torch.softmax(logits, 1)
    conf = probs.max(1).values
    edge_dist = (conf * M - torch.round(conf * M)).abs() / M
    gaps = (probs - probs.gather(1, targets[:, None])).abs().scatter(1, targets[:, None], 1.0)
    keep = (edge_dist > 1e-3) & (gaps.min(1).values > 1e-3)
    return logits[keep], targets[keep]


def _hard_bins(conf):
    return torch.clamp((conf * M).floor().long(), max=M - 1)


def _hard_label_binned(conf, acc, p):
    """ECE_lb,p (Karandikar et al. 2021, eq. 7) by an explicit loop over bins."""
    bins = _hard_bins(conf)
    total = 0.0
    for j in range(M):
        members = bins == j
        if members.any():
            a_j = acc[members].mean()
            total += ((a_j - conf[members]).abs() ** p).sum().item()
    return (total / len(conf)) ** (1 / p)


# --------------------------------------------------------------------------------------------- DECE


def test_dece_membership_tends_to_hard_bins():
    conf = torch.tensor([0.01, 0.21, 0.5, 0.74, 0.999, 1.0 - 1e-3], dtype=torch.float64)
    membership = soft_bin_membership(conf, M, t_b=1e-6, membership_eps=0.0)
    assert torch.equal(membership.argmax(1), _hard_bins(conf))
    assert torch.allclose(membership.max(1).values, torch.ones_like(conf), atol=1e-12)
    # exactly on the cut point 1/3 = 5/15: shared ½/½ between bins 4 and 5
    on_cut = soft_bin_membership(torch.tensor([5 / 15], dtype=torch.float64), M, t_b=1e-3, membership_eps=0.0)
    assert on_cut[0, 4].item() == pytest.approx(0.5) and on_cut[0, 5].item() == pytest.approx(0.5)


def test_dece_membership_eps_renormalises():
    conf = torch.tensor([0.3, 0.8], dtype=torch.float64)
    plain = soft_bin_membership(conf, M, 0.01, 0.0)
    smoothed = soft_bin_membership(conf, M, 0.01, 1e-6)
    assert torch.allclose(smoothed, (plain + 1e-6) / (1 + M * 1e-6), atol=1e-15)
    assert torch.allclose(smoothed.sum(1), torch.ones(2, dtype=torch.float64))


def test_dece_hard_limit_equals_ece():
    logits, targets = _batch_off_boundaries(0)
    # t_b → 0 and t_a → ∞: the 15-bin equal-width ECE (torchmetrics, l1)
    ece = multiclass_calibration_error(torch.softmax(logits, 1), targets, logits.shape[1], n_bins=M, norm="l1")
    value = dece(logits, targets, t_a=1e7, t_b=1e-7, membership_eps=0.0)
    assert value.item() == pytest.approx(ece.item(), abs=1e-6)  # torchmetrics computes in float32
    assert value.item() > 0.05  # a non-trivial value
    # with the reference's 1e-6 smoothing the value moves by less than M·1e-6
    smoothed = dece(logits, targets, t_a=1e7, t_b=1e-7)
    assert abs(smoothed.item() - ece.item()) < M * 1e-6


def test_dece_t_b_limit_with_soft_accuracy():
    # t_b → 0 alone: hard bins, soft accuracy (t_a = 100): Σ_m (n_m/N)|mean soft acc − mean conf|
    logits, targets = _batch_off_boundaries(1)
    probs = torch.softmax(logits, 1)
    conf = probs.max(1).values
    rank = 1 + torch.sigmoid(100 * (probs - probs.gather(1, targets[:, None]))).sum(1) - 0.5
    soft_acc = torch.relu(2 - rank)
    bins = _hard_bins(conf)
    expected = sum(
        (bins == j).double().mean() * (soft_acc[bins == j].mean() - conf[bins == j].mean()).abs()
        for j in range(M)
        if (bins == j).any()
    )
    value = dece(logits, targets, t_b=1e-7, membership_eps=0.0)
    assert value.item() == pytest.approx(expected.item(), abs=1e-10)


def test_dece_equals_bohdal_bin_form():
    # reference form: S_m, conf_m, acc_m with division by S_m, Σ (S_m/N)|acc_m − conf_m|
    logits, targets = _batch_off_boundaries(2, n=40)
    probs = torch.softmax(logits, 1)
    conf = probs.max(1).values
    rank = 1 + torch.sigmoid(100 * (probs - probs.gather(1, targets[:, None]))).sum(1) - 0.5
    acc = torch.relu(2 - rank)
    o = soft_bin_membership(conf, M, 0.01, 1e-6)
    size = o.sum(0)
    expected = ((size / len(conf)) * ((o * acc[:, None]).sum(0) / size - (o * conf[:, None]).sum(0) / size).abs()).sum()
    assert dece(logits, targets).item() == pytest.approx(expected.item(), abs=1e-12)


# --------------------------------------------------------------------------------------------- SB-ECE


def test_default_temperature_from_decay():
    # T = 1/(M² ln(1/d)) = 1/(225 · ln 10⁴) = 1/(225 · 9.2103404) = 4.8254942e−4
    assert DEFAULT_TEMPERATURE == pytest.approx(4.8254942e-4, rel=1e-7)
    # at anchor ξ_j the next anchor's membership is d times smaller
    xi = torch.tensor([(7 + 0.5) / M], dtype=torch.float64)
    u = soft_bin_anchors_membership(xi, M, temperature_from_decay(1e-2, M))
    assert (u[0, 8] / u[0, 7]).item() == pytest.approx(1e-2, rel=1e-9)
    with pytest.raises(ValueError, match="decay"):
        temperature_from_decay(2.0)


@pytest.mark.parametrize("p,norm", [(1, "l1"), (2, "l2")])
def test_sbece_zero_temperature_limit_is_binned_ece(p, norm):
    logits, targets = _batch_off_boundaries(3)
    ece = multiclass_calibration_error(torch.softmax(logits, 1), targets, logits.shape[1], n_bins=M, norm=norm)
    value = sbece(logits, targets, num_bins=M, temperature=1e-8, p=p)
    assert value.item() == pytest.approx(ece.item(), abs=1e-6)  # torchmetrics computes in float32
    assert value.item() > 0.05


@pytest.mark.parametrize("p", [1, 2])
def test_sbece_label_zero_temperature_limit(p):
    logits, targets = _batch_off_boundaries(4)
    conf = torch.softmax(logits, 1).max(1).values
    acc = (logits.argmax(1) == targets).double()
    value = sbece_label(logits, targets, num_bins=M, temperature=1e-8, p=p)
    assert value.item() == pytest.approx(_hard_label_binned(conf, acc, p), abs=1e-9)
    # Jensen (Karandikar et al. 2021, §3.2): label-binned ≥ binned
    assert value.item() >= sbece(logits, targets, temperature=1e-8, p=p).item() - 1e-12


def test_sbece_hand_value_two_bins():
    # M = 2, anchors ¼ and ¾; c = (0.25, 0.75) exactly on the anchors, T small: hard membership.
    # bin 1: c = 0.25, a = 1 → |1 − 0.25| = 0.75;  bin 2: c = 0.75, a = 0 → 0.75
    # p = 2: sqrt(½·0.75² + ½·0.75²) = 0.75;  K = 4 so that a confidence of 0.25 is possible
    logits = torch.log(torch.tensor([[0.25] * 4, [0.75, 0.25 / 3, 0.25 / 3, 0.25 / 3]], dtype=torch.float64))
    targets = torch.tensor([0, 1])  # uniform row: argmax = 0 → correct; second row wrong
    assert sbece(logits, targets, num_bins=2, temperature=1e-4).item() == pytest.approx(0.75, abs=1e-12)
    # T = 1: u(¼) ∝ (e^0, e^−¼) → u = (1, e^−¼)/(1 + e^−¼); by symmetry u(¾) = (e^−¼, 1)/(1 + e^−¼)
    # S = (1, 1), C_1 = (¼ + ¾e^−¼)/(1 + e^−¼), A_1 = 1/(1 + e^−¼); C_2 = 1 − C_1, A_2 = 1 − A_1
    e = math.exp(-0.25)
    c1, a1 = (0.25 + 0.75 * e) / (1 + e), 1 / (1 + e)
    # both bins have the same gap: SB-ECE = |A_1 − C_1| = 0.75(1 − e^−¼)/(1 + e^−¼) = 0.75·tanh(⅛) = 0.0932648
    expected = math.sqrt(0.5 * (a1 - c1) ** 2 + 0.5 * ((1 - a1) - (1 - c1)) ** 2)
    assert expected == pytest.approx(0.75 * math.tanh(0.125), abs=1e-15)
    assert sbece(logits, targets, num_bins=2, temperature=1.0).item() == pytest.approx(expected, abs=1e-12)


def test_sbece_gradcheck():
    torch.manual_seed(7)
    logits = torch.randn(8, 3, dtype=torch.float64).requires_grad_()
    targets = torch.randint(0, 3, (8,))
    for fn in (sbece, sbece_label):
        for p in (1, 2):
            assert torch.autograd.gradcheck(lambda z: fn(z, targets, temperature=0.01, p=p), (logits,))
        assert torch.autograd.gradcheck(lambda z: fn(z, targets), (logits,))


def test_dece_gradcheck():
    torch.manual_seed(8)
    logits = torch.randn(8, 3, dtype=torch.float64).requires_grad_()
    targets = torch.randint(0, 3, (8,))
    assert torch.autograd.gradcheck(lambda z: dece(z, targets, t_a=5.0, t_b=0.1), (logits,))
    assert torch.autograd.gradcheck(lambda z: dece(z, targets), (logits,))


def test_bad_arguments():
    z, y = torch.zeros(2, 3), torch.tensor([0, 1])
    with pytest.raises(ValueError, match="p must be 1 or 2"):
        sbece(z, y, p=3)
    with pytest.raises(ValueError, match="temperature"):
        sbece_label(z, y, temperature=-0.1)
    with pytest.raises(ValueError, match="num_bins"):
        dece(z, y, num_bins=0)
    with pytest.raises(ValueError, match="t_b"):
        dece(z, y, t_b=0.0)
