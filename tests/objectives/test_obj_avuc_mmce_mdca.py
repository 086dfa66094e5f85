"""AvUC / S-AvUC (Karandikar et al. 2021, eq. 13–16), MMCE (Kumar et al. 2018) and MDCA: hand values, limits, gradcheck."""

import math

import pytest
import torch

from metacal.objectives import avuc, mdca, mmce, savuc
from metacal.objectives.avuc import soft_uncertainty


def f64(values):
    return torch.tensor(values, dtype=torch.float64)


def binary_entropy(p: float) -> float:
    return -(p * math.log(p) + (1 - p) * math.log(1 - p))


# ------------------------------------------------------------------------------------------- AvUC


def test_avuc_hand_value():
    # sample 1: p = (0.9, 0.1), y = 0 → accurate, c = 0.9, h1 = −(0.9 ln 0.9 + 0.1 ln 0.1) = 0.3250830
    # sample 2: p = (0.6, 0.4), y = 1 → inaccurate, c = 0.6, h2 = −(0.6 ln 0.6 + 0.4 ln 0.4) = 0.6730117
    # sample 3: p = (0.55, 0.45), y = 0 → accurate, c = 0.55, h3 = 0.6881388
    # κ = 0.5 nats: 1 certain (AC), 2 uncertain (IU), 3 uncertain (AU)
    # n_AC = 0.9(1 − tanh h1), n_IU = 0.4 tanh h2, n_AU = 0.55 tanh h3, n_IC = 0
    logits = torch.log(f64([[0.9, 0.1], [0.6, 0.4], [0.55, 0.45]]))
    targets = torch.tensor([0, 1, 0])
    h1, h2, h3 = binary_entropy(0.9), binary_entropy(0.6), binary_entropy(0.55)
    assert h1 == pytest.approx(0.3250830, abs=1e-7) and h2 == pytest.approx(0.6730117, abs=1e-7)
    n_ac, n_iu, n_au = 0.9 * (1 - math.tanh(h1)), 0.4 * math.tanh(h2), 0.55 * math.tanh(h3)
    expected = math.log(1 + n_au / (n_ac + n_iu))
    assert avuc(logits, targets, kappa=0.5).item() == pytest.approx(expected, abs=1e-12)
    # κ = 0.68: sample 2 becomes certain and inaccurate (IC): n_IC = 0.4(1 − tanh h2), n_IU = 0
    n_ic = 0.4 * (1 - math.tanh(h2))
    expected = math.log(1 + (n_au + n_ic) / n_ac)
    assert avuc(logits, targets, kappa=0.68).item() == pytest.approx(expected, abs=1e-12)
    # default κ = 0.5·ln 2 = 0.3466 nats: same split as κ = 0.5 here
    assert avuc(logits, targets).item() == pytest.approx(avuc(logits, targets, kappa=0.5).item(), abs=1e-15)


def test_avuc_stop_gradient_variant_same_value_other_gradient():
    torch.manual_seed(3)
    logits = torch.randn(10, 3, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, 3, (10,))
    plain, gs = avuc(logits, targets, kappa=0.8), avuc(logits, targets, kappa=0.8, stop_confidence_gradient=True)
    assert plain.item() == pytest.approx(gs.item(), abs=1e-15)
    g_plain = torch.autograd.grad(plain, logits)[0]
    g_gs = torch.autograd.grad(gs, logits)[0]
    assert not torch.allclose(g_plain, g_gs)


def test_soft_uncertainty_identity_and_hard_limit():
    h = torch.linspace(0.01, 0.99, 50, dtype=torch.float64)
    # κ = ½, T = 1 is the identity (Karandikar et al. 2021, §4.2)
    assert torch.allclose(soft_uncertainty(h, 0.5, 1.0), h, atol=1e-12)
    # T → 0: step at κ
    assert torch.equal(soft_uncertainty(h, 0.3, 1e-6), (h > 0.3).double())


