"""Statistical properties, summary keys, the streaming accumulator, device/dtype following."""

import math

import pytest
import torch

import metacal.metrics as M


def sample(n, k, scale, seed, sharpen=1.0):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, k, generator=g, dtype=torch.float64) * scale
    true = z.softmax(1)
    labels = torch.multinomial(true, 1, generator=g).squeeze(1)
    return (z * sharpen).softmax(1), labels


def test_labels_from_predicted_probs_give_ece_near_zero():
    # N = 20000, 15 bins: the sampling noise of ECE is about Σ_b sqrt(n_b p(1−p))/N ≲ sqrt(15·.25/N) ≈ .014
    probs, labels = sample(20000, 10, 2.0, seed=0)
    calibrated = M.ece(probs, labels).item()
    assert calibrated < 0.015
    over, _ = sample(20000, 10, 2.0, seed=0, sharpen=2.5)  # same labels, over-confident probs
    miscalibrated = M.ece(over, labels).item()
    assert miscalibrated > 0.1 and miscalibrated > 8 * calibrated
    assert M.classwise_ece(probs, labels).item() < M.classwise_ece(over, labels).item()
    assert M.ace(probs, labels).item() < 0.015 and M.ks_error(probs, labels).item() < 0.015


def test_ece_is_at_most_rmsce_at_most_mce():
    # Jensen: Σ w|g| ≤ sqrt(Σ w g²) ≤ max |g|
    probs, labels = sample(3000, 5, 3.0, seed=2, sharpen=1.7)
    e, r, m = M.ece(probs, labels).item(), M.rmsce(probs, labels).item(), M.mce(probs, labels).item()
    assert e <= r + 1e-12 <= m + 2e-12


def test_summary_keys_and_values_agree_with_single_metrics():
    probs, labels = sample(800, 6, 2.0, seed=3, sharpen=1.5)
    s = M.summary(probs, labels, num_bins=10)
    assert tuple(s) == M.SUMMARY_KEYS
    assert set(s) == {"n", "num_classes", "error", "nll", "brier", "ece", "mce", "ace", "rmsce", "ece_sweep",
                      "debiased_l2_ce", "classwise_ece", "sece", "kde_ece", "smece", "aurc", "augrc",
                      "risk_at_coverage", "coverage_at_risk"}  # fmt: skip
    assert s["aurc"] == pytest.approx(M.selective_summary(probs, labels)["aurc"], abs=1e-15)
    assert s["n"] == 800 and s["num_classes"] == 6
    assert s["ece"] == pytest.approx(M.ece(probs, labels, 10).item(), abs=1e-12)
    assert s["ace"] == pytest.approx(M.ace(probs, labels, 10).item(), abs=1e-12)
    assert s["classwise_ece"] == pytest.approx(M.classwise_ece(probs, labels, 10).item(), abs=1e-12)
    assert s["ece_sweep"] == pytest.approx(M.ece_sweep(probs, labels).item(), abs=1e-12)
    assert s["debiased_l2_ce"] == pytest.approx(M.debiased_l2_ce(probs, labels, 10).item(), abs=1e-12)
    assert s["debiased_l2_ce"] < s["rmsce"]  # the correction only subtracts
    assert s["nll"] == pytest.approx(torch.nn.functional.nll_loss(probs.log(), labels).item(), abs=1e-12)
    numbers = [*(v for k, v in s.items() if k not in ("n", "num_classes", "risk_at_coverage", "coverage_at_risk")),
               *s["risk_at_coverage"].values(), *s["coverage_at_risk"].values()]
    assert len(numbers) == len(s) - 2 + 2 and all(isinstance(v, float) and math.isfinite(v) for v in numbers)
    # the trainer's cheap per-epoch view: the same numbers without the binning-free estimators
    cheap = M.summary(probs, labels, num_bins=10, binning_free=False)
    assert M.BINNING_FREE_KEYS == ("sece", "kde_ece", "smece")
    assert cheap == {k: v for k, v in s.items() if k not in M.BINNING_FREE_KEYS}
    assert M.binning_free_summary(probs, labels) == {k: s[k] for k in M.BINNING_FREE_KEYS}


def test_accumulator_streams_logits_and_probs_and_gathers():
    g = torch.Generator().manual_seed(4)
    logits = torch.randn(500, 4, generator=g) * 2
    labels = torch.randint(0, 4, (500,), generator=g)
    acc = M.CalibrationAccumulator(num_bins=15)
    for start in range(0, 500, 128):
        acc.update(logits[start : start + 128], labels[start : start + 128])  # auto → logits
    direct = M.summary(logits.softmax(1), labels)
    out = acc.compute()
    assert acc.num_samples == 500
    for key in direct:
        assert out[key] == pytest.approx(direct[key], abs=1e-5)
    # probs are recognised as probabilities (not softmaxed again)
    acc2 = M.CalibrationAccumulator(inputs="auto")
    acc2.update(logits.softmax(1), labels)
    assert acc2.compute()["ece"] == pytest.approx(direct["ece"], abs=1e-6)
    # gather is applied to every stored tensor (e.g. accelerator.gather_for_metrics)
    calls = []

    def gather(t):
        calls.append(t.shape[0])
        return torch.cat([t, t])

    acc3 = M.CalibrationAccumulator(gather=gather)
    acc3.update(logits[:100], labels[:100])
    assert calls == [100, 100] and acc3.num_samples == 200
    assert acc3.compute()["ece"] == pytest.approx(M.summary(logits[:100].softmax(1), labels[:100])["ece"], abs=1e-6)
    with pytest.raises(ValueError, match="before any update"):
        M.CalibrationAccumulator().compute()


def test_float32_input_and_device_following():
    probs, labels = sample(400, 5, 2.0, seed=5)
    e64 = M.ece(probs, labels).item()
    e32 = M.ece(probs.float(), labels)
    assert e32.dtype == torch.float32 and e32.device == probs.device
    assert e32.item() == pytest.approx(e64, abs=1e-5)
    if torch.cuda.is_available():  # pragma: no cover - CPU here
        assert M.ece(probs.cuda(), labels.cuda()).item() == pytest.approx(e64, abs=1e-9)
