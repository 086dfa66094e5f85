"""The post-hoc calibrator registry: names and order, every calibrator fitted and applied through it on
over-confident predictions (probabilities out, ECE down), sample-count and class-count checks, which
calibrators a Predictions supports (perturbed companion), state save/load round trips, probabilities refused."""

import pytest
import torch

from metacal.metrics import ece
from metacal.posthoc import Calibrator, TemperatureScaling, registry
from metacal.posthoc.base import LOGITS
from metacal.predictions import Predictions
from metacal.registry import UnknownNameError

NAMES = registry.available()  # every test below runs over the registry, one's own calibrators included
LOGIT_NAMES = [name for name in NAMES if registry.spec(name).input == LOGITS]


def overconfident(n, k, seed, sharpen=2.5):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, k, generator=g, dtype=torch.float64) * 1.5
    y = torch.multinomial(torch.softmax(z, 1), 1, generator=g).squeeze(1)
    return Predictions.from_logits(z * sharpen, y)


def with_perturbed(pred, perturbed):
    return Predictions(pred.probs, pred.labels, pred.logits, pred.gamma, perturbed)


@pytest.fixture(scope="module")
def val_test():
    """Val carries a perturbed companion from the same over-confident model (a different draw)."""
    return with_perturbed(overconfident(1500, 4, seed=0), overconfident(1000, 4, seed=3)), overconfident(3000, 4, seed=1)


def test_built_in_names_order_and_labels():
    built_in = ["ts_nll", "ts_ece", "hb", "vector", "matrix", "dirichlet", "isotonic", "ets", "ts_perturbed"]
    assert NAMES[:9] == built_in  # the evaluate CLI's column order
    assert [registry.spec(n).label for n in built_in] == ["TS", "TS-ECE", "HB", "VS", "MS-ODIR", "Dir-ODIR", "Iso",
                                                          "ETS", "TS-pert."]
    with pytest.raises(UnknownNameError, match="unknown post-hoc calibrator 'platt'; available: dirichlet, ets, hb"):
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


def test_tensors_instead_of_predictions_are_refused_in_one_line(val_test):
    val, test = val_test
    with pytest.raises(TypeError, match=r"^val must be a metacal.predictions.Predictions, got Tensor; wrap"):
        registry.fit_calibrator("ts_nll", val.logits)
    fitted = registry.fit_calibrator("ts_nll", val)
    with pytest.raises(TypeError, match=r"^pred must be a metacal.predictions.Predictions, got ndarray"):
        registry.apply_calibrator("ts_nll", fitted, test.logits.numpy())
    with pytest.raises(TypeError, match=r"^test must be a metacal.predictions.Predictions, got tuple"):
        registry.calibrate("ts_nll", val, (test.logits, test.labels))


def test_available_for_predictions_and_perturbed_refusal(val_test):
    val, _ = val_test
    plain = Predictions.from_logits(val.logits, val.labels)
    assert registry.available(for_predictions=val) == NAMES
    assert registry.available(for_predictions=plain) == [n for n in NAMES if not registry.spec(n).needs_perturbed]
    with pytest.raises(ValueError) as info:
        registry.fit_calibrator("ts_perturbed", plain)
    assert str(info.value) == (
        "perturbation temperature scaling needs perturbed validation predictions: evaluate a run directory with "
        "--shift (python -m metacal.evaluate runs/<r> --shift corruptions), or add perturbed_logits and "
        "perturbed_labels to VAL.npz")
    other_k = with_perturbed(plain, overconfident(50, 3, seed=4))
    with pytest.raises(ValueError, match="perturbed predictions have K = 3 classes, the clean ones K = 4"):
        registry.fit_calibrator("ts_perturbed", other_k)


