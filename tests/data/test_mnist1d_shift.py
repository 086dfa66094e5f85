"""MNIST-1D natural shift: severity 0 is the bundle's data bit for bit; the shift degrades a probe progressively."""

import numpy as np
import pytest
import torch

from metacal.data import build
from metacal.data import shift_suites as ss
from metacal.data.mnist1d_shift import FAMILIES, NOISE_FACTOR, SHEAR_SCALE, shifted_args, shifted_arrays

N = 1000  # 640 train / 80 / 80, 200 test


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    cache = tmp_path_factory.mktemp("mnist1d_cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("METACAL_DATA", str(cache))  # shifted sets are cached here, not in the user's home
        yield build("mnist1d", root=cache, num_samples=N)


def test_shifted_args_move_only_their_group(bundle):
    args = bundle.info["generator"]
    assert shifted_args(args, "noise", 0) == args
    noisy = shifted_args(args, "noise", 3)
    assert noisy["corr_noise_scale"] == pytest.approx(0.25 * NOISE_FACTOR[3])
    assert noisy["iid_noise_scale"] == pytest.approx(0.02 * NOISE_FACTOR[3])
    assert {k for k in args if noisy[k] != args[k]} == {"corr_noise_scale", "iid_noise_scale"}
    assert {k for k in args if shifted_args(args, "shear", 2)[k] != args[k]} == {"shear_scale"}
    assert shifted_args(args, "all", 5)["shear_scale"] == SHEAR_SCALE[5]
    assert {k for k in args if shifted_args(args, "all", 1)[k] != args[k]} == {
        "corr_noise_scale", "iid_noise_scale", "shear_scale", "scale_coeff", "max_translation"}
    with pytest.raises(ValueError, match="unknown mnist1d_natural family 'blur'"):
        shifted_args(args, "blur", 1)


def test_severity_zero_is_the_bundle_bit_for_bit(bundle):
    for split in ("test", "val"):
        data = getattr(bundle, split)
        ref = torch.stack([data[i][0] for i in range(len(data))])
        x, y = ss.shifted_split(bundle, "mnist1d_natural", "noise", 0, split)
        assert torch.equal(x, ref) and torch.equal(y, data.targets) and y.dtype == torch.int64
    regenerated = shifted_arrays(bundle.info["generator"], "shear", 0)  # the generator itself, args unchanged
    assert torch.equal(regenerated["x_test"], bundle.test.dataset.inputs)


def test_shift_keeps_labels_and_standardisation(bundle):
    x0, y0 = ss.shifted_split(bundle, "mnist1d_natural", "noise", 0)
    x, y = ss.shifted_split(bundle, "mnist1d_natural", "noise", 4)
    assert x.shape == x0.shape == (200, 1, 40) and torch.equal(y, y0)  # the noise draws do not reorder samples
    assert not torch.equal(x, x0)
    assert abs(float(x.mean())) < 0.1 and float(x.std()) == pytest.approx(1.0, abs=0.1)


def test_probe_error_grows_with_severity(bundle):
    from sklearn.linear_model import LogisticRegression

    tr = bundle.train
    probe = LogisticRegression(max_iter=300).fit(tr.dataset.inputs[tr.index, 0].numpy(), tr.targets.numpy())

    def error(family, severity):
        x, y = ss.shifted_split(bundle, "mnist1d_natural", family, severity)
        return 1 - probe.score(x[:, 0].numpy(), y.numpy())

    for family in ("noise", "shear"):
        errors = [error(family, s) for s in (0, 3, 5)]
        assert errors[2] > errors[0] + 0.05 and errors[1] > errors[0], (family, errors)
    assert error("all", 5) > error("all", 0) + 0.1


def test_families_and_fit_families(bundle):
    assert ss.suite_families(bundle, "mnist1d_natural") == list(FAMILIES)
    assert ss.fit_families(bundle, "mnist1d_natural") == ["noise", "shear"]
    x, y = ss.perturbed_split(bundle, "mnist1d_natural", "val", seed=0)
    x0, y0 = ss.shifted_split(bundle, "mnist1d_natural", "noise", 0, "val")
    assert torch.equal(y, y0) and x.shape == x0.shape
    changed = (x - x0).abs().flatten(1).amax(1) > 0
    assert bool(changed.all())  # every sample is perturbed at severity ≥ 1
    assert np.isfinite(x.numpy()).all()
