"""The post-hoc calibrator registry: names and order, every calibrator fitted and applied through it on
over-confident predictions (probabilities out, ECE down), sample-count and class-count checks."""

import pytest
import torch

from metacal.metrics import ece
from metacal.posthoc import registry
from metacal.predictions import Predictions
from metacal.registry import UnknownNameError

NAMES = ["ts_nll", "ts_ece", "hb", "vector", "matrix", "dirichlet", "isotonic"]


def overconfident(n, k, seed, sharpen=2.5):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, k, generator=g, dtype=torch.float64) * 1.5
    y = torch.multinomial(torch.softmax(z, 1), 1, generator=g).squeeze(1)
    return Predictions.from_logits(z * sharpen, y)


@pytest.fixture(scope="module")
def val_test():
    return overconfident(1500, 4, seed=0), overconfident(3000, 4, seed=1)


def test_names_order_and_labels():
    assert registry.available() == NAMES
    assert [registry.spec(n).label for n in NAMES] == ["TS", "TS-ECE", "HB", "VS", "MS-ODIR", "Dir-ODIR", "Iso"]
    with pytest.raises(UnknownNameError, match="unknown post-hoc calibrator 'platt'; available: dirichlet, hb"):
        registry.spec("platt")


@pytest.mark.parametrize("name", NAMES)
def test_every_calibrator_outputs_probabilities_and_lowers_ece(val_test, name):
    val, test = val_test
    probs = registry.calibrate(name, val, test)
    assert probs.shape == (3000, 4) and bool((probs >= 0).all())
    torch.testing.assert_close(probs.sum(1), torch.ones(3000, dtype=probs.dtype), atol=1e-9, rtol=0)
    before, after = float(ece(test.probs, test.labels)), float(ece(probs, test.labels))
    assert before > 0.15  # sharpened 2.5×: clearly over-confident
    assert after < 0.3 * before, (name, before, after)


def test_fitted_params_and_probability_only_files(val_test):
    val, test = val_test
    ts = registry.fit_calibrator("ts_nll", val)
    assert registry.fitted_params(ts) == {"temperature": pytest.approx(2.5, rel=0.15)}
    ms = registry.fit_calibrator("matrix", val)
    assert set(registry.fitted_params(ms)) == {"reg_lambda", "reg_mu"}
    assert registry.fitted_params(registry.fit_calibrator("isotonic", val)) == {}
    # a probs-only file: logit calibrators get ln p, which Dirichlet calibration and TS treat exactly like logits
    val_p, test_p = Predictions(val.probs, val.labels), Predictions(test.probs, test.labels)
    for name in ("dirichlet", "ts_nll"):
        torch.testing.assert_close(registry.calibrate(name, val_p, test_p), registry.calibrate(name, val, test),
                                   atol=1e-6, rtol=0)


def test_too_few_samples_and_class_mismatch(val_test):
    val, test = val_test
    small = Predictions.from_logits(val.logits[:19], val.labels[:19])
    with pytest.raises(ValueError, match=r"matrix scaling \(ODIR\) needs at least 20 fitting samples for K = 4, got N = 19"):
        registry.fit_calibrator("matrix", small)
    assert registry.fit_calibrator("vector", small).weight.shape == (4,)  # 2K = 8 ≤ 19
    other_k = overconfident(100, 3, seed=2)
    for name in ("vector", "matrix", "dirichlet", "isotonic"):
        with pytest.raises(ValueError, match="K = 4 classes"):
            registry.apply_calibrator(name, registry.fit_calibrator(name, val), other_k)
