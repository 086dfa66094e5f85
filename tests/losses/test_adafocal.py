"""AdaFocal: per-bin γ update on a hand-computed validation set, switching, clipping, state_dict."""

import math

import numpy as np
import pytest
import torch

from metacal import losses


def _validation():
    """Six binary samples with top-label confidence c (class 0 predicted) and chosen correctness.

    Sorted confidences split into 3 equal-mass bins: {0.55, 0.60}, {0.70, 0.80}, {0.90, 0.95}
    → edges 0, (0.60+0.70)/2 = 0.65, (0.80+0.90)/2 = 0.85, 1.
    bin 0: both correct → conf 0.575, acc 1.0, gap −0.425 (under-confident)
    bin 1: one correct  → conf 0.75,  acc 0.5, gap +0.25  (over-confident)
    bin 2: both wrong   → conf 0.925, acc 0.0, gap +0.925 (over-confident)
    """
    conf = torch.tensor([0.95, 0.55, 0.8, 0.6, 0.9, 0.7], dtype=torch.float64)
    logits = torch.stack([conf.log(), (1 - conf).log()], dim=1)
    correct = {0.95: False, 0.55: True, 0.8: False, 0.6: True, 0.9: False, 0.7: True}
    targets = torch.tensor([0 if correct[c] else 1 for c in conf.tolist()])
    return logits, targets


def _updated(start):
    loss = losses.build("adafocal", num_bins=3)
    loss.bin_gamma.copy_(torch.tensor(start))
    loss.update_from_validation(*_validation())
    return loss


def test_bin_edges_are_equal_mass_midpoints():
    loss = _updated([1.0, 1.0, 1.0])
    torch.testing.assert_close(loss.bin_edges, torch.tensor([0.0, 0.65, 0.85, 1.0]))


def test_update_focal_branch_and_switch_and_clip_at_20():
    loss = _updated([0.3, -1.0, 19.0])
    expected = [
        -0.2,                      # 0.3·e^{−0.425} = 0.1961 < 0.2 → switch to inverse focal, γ = −0.2
        -1.0 * math.exp(-0.25),    # inverse branch, over-confident: |γ| shrinks → −0.7788
        20.0,                      # 19·e^{0.925} = 47.9 → clipped to γ_max = 20
    ]
    torch.testing.assert_close(loss.bin_gamma, torch.tensor(expected), atol=1e-5, rtol=0)


def test_update_inverse_branch_switch_back_and_clip_at_minus_2():
    loss = _updated([-1.9, -0.21, 1.0])
    expected = [
        -2.0,                      # −1.9·e^{+0.425} = −2.906 (under-confident → more inverse) → clip −2
        0.2,                       # −0.21·e^{−0.25} = −0.1636, |γ| < 0.2 → switch to focal, γ = +0.2
        math.exp(0.925),           # focal, over-confident: 1·e^{0.925} = 2.5219
    ]
    torch.testing.assert_close(loss.bin_gamma, torch.tensor(expected), atol=1e-5, rtol=0)


def test_training_loss_uses_the_bin_of_p_t():
    loss = _updated([0.3, -1.0, 19.0])  # γ = (−0.2, −0.7788, 20)
    p = torch.tensor([0.6, 0.7, 0.95], dtype=torch.float64)  # p_t in bins 0, 1, 2
    z = torch.stack([p.log(), (1 - p).log()], dim=1)
    y = torch.zeros(3, dtype=torch.long)
    g = loss.bin_gamma.double()
    expected = torch.stack([
        -(1 + p[0]) ** 0.2 * p[0].log(),                     # inverse focal with |γ| = 0.2
        -(1 + p[1]) ** g[1].abs() * p[1].log(),              # inverse focal with |γ| = 0.7788
        -(1 - p[2]) ** 20.0 * p[2].log(),                    # focal with γ = 20
    ])
    torch.testing.assert_close(loss(z, y), expected.mean(), rtol=1e-5, atol=0)
    loss.reduction = "none"
    torch.testing.assert_close(loss(z, y), expected, rtol=1e-5, atol=0)


