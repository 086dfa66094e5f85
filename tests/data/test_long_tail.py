"""The long-tail option (metacal/data/long_tail.py): the exponential profile by hand, the thinned splits, the
balanced test set, nesting across ρ, independence from the split, and the error line."""

import math

import pytest
import torch

from metacal import data
from metacal.data.long_tail import class_sizes


@pytest.mark.parametrize("n_max, k, rho, sizes", [
    (100, 3, 100, [100, 10, 1]),  # 100·100^(−1/2) = 10, 100·100^(−1) = 1
    (100, 3, 10, [100, 31, 10]),  # 100·10^(−1/2) = 31.6 → 31
    (1000, 2, 4, [1000, 250]),
    (50, 5, 1, [50, 50, 50, 50, 50]),
    (10, 3, 1000, [10, 1, 1]),  # 10·1000^(−1/2) = 0.32 → at least one sample per class
])
def test_class_sizes_by_hand(n_max, k, rho, sizes):
    assert class_sizes(n_max, k, rho) == sizes


def test_fashion_profile_of_cao_et_al():
    # n_max = 4800, K = 10, ρ = 100: the tail keeps 48, the head 4800, and each ratio is 100^(1/9) ≈ 1.668
    sizes = class_sizes(4800, 10, 100)
    assert sizes[0] == 4800 and sizes[-1] == 48
    assert sizes[4] == math.floor(4800 * 100 ** (-4 / 9))


def counts(split):
    return torch.bincount(split.targets, minlength=10).tolist()


def test_splits_follow_the_profile_and_test_stays_balanced():
    plain = data.build("gaussian_mixture", seed=0, n_train=20_000, n_test=5000)
    b = data.build("gaussian_mixture", seed=0, n_train=20_000, n_test=5000, imbalance=10, draw_seed=3)
    for name in ("train", "val", "meta_val"):
        n_max = min(counts(getattr(plain, name)))
        assert counts(getattr(b, name)) == class_sizes(n_max, 10, 10)
        assert torch.isin(getattr(b, name).index, getattr(plain, name).index).all()
    assert torch.equal(b.test.index, plain.test.index)
    assert b.info["imbalance"] == {"rho": 10.0}


def test_larger_rho_keeps_a_subset_and_seeds_differ():
    kw = dict(seed=0, n_train=20_000, n_test=100)
    ten = data.build("gaussian_mixture", imbalance=10, draw_seed=1, **kw)
    hundred = data.build("gaussian_mixture", imbalance=100, draw_seed=1, **kw)
    other = data.build("gaussian_mixture", imbalance=10, draw_seed=2, **kw)
    assert torch.isin(hundred.train.index, ten.train.index).all()
    assert not torch.equal(ten.train.index, other.train.index)
    assert counts(ten.train) == counts(other.train)


def test_rho_one_changes_nothing():
    plain = data.build("gaussian_mixture", seed=0, n_train=2000, n_test=100)
    same = data.build("gaussian_mixture", seed=0, n_train=2000, n_test=100, imbalance=1)
    assert torch.equal(plain.train.index, same.train.index) and "imbalance" not in same.info


def test_noise_acts_on_the_thinned_splits():
    b = data.build("gaussian_mixture", seed=0, n_train=20_000, n_test=100, imbalance=10, noise_rate=0.2)
    assert torch.bincount(b.train.clean_targets, minlength=10).tolist() == class_sizes(
        min(counts(data.build("gaussian_mixture", seed=0, n_train=20_000, n_test=100).train)), 10, 10)


@pytest.mark.parametrize("rho", [0.5, 0, -3, float("nan"), float("inf"), "10", True])
def test_bad_rho_is_one_line(rho):
    with pytest.raises(ValueError, match=r"imbalance must be a number >= 1"):
        data.build("gaussian_mixture", seed=0, n_train=200, n_test=10, imbalance=rho)
