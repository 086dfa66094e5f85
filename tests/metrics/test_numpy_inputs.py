"""numpy arrays and lists in the public metrics/posthoc APIs — e.g. the arrays of a run's predictions .npz
(written by metacal.predictions like the trainer does) — give the same results as tensors."""

import numpy as np
import pytest
import torch

from metacal import metrics
from metacal.metrics import CalibrationAccumulator, as_tensor
from metacal.posthoc import HistogramBinning, TemperatureScaling, fit_temperature_nll
from metacal.predictions import Predictions


@pytest.fixture
def npz(tmp_path):
    """np.load of a predictions file written by Predictions.save (float32 logits, int64 labels, float32 γ)."""
    g = torch.Generator().manual_seed(3)
    labels = torch.randint(0, 4, (300,), generator=g)
    logits = 2.5 * torch.randn(300, 4, generator=g)
    logits[torch.arange(300), labels] += 1.5
    Predictions.from_logits(logits, labels, gamma=torch.rand(300, generator=g)).save(tmp_path / "test.npz")
    with np.load(tmp_path / "test.npz") as z:
        return {k: z[k] for k in z.files}


def softmax_np(z: np.ndarray) -> np.ndarray:
    e = np.exp(z.astype(np.float64) - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_summary_on_npz_arrays_equals_tensor_path(npz):
    probs = softmax_np(npz["logits"])
    assert isinstance(npz["labels"], np.ndarray) and npz["logits"].dtype == np.float32
    got = metrics.summary(probs, npz["labels"])
    want = metrics.summary(torch.from_numpy(probs), torch.from_numpy(npz["labels"]))
    assert got.keys() == want.keys() and all(got[k] == want[k] for k in want)
    assert metrics.binning_free_summary(probs, npz["labels"]) == metrics.binning_free_summary(
        torch.from_numpy(probs), torch.from_numpy(npz["labels"]))


@pytest.mark.parametrize("fn", [metrics.ece, metrics.mce, metrics.ace, metrics.rmsce, metrics.nll, metrics.brier,
                                metrics.error_rate, metrics.classwise_ece, metrics.ks_error, metrics.sece_metric,
                                metrics.kde_ece, metrics.smece, metrics.ece_sweep])
def test_every_metric_takes_arrays_and_lists(fn, npz):
    probs, labels = softmax_np(npz["logits"]), npz["labels"]
    want = float(fn(torch.from_numpy(probs), torch.from_numpy(labels)))
    assert float(fn(probs, labels)) == want
    assert float(fn(probs.tolist(), labels.tolist())) == pytest.approx(want, abs=1e-12)  # lists → float64/int64


def test_confidence_level_functions_and_bins(npz):
    probs = softmax_np(npz["logits"])
    conf, correct = probs.max(axis=1), (probs.argmax(axis=1) == npz["labels"])
    t_conf, t_correct = torch.from_numpy(conf), torch.from_numpy(correct).double()
    assert float(metrics.calibration_error_from_confidence(conf, correct.astype(float))) == float(
        metrics.calibration_error_from_confidence(t_conf, t_correct))
    stats = metrics.bin_statistics(conf, correct.astype(float), 10)
    assert torch.equal(stats.count, metrics.bin_statistics(t_conf, t_correct, 10).count)
    assert metrics.ece_vs_bins(probs, npz["labels"], (10, 20)) == metrics.ece_vs_bins(
        torch.from_numpy(probs), torch.from_numpy(npz["labels"]), (10, 20))


def test_temperature_scaling_fits_the_trainers_npz(npz):
    """The issue's failing call: TemperatureScaling("nll").fit(z["logits"], z["labels"])."""
    ts = TemperatureScaling("nll").fit(npz["logits"], npz["labels"])
    ref = TemperatureScaling("nll").fit(torch.from_numpy(npz["logits"]), torch.from_numpy(npz["labels"]))
    assert ts.temperature == ref.temperature and ts.temperature != 1.0
    out = ts.transform(npz["logits"])
    assert isinstance(out, torch.Tensor) and torch.equal(out, ref.transform(torch.from_numpy(npz["logits"])))
    assert torch.equal(ts.scale(npz["logits"]), torch.from_numpy(npz["logits"]) / ts.temperature)
    grid = TemperatureScaling("ece_grid").fit(npz["logits"].tolist(), npz["labels"].tolist())
    assert grid.temperature == TemperatureScaling("ece_grid").fit(
        torch.tensor(npz["logits"].tolist(), dtype=torch.float64), torch.from_numpy(npz["labels"])).temperature
    assert fit_temperature_nll(npz["logits"], npz["labels"]) == ref.temperature


@pytest.mark.parametrize("mode", ["top", "ovr"])
def test_histogram_binning_takes_arrays(npz, mode):
    probs, labels = softmax_np(npz["logits"]), npz["labels"]
    hb = HistogramBinning(10, mode).fit(probs, labels)
    ref = HistogramBinning(10, mode).fit(torch.from_numpy(probs), torch.from_numpy(labels))
    assert torch.equal(hb.bin_values.nan_to_num(-1), ref.bin_values.nan_to_num(-1))  # NaN: empty bin
    assert torch.equal(hb.transform(probs), ref.transform(torch.from_numpy(probs)))
    if mode == "top":
        assert torch.equal(hb.calibrate_confidence(probs.max(axis=1)), ref.calibrate_confidence(
            torch.from_numpy(probs.max(axis=1))))


def test_accumulator_takes_arrays(npz):
    acc, ref = CalibrationAccumulator(inputs="logits"), CalibrationAccumulator(inputs="logits")
    for part in np.array_split(np.arange(300), 3):
        acc.update(npz["logits"][part], npz["labels"][part])
        ref.update(torch.from_numpy(npz["logits"][part]), torch.from_numpy(npz["labels"][part]))
    assert acc.compute() == ref.compute()


def test_odd_arrays_are_converted():
    readonly = np.array([[0.2, 0.8], [0.6, 0.4]])
    readonly.flags.writeable = False
    assert as_tensor(readonly, "probs").dtype == torch.float64
    assert torch.equal(as_tensor(readonly[::-1], "p"), torch.tensor([[0.6, 0.4], [0.2, 0.8]], dtype=torch.float64))
    assert as_tensor(np.array([1, 0], dtype=">i4"), "labels").tolist() == [1, 0]  # big-endian
    assert as_tensor(np.array([1, 0], dtype=np.uint32), "labels").dtype == torch.int64
    assert float(metrics.ece(readonly, np.array([1, 0]))) == float(
        metrics.ece(torch.tensor(readonly), torch.tensor([1, 0])))


@pytest.mark.parametrize("probs, labels, message", [
    ("abc", [0], "probs must be a tensor, numpy array or list of numbers, got str"),
    ([[0.5, 0.5], [1.0]], [0, 1], "probs must be a rectangular array of numbers"),
    (np.array([["a", "b"]]), [0], "probs must hold numbers, got ndarray of dtype <U1"),
    ([0.5, 0.5], [0], r"probs must be 2-D \(N, K\), got \(2,\)"),
    ([[0.5, 0.5]], [0.0], "labels must hold integer class indices"),
    ([[0.5, 0.5]], None, "labels must be a tensor, numpy array or list of numbers, got NoneType"),
])  # fmt: skip
def test_bad_inputs_are_one_line_errors(probs, labels, message):
    with pytest.raises(ValueError, match=message) as err:
        metrics.summary(probs, labels)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError) as err:
        TemperatureScaling().fit("logits", [0])
    assert str(err.value) == "logits must be a tensor, numpy array or list of numbers, got str"