def test_savuc_hard_limit_and_hand_value():
    # T → 0: t = 1[h* > κ]; S-AvUC = log(1 + (Σ_{A,U} tanh h + Σ_{I,C} (1 − tanh h)) / (Σ_{A,C} (1 − tanh h) + Σ_{I,U} tanh h))
    logits = torch.log(f64([[0.9, 0.1], [0.6, 0.4], [0.55, 0.45]]))
    targets = torch.tensor([0, 1, 0])
    h = [binary_entropy(0.9), binary_entropy(0.6), binary_entropy(0.55)]
    # κ = 0.9 on h* = h/ln 2 = (0.469, 0.971, 0.993): sample 1 certain-accurate, 2 uncertain-inaccurate,
    # 3 uncertain-accurate
    numerator = math.tanh(h[2])
    denominator = (1 - math.tanh(h[0])) + math.tanh(h[1])
    value = savuc(logits, targets, kappa=0.9, temperature=1e-6)
    assert value.item() == pytest.approx(math.log(1 + numerator / denominator), abs=1e-9)
    # κ = ½, T = 1: t = h* exactly
    hs = [x / math.log(2) for x in h]
    tn = [math.tanh(x) for x in h]
    n_au = hs[0] * tn[0] + hs[2] * tn[2]
    n_ac = (1 - hs[0]) * (1 - tn[0]) + (1 - hs[2]) * (1 - tn[2])
    n_iu, n_ic = hs[1] * tn[1], (1 - hs[1]) * (1 - tn[1])
    expected = math.log(1 + (n_au + n_ic) / (n_ac + n_iu))
    assert savuc(logits, targets).item() == pytest.approx(expected, abs=1e-12)


def test_avuc_savuc_gradcheck():
    torch.manual_seed(4)
    logits = torch.randn(8, 3, dtype=torch.float64).requires_grad_()
    targets = torch.randint(0, 3, (8,))
    entropy = -(torch.softmax(logits, 1) * torch.log_softmax(logits, 1)).sum(1)
    assert (entropy - 0.6).abs().min() > 1e-3  # away from the hard threshold
    assert torch.autograd.gradcheck(lambda z: avuc(z, targets, kappa=0.6), (logits,))
    assert torch.autograd.gradcheck(lambda z: savuc(z, targets, kappa=0.3, temperature=0.5), (logits,))
    assert torch.autograd.gradcheck(lambda z: savuc(z, targets), (logits,))


def test_avuc_bad_arguments():
    z, y = torch.zeros(2, 3), torch.tensor([0, 1])
    with pytest.raises(ValueError, match="kappa"):
        savuc(z, y, kappa=1.0)
    with pytest.raises(ValueError, match="kappa"):
        avuc(z, y, kappa=-1.0)
    with pytest.raises(ValueError, match="temperature"):
        savuc(z, y, temperature=0.0)
    with pytest.raises(ValueError, match="2 classes"):
        savuc(torch.zeros(2, 1), torch.tensor([0, 0]))


# ------------------------------------------------------------------------------------------- MMCE


def test_mmce_two_sample_hand_value():
    # r = (0.9, 0.6); sample 1 correct, sample 2 wrong; m = n = 1; k12 = exp(−0.3/0.4) = e^−0.75 = 0.4723666
    # MMCE_w² = (1 − 0.9)² + 0.6² − 2(0.1)(0.6)k12 = 0.01 + 0.36 − 0.12·0.4723666 = 0.3133160
    # MMCE_w = sqrt(0.3133160 + 1e−10) = 0.5597464
    logits = torch.log(f64([[0.9, 0.1], [0.6, 0.4]]))
    targets = torch.tensor([0, 1])
    squared = 0.37 - 0.12 * math.exp(-0.75)
    assert squared == pytest.approx(0.3133160, abs=1e-7)
    assert mmce(logits, targets).item() == pytest.approx(math.sqrt(squared + 1e-10), abs=1e-12)
    assert mmce(logits, targets).item() == pytest.approx(0.5597464, abs=1e-7)
    # unweighted: (c − r) = (0.1, −0.6), MMCE_m² = (0.01 + 0.36 − 0.12 k12)/N² = 0.3133160/4 → 0.2798732
    assert mmce(logits, targets, weighted=False).item() == pytest.approx(math.sqrt(squared / 4 + 1e-10), abs=1e-12)


