"""Soft rank accuracy (Bohdal et al. 2021): hand-derived values for rank 1, ties and margins; limits."""

import math

import pytest
import torch

from metacal.objectives import soft_rank_accuracy
from metacal.objectives.soft_accuracy import soft_rank_from_probs


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def logits_of(probs):
    return torch.log(torch.tensor(probs, dtype=torch.float64))


def test_hand_derived_values():
    # rows are probabilities; logits = log p so softmax(logits) = p exactly (up to rounding)
    probs = [
        [0.7, 0.2, 0.1],  # y=0: rank = 1 + σ(100·(0.2−0.7)) + σ(100·(0.1−0.7)) = 1 + σ(−50) + σ(−60) → a ≈ 1
        [0.7, 0.2, 0.1],  # y=1: rank = 1 + σ(100·0.5) + σ(100·(−0.1)) = 1 + (1 − 2e−22) + 4.54e−5 > 2 → a = 0
        [0.45, 0.45, 0.1],  # y=0, tie with class 1: rank = 1 + σ(0) + σ(−35) = 1.5 + 6e−16 → a = 0.5
        [0.5, 0.49, 0.01],  # y=0, margin 0.01: rank = 1 + σ(−1) + σ(−49) → a = 1 − σ(−1) = σ(1) = 0.7310586
        [1 / 3, 1 / 3, 1 / 3],  # three-way tie: rank = 1 + ½ + ½ = 2 → a = 0
    ]
    targets = torch.tensor([0, 1, 0, 0, 2])
    acc = soft_rank_accuracy(logits_of(probs), targets, t_a=100.0)
    expected = torch.tensor(
        [1.0 - sigmoid(-50) - sigmoid(-60), 0.0, 0.5 - sigmoid(-35), sigmoid(1.0) - sigmoid(-49), 0.0],
        dtype=torch.float64,
    )
    assert torch.allclose(acc, expected, atol=1e-12)
    assert acc[3].item() == pytest.approx(0.7310585786, abs=1e-9)


def test_soft_rank_counts_pairs_above_true_class():
    # y = 2 is the smallest of 4 well-separated classes: rank → 1 + 3 = 4 (each sigmoid → 1)
    probs = torch.tensor([[0.4, 0.3, 0.05, 0.25]], dtype=torch.float64)
    rank = soft_rank_from_probs(probs, torch.tensor([2]), t_a=1e4)
    assert rank.item() == pytest.approx(4.0, abs=1e-12)


def test_large_t_a_gives_hard_accuracy():
    torch.manual_seed(1)
    logits = torch.randn(200, 5, dtype=torch.float64) * 2
    targets = torch.randint(0, 5, (200,))
    probs = torch.softmax(logits, 1)
    # keep samples whose true-class probability differs from every other class by > 1e-3
    gaps = (probs - probs.gather(1, targets[:, None])).abs()
    gaps.scatter_(1, targets[:, None], 1.0)
    keep = gaps.min(1).values > 1e-3
    hard = (logits.argmax(1) == targets).double()
    soft = soft_rank_accuracy(logits[keep], targets[keep], t_a=1e6)
    assert keep.sum() > 150
    assert torch.allclose(soft, hard[keep], atol=1e-12)


def test_confidence_one_is_finite():
    logits = torch.tensor([[1e4, -1e4, 0.0], [0.0, 1e4, -1e4]], requires_grad=True)
    acc = soft_rank_accuracy(logits, torch.tensor([0, 0]))
    acc.sum().backward()
    assert torch.allclose(acc, torch.tensor([1.0, 0.0]))
    assert torch.isfinite(logits.grad).all()


def test_gradcheck():
    torch.manual_seed(2)
    logits = torch.randn(6, 3, dtype=torch.float64).requires_grad_()
    with torch.no_grad():
        logits[0] = torch.tensor([0.3, 0.2, -0.5])  # true class 1 ranks second, by a small margin
    targets = logits.detach().argmax(1)
    targets[0] = 1
    acc = soft_rank_accuracy(logits, targets, t_a=5.0)
    # every rank strictly inside (1, 2): smooth region, away from the relu kink, non-zero gradients
    assert ((acc > 0.01) & (acc < 0.99)).all(), acc
    assert torch.autograd.gradcheck(lambda z: soft_rank_accuracy(z, targets, t_a=5.0), (logits,))


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="t_a"):
        soft_rank_accuracy(torch.zeros(2, 3), torch.tensor([0, 1]), t_a=0.0)
    with pytest.raises(ValueError, match="targets must lie"):
        soft_rank_accuracy(torch.zeros(2, 3), torch.tensor([0, 3]))
    with pytest.raises(ValueError, match="rows"):
        soft_rank_accuracy(torch.zeros(2, 3), torch.tensor([0, 1, 1]))
    with pytest.raises(ValueError, match="integer"):
        soft_rank_accuracy(torch.zeros(2, 3), torch.tensor([0.0, 1.0]))