def test_initial_state_is_focal_gamma_1():
    loss = losses.build("adafocal")
    assert loss.bin_gamma.tolist() == [1.0] * 15 and loss.bin_edges.numel() == 16
    z = torch.randn(5, 3, dtype=torch.float64)
    y = torch.tensor([0, 1, 2, 0, 1])
    torch.testing.assert_close(loss(z, y), losses.build("focal", gamma=1.0)(z, y))


def test_state_dict_round_trip_keeps_gamma_and_edges():
    loss = _updated([0.3, -1.0, 19.0])
    fresh = losses.build("adafocal", num_bins=3)
    assert set(loss.state_dict()) == {"bin_edges", "bin_gamma"}
    fresh.load_state_dict(loss.state_dict())
    torch.testing.assert_close(fresh.bin_gamma, loss.bin_gamma)
    torch.testing.assert_close(fresh.bin_edges, loss.bin_edges)


def test_empty_bin_keeps_gamma_and_too_few_samples_is_an_error():
    loss = losses.build("adafocal", num_bins=2)
    # four identical confidences → inner edge = 0.7, all samples in bin 0 ((0, 0.7]); bin 1 empty
    z = torch.tensor([[math.log(0.7), math.log(0.3)]] * 4)
    loss.update_from_validation(z, torch.zeros(4, dtype=torch.long))
    assert loss.bin_gamma[1].item() == 1.0
    assert loss.bin_gamma[0].item() == pytest.approx(math.exp(0.7 - 1.0), rel=1e-5)
    with pytest.raises(ValueError, match="at least num_bins"):
        losses.build("adafocal").update_from_validation(z, torch.zeros(4, dtype=torch.long))


def _one_per_bin():
    """15 binary samples, confidences 0.52, 0.55, …, 0.94 (c_i = 0.52 + 0.03·i), correct for even i.

    With M = 15 each equal-mass bin holds one sample: inner edges are the midpoints 0.535 + 0.03·i
    (i = 0..13) and, from γ0 = 1 on the focal branch with λ = 1, γ_i = exp(c_i − a_i): between
    exp(0.52 − 1) = 0.619 and exp(0.91) = 2.484, so no branch switch and no clipping.
    """
    conf = 0.52 + 0.03 * torch.arange(15, dtype=torch.float64)
    correct = torch.arange(15) % 2 == 0
    logits = torch.stack([conf.log(), (1 - conf).log()], dim=1)
    return conf, correct, logits, torch.where(correct, 0, 1)


def test_exactly_num_bins_samples_put_one_sample_in_each_bin():
    conf, correct, logits, targets = _one_per_bin()
    loss = losses.build("adafocal")  # M = 15
    loss.update_from_validation(logits, targets)
    edges = torch.cat([torch.zeros(1), 0.535 + 0.03 * torch.arange(14), torch.ones(1)]).float()
    torch.testing.assert_close(loss.bin_edges, edges, atol=1e-6, rtol=0)
    expected = [math.exp(c - a) for c, a in zip(conf.tolist(), correct.double().tolist())]
    assert expected[0] == pytest.approx(math.exp(-0.48)) and expected[1] == pytest.approx(math.exp(0.55))
    torch.testing.assert_close(loss.bin_gamma, torch.tensor(expected, dtype=torch.float32), atol=1e-6, rtol=0)