def test_ts_perturbed_is_nll_temperature_scaling_on_the_concatenation(val_test):
    val, _ = val_test
    fitted = registry.fit_calibrator("ts_perturbed", val)
    joined = torch.cat([val.logits, val.perturbed.logits]), torch.cat([val.labels, val.perturbed.labels])
    assert fitted.temperature == TemperatureScaling().fit(*joined).temperature
    # direct check: a golden-section search over T of the joint mean NLL finds the same T
    z, y = joined
    lo, hi = 0.5, 10.0
    for _ in range(200):
        a, b = lo + 0.382 * (hi - lo), hi - 0.382 * (hi - lo)
        fa = torch.nn.functional.cross_entropy(z / a, y)
        fb = torch.nn.functional.cross_entropy(z / b, y)
        lo, hi = (lo, b) if fa < fb else (a, hi)
    assert fitted.temperature == pytest.approx(lo, rel=1e-5)
    # a perturbed companion far less confident than the clean one pulls T up
    soft = with_perturbed(val, Predictions.from_logits(val.perturbed.logits * 0.2, val.perturbed.labels))
    assert registry.fit_calibrator("ts_perturbed", soft).temperature < fitted.temperature
    flat = overconfident(1000, 4, seed=5, sharpen=2.5)
    noisy = with_perturbed(val, Predictions.from_logits(flat.logits, flat.labels[torch.randperm(1000)]))
    assert registry.fit_calibrator("ts_perturbed", noisy).temperature > fitted.temperature + 0.5
    assert registry.fitted_params(fitted) == {"temperature": fitted.temperature}


def test_ets_fitted_params(val_test):
    val, _ = val_test
    ets = registry.fit_calibrator("ets", val)
    params = registry.fitted_params(ets)
    assert list(params) == ["temperature", "w_ts", "w_raw", "w_uniform"]
    assert params["temperature"] == ets.temperature and params["w_ts"] + params["w_raw"] + params["w_uniform"] == \
        pytest.approx(1.0, abs=1e-15)


@pytest.mark.parametrize("name", NAMES)
def test_save_and_load_state_round_trip_bit_for_bit(val_test, name, tmp_path):
    val, test = val_test
    fitted = registry.fit_calibrator(name, val)
    torch.save(registry.save_state(name, fitted), tmp_path / "state.pt")
    state = torch.load(tmp_path / "state.pt")
    assert state["calibrator"] == name
    rebuilt = registry.load_state(name, state)
    assert type(rebuilt) is type(fitted)
    assert torch.equal(registry.apply_calibrator(name, rebuilt, test), registry.apply_calibrator(name, fitted, test))
    rebuilt_direct = type(fitted)() if name != "hb" else registry.spec("hb")()
    rebuilt_direct.load_state_dict(fitted.state_dict())  # the class's own state_dict / load_state_dict
    assert torch.equal(registry.apply_calibrator(name, rebuilt_direct, test),
                       registry.apply_calibrator(name, fitted, test))
    wrong = "ts_nll" if name != "ts_nll" else "hb"
    with pytest.raises(ValueError, match=f"state was saved for calibrator '{name}', not '{wrong}'"):
        registry.load_state(wrong, state)


@pytest.mark.parametrize("name", LOGIT_NAMES)
def test_logit_calibrators_refuse_probabilities(val_test, name):
    val, _ = val_test
    as_logits = Predictions.from_logits(val.probs, val.labels)  # probabilities stored as if they were logits
    as_logits = with_perturbed(as_logits, Predictions.from_logits(val.perturbed.logits, val.perturbed.labels))
    with pytest.raises(ValueError, match=r"got probabilities \(every row in \[0, 1\] summing to 1\); pass logits, "
                                         r"or log-probabilities \(ln p\) if only probabilities exist$"):
        registry.fit_calibrator(name, as_logits)


@pytest.mark.parametrize("name", NAMES)
def test_every_calibrator_is_a_module_whose_forward_is_the_log_of_transform(val_test, name):
    val, test = val_test
    fitted = registry.fit_calibrator(name, val)
    assert isinstance(fitted, Calibrator) and isinstance(fitted, torch.nn.Module)
    x = test.probs if registry.spec(name).input != LOGITS else test.logits_for_scaling()
    probs = fitted.transform(x)
    torch.testing.assert_close(fitted(x), probs.log(), atol=1e-12, rtol=0)  # the module call: log-probabilities
    assert registry.fitted_params(fitted) == fitted.fitted_params()