def _logits_with_confidence(conf: float, k: int = 4):
    rest = (1 - conf) / (k - 1)
    return torch.log(f64([conf] + [rest] * (k - 1)))


def test_mmce_zero_for_calibrated_structure():
    # confidence 0.75: 3 of 4 correct; confidence 0.25 (uniform over 4): 1 of 4 correct → calibrated at both
    # levels, and m = n = 4 so the weighted version is also exactly balanced: MMCE² = 0 → value sqrt(1e−10) = 1e−5
    high, low = _logits_with_confidence(0.75), _logits_with_confidence(0.25)
    logits = torch.stack([high] * 4 + [low] * 4)
    targets = torch.tensor([0, 0, 0, 1, 0, 1, 2, 3])  # argmax is class 0 in every row
    for weighted in (True, False):
        assert mmce(logits, targets, weighted=weighted).item() == pytest.approx(1e-5, rel=1e-6)


def test_mmce_positive_when_overconfident_and_fixed_normalisation():
    # confidence 0.99 but only half correct → clearly miscalibrated
    logits = torch.stack([_logits_with_confidence(0.99)] * 10)
    targets = torch.tensor([0] * 5 + [1] * 5)
    value = mmce(logits, targets)
    # all r equal → k = 1: MMCE_w² = (0.01·5/5)² + (0.99·5/5)² − 2(0.01)(0.99) = (0.99 − 0.01)² → 0.98
    assert value.item() == pytest.approx(0.98, abs=1e-9)
    # the port's double normalisation would give sqrt((0.01² + 0.99² − 2·0.0099)/25) = 0.98/5 instead
    assert value.item() > 0.98 / 5 + 0.5


def test_mmce_degenerate_batches_are_zero():
    logits = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    all_correct = logits.detach().argmax(1)
    value = mmce(logits, all_correct)
    value.backward()
    assert value.item() == 0.0 and torch.isfinite(logits.grad).all()
    assert mmce(logits[:1], torch.tensor([0])).item() == 0.0


def test_mmce_gradcheck():
    torch.manual_seed(5)
    logits = torch.randn(8, 3, dtype=torch.float64).requires_grad_()
    targets = torch.randint(0, 3, (8,))
    correct = logits.argmax(1) == targets
    assert 0 < correct.sum() < 8
    for weighted in (True, False):
        assert torch.autograd.gradcheck(lambda z: mmce(z, targets, weighted=weighted), (logits,))


# ------------------------------------------------------------------------------------------- MDCA


def test_mdca_hand_values():
    # K = 2: mean p = ((0.8 + 0.6 + 0.3)/3, (0.2 + 0.4 + 0.7)/3) = (0.5667, 0.4333); label freq = (1/3, 2/3)
    # MDCA = ½(|0.5667 − 0.3333| + |0.4333 − 0.6667|) = 0.7/3 = 0.2333333
    logits = torch.log(f64([[0.8, 0.2], [0.6, 0.4], [0.3, 0.7]]))
    assert mdca(logits, torch.tensor([0, 1, 1])).item() == pytest.approx(0.7 / 3, abs=1e-12)
    # K = 3: mean p = (0.3, 0.2, 0.5), label freq = (0.5, 0, 0.5) → (0.2 + 0.2 + 0)/3 = 0.1333333
    logits = torch.log(f64([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]]))
    assert mdca(logits, torch.tensor([0, 2])).item() == pytest.approx(0.4 / 3, abs=1e-12)


def test_mdca_gradcheck():
    torch.manual_seed(9)
    logits = torch.randn(6, 4, dtype=torch.float64).requires_grad_()
    targets = torch.randint(0, 4, (6,))
    assert torch.autograd.gradcheck(lambda z: mdca(z, targets), (logits,))