@pytest.mark.parametrize("wrapper", [None, "mixup", "primary_plus_secondary"])
def test_fewer_validation_samples_than_bins_is_refused_before_any_update(wrapper):
    params = {"primary": "adafocal", "primary_params": {"num_bins": 15}}
    if wrapper == "primary_plus_secondary":
        params["secondary"] = "mdca"
    loss = losses.build("adafocal", num_bins=15) if wrapper is None else losses.build(wrapper, **params)
    loss.check_validation_size(15)  # one sample per bin: accepted
    with pytest.raises(ValueError, match=r"at least num_bins=15 validation samples \(one per equal-mass bin\), got 14"):
        loss.check_validation_size(14)
    _, _, logits, targets = _one_per_bin()
    adafocal = loss if wrapper is None else loss.primary
    with pytest.raises(ValueError, match="got 14"):
        loss.update_from_validation(logits[:14], targets[:14])
    assert adafocal.bin_gamma.tolist() == [1.0] * 15  # the state is untouched
    torch.testing.assert_close(adafocal.bin_edges, torch.linspace(0, 1, 16))


def test_losses_without_validation_state_accept_any_size():
    for name in ("ce", "focal", "mixup"):
        losses.build(name).check_validation_size(0)


def _oracle_update(gamma, conf, correct, num_bins, lam=1.0, s_th=0.2, lo=-2.0, hi=20.0):
    """The documented update in float64 numpy, binning by rank (no ties in the input): sorted confidences
    split into num_bins groups whose sizes differ by at most one (larger groups first)."""
    groups = np.array_split(np.argsort(conf, kind="stable"), num_bins)
    gap = np.array([conf[g].mean() - correct[g].mean() for g in groups])
    focal = gamma > 0
    new = np.where(focal, gamma * np.exp(lam * gap), gamma * np.exp(-lam * gap))
    small = np.abs(new) < s_th
    new = np.where(small, np.where(focal, -s_th, s_th), new)
    return np.clip(new, lo, hi)


def test_normal_size_updates_follow_the_rule_over_two_epochs():
    """N = 200 ≥ M = 15 (13 or 14 per bin): two successive updates equal an independent float64 oracle, from a
    start that exercises every rule (the oracle's trajectory is checked to hit each one)."""
    gen = torch.Generator().manual_seed(0)
    start = np.array([0.21, -0.21, 19.9, -1.99, 1.0, 0.5, -0.5, 5.0, 0.0, 2.0, -1.0, 0.3, -0.3, 10.0, 19.0])
    loss = losses.build("adafocal")
    loss.bin_gamma.copy_(torch.from_numpy(start))
    trajectory = [start]
    for _ in range(2):
        logits = 2.0 * torch.randn(200, 5, generator=gen)
        right = torch.rand(200, generator=gen) < 0.6  # 60% labelled with the prediction, 40% uniformly
        targets = torch.where(right, logits.argmax(1), torch.randint(0, 5, (200,), generator=gen))
        loss.update_from_validation(logits, targets)
        conf, pred = torch.softmax(logits, dim=1).max(dim=1)
        trajectory.append(_oracle_update(trajectory[-1], conf.double().numpy(),
                                         (pred == targets).double().numpy(), 15))
        torch.testing.assert_close(loss.bin_gamma.double(), torch.from_numpy(trajectory[-1]), atol=1e-5, rtol=1e-5)
    first, second = trajectory[1], trajectory[2]
    assert first[0] == -0.2 and first[8] == 0.2 and second[12] == 0.2  # focal → inverse, 0 → focal, inverse → focal
    assert first[3] == -2.0 and first[14] == 20.0 and second[14] == 20.0  # clipped at γ_min and γ_max
    assert first[1] < -0.21 and first[7] > 5.0 and 0 < first[4] < 1.0  # unclipped moves on both branches


def test_epoch_metrics_report_the_per_bin_gamma():
    loss = losses.build("adafocal", num_bins=3, gamma_init=1.0)
    loss.bin_gamma.copy_(torch.tensor([0.5, 1.0, 4.0]))
    assert loss.epoch_metrics() == {"adafocal_gamma_min": 0.5, "adafocal_gamma_mean": pytest.approx(5.5 / 3),
                                    "adafocal_gamma_max": 4.0}
