"""The suite API: model-ready shifted splits (severity 0 bit-identical to the loader), perturbed splits, errors."""


import numpy as np
import pytest
import torch

from metacal.data import build
from metacal.data import shift_suites as ss
from metacal.data.corruptions import corrupt, families as corruption_families
from tests.installed import requires_fashion_mnist



@pytest.fixture(scope="module")
def tiny(fashion_gz_dir):
    return build("fashion_mnist", root=fashion_gz_dir.root)  # 50 train (40/5/5), 20 test, random pixels


def _loader_view(data):
    return torch.stack([data[i][0] for i in range(len(data))])


def test_families_fit_and_checks(tiny):
    families = ss.suite_families(tiny, "corruptions")
    assert families == corruption_families()
    fit = ss.fit_families(tiny, "corruptions")
    assert fit == ["gaussian_noise", "gaussian_blur", "contrast", "rotate"] and 2 * len(fit) <= len(families)
    with pytest.raises(ValueError, match="did you mean corruptions"):
        ss.check_suite(tiny, "corruption")
    with pytest.raises(ValueError, match="needs mnist1d.*suites for fashion_mnist: corruptions"):
        ss.check_suite(tiny, "mnist1d_natural")
    gm = build("gaussian_mixture", n_train=100, n_test=20)
    with pytest.raises(ValueError, match="needs an image dataset.*none"):
        ss.shifted_split(gm, "corruptions", "rotate", 1)
    with pytest.raises(ValueError, match="did you mean rotate"):
        ss.shifted_split(tiny, "corruptions", "rotat", 1)
    with pytest.raises(ValueError, match="severity must be an integer 0..5"):
        ss.shifted_split(tiny, "corruptions", "rotate", 7)
    with pytest.raises(ValueError, match="did you mean meta_val"):
        ss.shifted_split(tiny, "corruptions", "rotate", 1, split="metaval")


def test_severity_zero_is_the_loader_bit_for_bit(tiny):
    for split in ("test", "val", "meta_val"):
        for family in ("gaussian_noise", "rotate"):
            x, y = ss.shifted_split(tiny, "corruptions", family, 0, split)
            assert torch.equal(x, _loader_view(getattr(tiny, split))) and x.dtype == torch.float32
            assert torch.equal(y, getattr(tiny, split).targets) and y.dtype == torch.int64


def test_shifted_split_is_the_normalised_corruption(tiny):
    raw = tiny.test.dataset.images.float() / 255
    x, _ = ss.shifted_split(tiny, "corruptions", "brightness", 2, seed=0)
    expected = (corrupt(raw, "brightness", 2) - 0.2860) / 0.3530
    assert torch.allclose(x, expected, atol=1e-5)
    a = ss.shifted_split(tiny, "corruptions", "impulse_noise", 3, seed=1)[0]
    assert torch.equal(a, ss.shifted_split(tiny, "corruptions", "impulse_noise", 3, seed=1)[0])
    assert not torch.equal(a, ss.shifted_split(tiny, "corruptions", "impulse_noise", 3, seed=2)[0])


def test_perturbed_split_uses_fit_families_only(tiny):
    x, y = ss.perturbed_split(tiny, "corruptions", "val", seed=0)
    clean = _loader_view(tiny.val)
    assert x.shape == clean.shape and torch.equal(y, tiny.val.targets)
    assert torch.equal(x, ss.perturbed_split(tiny, "corruptions", "val", seed=0)[0])
    assert not torch.equal(x, ss.perturbed_split(tiny, "corruptions", "val", seed=1)[0])
    unit = x * 0.3530 + 0.2860  # back to [0, 1]: inside up to rounding
    assert float(unit.min()) > -1e-5 and float(unit.max()) < 1 + 1e-5


def test_model_inputs_shapes_and_errors(tiny):
    imgs = tiny.test.dataset.images  # uint8 (20, 1, 28, 28)
    ref = _loader_view(tiny.test)
    assert torch.equal(ss.model_inputs(tiny, imgs), ref)
    assert torch.equal(ss.model_inputs(tiny, imgs[:, 0].numpy()), ref)  # (N, H, W)
    assert torch.equal(ss.model_inputs(tiny, imgs.permute(0, 2, 3, 1).numpy()), ref)  # (N, H, W, C)
    as_float = ss.model_inputs(tiny, imgs.to(torch.float32) * (1.0 / 255))
    assert torch.equal(as_float, ref)
    with pytest.raises(ValueError, match=r"\(N, 28, 28\), \(N, 1, 28, 28\) or \(N, 28, 28, 1\) for this model; got \(20, 3, 28, 28\)"):
        ss.model_inputs(tiny, imgs.repeat(1, 3, 1, 1))
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        ss.model_inputs(tiny, imgs.float())
    gm = build("gaussian_mixture", n_train=100, n_test=20, dim=4)
    v = np.ones((3, 1, 4), dtype=np.float64)
    assert torch.equal(ss.model_inputs(gm, v), torch.ones(3, 1, 4))
    with pytest.raises(ValueError, match=r"shape \(N, 1, 4\); got \(3, 4\)"):
        ss.model_inputs(gm, np.ones((3, 4)))


@requires_fashion_mnist
def test_real_fashion_mnist_severity_zero_and_shapes():
    b = build("fashion_mnist")
    x, y = ss.shifted_split(b, "corruptions", "zoom", 0)
    assert torch.equal(x, _loader_view(b.test)) and torch.equal(y, b.test.targets)
    x5, _ = ss.shifted_split(b, "corruptions", "translate", 5, seed=0)
    assert x5.shape == (10000, 1, 28, 28) and not torch.equal(x5, x)
