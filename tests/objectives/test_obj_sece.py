"""SECE (Wang & Golebiowski 2024, §4.2, eq. 6–8, 13): hand-derived values, the h → 0 and h → ∞ limits, options, gradcheck."""

import math

import pytest
import torch

from metacal.objectives import sece, sece_from_confidence


def f64(values):
    return torch.tensor(values, dtype=torch.float64)


def test_hand_value_two_samples_with_overlapping_kernel():
    # c = (0.5, 0.6), a = (1, 0), h = 0.1: K12 = exp(−0.1²/(2·0.1²)) = exp(−0.5) = 0.6065307
    # Â1 = (1·1 + K·0)/(1 + K) = 1/(1 + e^−0.5) = σ(0.5) = 0.6224593;  Â2 = K/(1 + K) = 0.3775407
    # SECE = (|0.6224593 − 0.5| + |0.3775407 − 0.6|)/2 = (0.1224593 + 0.2224593)/2 = 0.1724593
    value = sece_from_confidence(f64([0.5, 0.6]), f64([1.0, 0.0]), bandwidth=0.1)
    assert value.item() == pytest.approx(0.1724593, abs=1e-7)
    sig = 1 / (1 + math.exp(-0.5))
    assert value.item() == pytest.approx(((sig - 0.5) + (0.6 - (1 - sig))) / 2, abs=1e-14)
    # leave-one-out: Â1 = a2 = 0, Â2 = a1 = 1 → (0.5 + 0.4)/2 = 0.45
    loo = sece_from_confidence(f64([0.5, 0.6]), f64([1.0, 0.0]), bandwidth=0.1, include_self=False)
    assert loo.item() == pytest.approx(0.45, abs=1e-14)


def test_hand_value_from_logits_with_hard_accuracy():
    # confidences 0.7, 0.7, 0.9 (binary softmax), correct/incorrect/correct; h = 0.01:
    # K(0.7, 0.9) = exp(−0.04/0.0002) = e^−200 ≈ 0, K(0.7, 0.7) = 1
    # Â = (½, ½, 1) → SECE = (|0.5 − 0.7| + |0.5 − 0.7| + |1 − 0.9|)/3 = 0.5/3 = 0.1666667
    logits = torch.log(f64([[0.7, 0.3], [0.7, 0.3], [0.1, 0.9]]))
    targets = torch.tensor([0, 1, 1])
    value = sece(logits, targets, bandwidth=0.01, accuracy="hard")
    assert value.item() == pytest.approx(0.5 / 3, abs=1e-12)


def test_hand_value_soft_accuracy():
    # one sample, probs (0.5, 0.49, 0.01), y = 0: a = σ(1) (soft rank, t_a = 100), c = 0.5
    # a single sample's kernel average is its own accuracy: SECE = σ(1) − 0.5 = 0.2310586
    logits = torch.log(f64([[0.5, 0.49, 0.01]]))
    value = sece(logits, torch.tensor([0]))
    assert value.item() == pytest.approx(1 / (1 + math.exp(-1)) - 0.5, abs=1e-12)


def _distinct_confidence_batch(seed: int, n: int = 30):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, 4, generator=g, dtype=torch.float64) * 2
    targets = torch.randint(0, 4, (n,), generator=g)
    conf = torch.softmax(logits, 1).max(1).values
    gaps = (conf[:, None] - conf[None, :]).abs() + torch.eye(n, dtype=torch.float64)
    assert gaps.min() > 2e-5  # distinct confidences: e^(−(2e−5)²/(2·(1e−7)²)) = e^−20000 ≈ 0
    return logits, targets, conf, (logits.argmax(1) == targets).double()


def test_small_bandwidth_limit_is_per_sample_gap():
    # Wang & Golebiowski 2024, §4.2: single-example bins → mean_i |1[correct_i] − c_i|
    logits, targets, conf, correct = _distinct_confidence_batch(3)
    value = sece(logits, targets, bandwidth=1e-7, accuracy="hard")
    assert value.item() == pytest.approx((correct - conf).abs().mean().item(), abs=1e-12)


def test_small_bandwidth_leave_one_out_uses_nearest_neighbour():
    logits, targets, conf, correct = _distinct_confidence_batch(4)
    dist = (conf[:, None] - conf[None, :]).abs() + torch.eye(len(conf), dtype=torch.float64) * 10
    nearest = dist.argmin(1)
    expected = (correct[nearest] - conf).abs().mean()
    value = sece(logits, targets, bandwidth=1e-7, accuracy="hard", include_self=False)
    assert value.item() == pytest.approx(expected.item(), abs=1e-12)


def test_large_bandwidth_limit():
    # h → ∞: all weights equal, Â_i = ā, SECE = mean_i |ā − c_i| ≥ |ā − c̄|
    logits, targets, conf, correct = _distinct_confidence_batch(5)
    value = sece(logits, targets, bandwidth=1e4, accuracy="hard")
    assert value.item() == pytest.approx((correct.mean() - conf).abs().mean().item(), abs=1e-8)
    # for an over-confident batch (every c_i above the accuracy) it equals |ā − c̄|
    conf = f64([0.95, 0.9, 0.99, 0.85, 0.97])
    acc = f64([1.0, 0.0, 0.0, 1.0, 0.0])  # ā = 0.4 < every c_i
    value = sece_from_confidence(conf, acc, bandwidth=1e4)
    assert value.item() == pytest.approx(abs(acc.mean() - conf.mean()).item(), abs=1e-8)
    # with confidences on both sides of ā the two differ (triangle inequality is strict)
    conf = f64([0.2, 0.9])
    value = sece_from_confidence(conf, f64([1.0, 0.0]), bandwidth=1e4)  # ā = 0.5 → (0.3 + 0.4)/2 = 0.35
    assert value.item() == pytest.approx(0.35, abs=1e-8)


def test_metric_entry_point_accepts_bool_and_float32():
    conf = torch.tensor([0.9, 0.6, 0.8])
    correct = torch.tensor([True, False, True])
    value = sece_from_confidence(conf, correct, bandwidth=0.01)
    # h = 0.01, gaps ≥ 0.1 → Â = a: (0.1 + 0.6 + 0.2)/3 = 0.3
    assert value.dtype == torch.float32 and value.item() == pytest.approx(0.3, abs=1e-6)


def test_gradcheck_soft_and_hard():
    torch.manual_seed(6)
    logits = torch.randn(6, 3, dtype=torch.float64).requires_grad_()
    targets = torch.randint(0, 3, (6,))
    for accuracy in ("soft", "hard"):
        assert torch.autograd.gradcheck(
            lambda z: sece(z, targets, bandwidth=0.1, accuracy=accuracy, t_a=5.0), (logits,)
        )
    # the paper's h = 0.01 too
    assert torch.autograd.gradcheck(lambda z: sece(z, targets), (logits,))
    conf = torch.rand(7, dtype=torch.float64, requires_grad=True)
    acc = torch.rand(7, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda c, a: sece_from_confidence(c, a, bandwidth=0.05, include_self=False), (conf, acc)
    )


def test_bad_arguments():
    with pytest.raises(ValueError, match="bandwidth"):
        sece_from_confidence(f64([0.5]), f64([1.0]), bandwidth=0.0)
    with pytest.raises(ValueError, match="include_self=False needs at least 2"):
        sece_from_confidence(f64([0.5]), f64([1.0]), include_self=False)
    with pytest.raises(ValueError, match="equal length"):
        sece_from_confidence(f64([0.5, 0.4]), f64([1.0]))
    with pytest.raises(ValueError, match="accuracy must be one of"):
        sece(torch.zeros(2, 3), torch.tensor([0, 1]), accuracy="exact")


def test_contract_entry_point_spellings():
    import metacal.objectives
    import metacal.objectives.sece as imported
    from metacal.objectives.sece import sece_from_confidence as from_module

    conf, acc = f64([0.9, 0.6, 0.8]), f64([1.0, 0.0, 1.0])
    for fn in (metacal.objectives.sece.sece_from_confidence, imported.sece_from_confidence, from_module):
        assert fn(conf, acc, bandwidth=0.01).item() == pytest.approx(0.3, abs=1e-12)  # (0.1 + 0.6 + 0.2)/3
