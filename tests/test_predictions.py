"""metacal.predictions: the Predictions type, its .npz writer and the validating loader."""

import io
import math
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from metacal.predictions import Predictions, load_predictions

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"
LOGITS = np.random.default_rng(0).normal(size=(6, 3))
LABELS = np.array([0, 1, 2, 0, 1, 2])
UNIFORM = np.full((6, 3), 1 / 3)


def _write(tmp_path, **arrays) -> Path:
    path = tmp_path / "pred.npz"
    np.savez(path, **arrays)
    return path


def test_softmax_hand_derived_and_stable_for_huge_logits():
    pred = Predictions.from_logits(torch.tensor([[0.0, math.log(3.0)], [1000.0, 0.0]]), torch.tensor([1, 0]))
    assert pred.probs.dtype == torch.float64 and pred.labels.dtype == torch.int64
    torch.testing.assert_close(pred.probs, torch.tensor([[0.25, 0.75], [1.0, 0.0]], dtype=torch.float64))
    assert pred.num_classes == 2 and pred.gamma is None


def test_logits_for_scaling_is_logits_or_clamped_log_probs():
    logits = torch.tensor([[2.0, -1.0]])
    assert Predictions.from_logits(logits, torch.tensor([0])).logits_for_scaling() is logits
    only_probs = Predictions(torch.tensor([[0.0, 1.0]], dtype=torch.float64), torch.tensor([1]))
    torch.testing.assert_close(only_probs.logits_for_scaling(),
                               torch.tensor([[math.log(1e-12), 0.0]], dtype=torch.float64))


def test_round_trip_logits_and_gamma(tmp_path):
    logits = torch.from_numpy(LOGITS.astype(np.float32))
    gamma = torch.tensor([0.5, 1.0, 2.0, 3.5, 0.0, 5.25])
    path = tmp_path / "deep" / "dir" / "val.npz"  # parents are created
    Predictions.from_logits(logits, torch.from_numpy(LABELS), gamma).save(path)
    with np.load(path) as f:  # the stored format
        assert f.files == ["logits", "labels", "gamma"]
        assert (f["logits"].dtype, f["labels"].dtype, f["gamma"].dtype) == (np.float32, np.int64, np.float32)
    back = load_predictions(path)
    assert torch.equal(back.logits, logits.double()) and torch.equal(back.labels, torch.from_numpy(LABELS))
    assert torch.equal(back.gamma, gamma.double())
    torch.testing.assert_close(back.probs, torch.softmax(logits.double(), 1), rtol=0, atol=0)
    assert [p.name for p in path.parent.iterdir()] == ["val.npz"]  # no temporary file left behind


def test_round_trip_probs_only(tmp_path):
    probs = torch.tensor([[0.2, 0.8], [0.6, 0.4]], dtype=torch.float64)
    path = tmp_path / "p.npz"
    Predictions(probs, torch.tensor([1, 0])).save(path)
    with np.load(path) as f:
        assert f.files == ["probs", "labels"] and f["probs"].dtype == np.float64
    back = load_predictions(path)
    assert back.logits is None and back.gamma is None
    assert back.probs.tolist() == [[0.2, 0.8], [0.6, 0.4]] and back.labels.tolist() == [1, 0]


def test_save_replaces_an_existing_file(tmp_path):
    path = tmp_path / "test.npz"
    path.write_bytes(b"old content")
    Predictions.from_logits(torch.zeros(2, 3), torch.tensor([0, 2])).save(path)
    assert load_predictions(path).probs.tolist() == [[1 / 3] * 3] * 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["test.npz"]


def test_same_bytes_as_the_former_run_writer(tmp_path):
    """A run's predictions/{val,test}.npz: np.savez(logits=float32, labels=int64), byte for byte."""
    logits = torch.from_numpy(LOGITS.astype(np.float32))
    Predictions.from_logits(logits, torch.from_numpy(LABELS)).save(tmp_path / "new.npz")
    old = io.BytesIO()
    np.savez(old, logits=LOGITS.astype(np.float32), labels=LABELS.astype(np.int64))
    assert (tmp_path / "new.npz").read_bytes() == old.getvalue()


@pytest.mark.parametrize("name, n", [("predictions_test.npz", 2000), ("predictions_val.npz", 1000)])
def test_committed_example_files(tmp_path, name, n):
    pred = load_predictions(EXAMPLES / name)
    assert pred.labels.shape == (n,) and pred.num_classes == 10 and pred.gamma is None
    if name == "predictions_test.npz":  # evaluate's JSON on this file: error 0.1665 = 333 / 2000
        assert int((pred.probs.argmax(1) != pred.labels).sum()) == 333
    pred.save(tmp_path / name)
    with zipfile.ZipFile(EXAMPLES / name) as committed, zipfile.ZipFile(tmp_path / name) as saved:
        assert saved.namelist() == committed.namelist() == ["logits.npy", "labels.npy"]
        for member in committed.namelist():  # same arrays, dtypes and headers; only the zip compression differs
            assert saved.read(member) == committed.read(member), member


def test_logits_win_over_probs_and_float_labels_are_accepted(tmp_path):
    path = _write(tmp_path, logits=np.zeros((6, 3)), probs=UNIFORM * 5, labels=LABELS.astype(np.float64))
    pred = load_predictions(path)
    assert pred.logits is not None and pred.labels.dtype == torch.int64 and pred.labels.tolist() == LABELS.tolist()


def test_probs_within_tolerance_are_accepted(tmp_path):
    assert load_predictions(_write(tmp_path, probs=UNIFORM * (1 + 5e-4), labels=LABELS)).logits is None


NAN_TWO_ROWS = LOGITS.copy()
NAN_TWO_ROWS[[0, 0, 4], [0, 2, 1]] = [np.nan, np.inf, np.nan]  # three bad entries in two rows


@pytest.mark.parametrize("arrays, needle", [
    ({"logits": LOGITS}, "missing key 'labels' (found: logits)"),
    ({}, "missing key 'labels' (found: none)"),
    ({"labels": LABELS, "gamma": LABELS}, "missing key 'logits' or 'probs' (found: gamma, labels)"),
    ({"logits": LOGITS[:, 0], "labels": LABELS}, "'logits' must be N×K with N ≥ 1 and K ≥ 2, got shape (6,)"),
    ({"logits": LOGITS[:, :1], "labels": LABELS}, "got shape (6, 1)"),
    ({"logits": np.zeros((0, 3)), "labels": LABELS[:0]}, "got shape (0, 3)"),
    ({"logits": np.full((6, 3), "a"), "labels": LABELS}, "'logits' must be numeric, got dtype <U1"),
    ({"logits": LOGITS, "labels": LABELS[:5]}, "'labels' must have shape (6,) to match 'logits' (6, 3), got (5,)"),
    ({"logits": LOGITS, "labels": LABELS[:, None]}, "got (6, 1)"),
    ({"logits": LOGITS, "labels": LABELS + 0.5}, "'labels' must be integers, got dtype float64"),
    ({"logits": LOGITS, "labels": np.full(6, np.nan)}, "'labels' must be integers"),
    ({"logits": NAN_TWO_ROWS, "labels": LABELS}, "'logits' contains NaN or inf in 2 row(s)"),
    ({"probs": np.where(np.eye(6, 3) > 0, np.inf, UNIFORM), "labels": LABELS}, "'probs' contains NaN or inf in 3"),
    ({"logits": LOGITS, "labels": LABELS + 1}, "'labels' must lie in [0, 2] for K = 3, got [1, 3]"),
    ({"logits": LOGITS, "labels": LABELS - 1}, "got [-1, 1]"),
    ({"probs": np.tile([-0.2, 0.7, 0.5], (6, 1)), "labels": LABELS}, "'probs' must lie in [0, 1], got [-0.2, 0.7]"),
    ({"probs": UNIFORM * 1.01, "labels": LABELS}, "rows must sum to 1 (tolerance 0.001); max deviation 0.01"),
    ({"logits": LOGITS, "labels": LABELS, "gamma": np.ones(5)},
     "'gamma' must be 6 numbers (one per sample), got shape (5,)"),
    ({"logits": LOGITS, "labels": LABELS, "gamma": np.full(6, "x")}, "dtype <U1"),
    ({"logits": LOGITS, "labels": LABELS, "gamma": np.array([1, np.inf, 2, np.nan, 0, 1])},
     "'gamma' contains NaN or inf in 2 sample(s)"),
])  # fmt: skip
def test_bad_content_is_a_one_line_value_error(tmp_path, arrays, needle):
    path = _write(tmp_path, **arrays)
    with pytest.raises(ValueError) as exc:
        load_predictions(path)
    message = str(exc.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    assert needle in message, message


@pytest.mark.parametrize("content, needle", [
    (b"not a zip archive", "cannot read as .npz (ValueError"),  # neither zip nor .npy: taken for a pickle
    (b"", "cannot read as .npz"),
    ("npy", "expected an .npz archive (np.savez), got a single .npy array"),
    ("object", "cannot read as .npz (ValueError"),  # object arrays need pickle, which is refused
])  # fmt: skip
def test_unreadable_file_is_a_one_line_value_error(tmp_path, content, needle):
    path = tmp_path / "pred.npz"
    if content == "npy":
        with open(path, "wb") as fh:
            np.save(fh, LOGITS)
    elif content == "object":
        np.savez(path, logits=np.array([LOGITS, None], dtype=object), labels=LABELS)
    else:
        path.write_bytes(content)
    with pytest.raises(ValueError) as exc:
        load_predictions(path)
    assert "\n" not in str(exc.value) and needle in str(exc.value), str(exc.value)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nope\.npz: no such file; pass a \.npz with 'labels'"):
        load_predictions(tmp_path / "nope.npz")
    with pytest.raises(FileNotFoundError):
        load_predictions(tmp_path)  # a directory is not a predictions file


PERTURBED = np.random.default_rng(1).normal(size=(4, 3))
PERTURBED_LABELS = np.array([2, 2, 0, 1])


def test_round_trip_perturbed_companion(tmp_path):
    pert = Predictions.from_logits(torch.from_numpy(PERTURBED).float(), torch.from_numpy(PERTURBED_LABELS))
    pred = Predictions.from_logits(torch.from_numpy(LOGITS).float(), torch.from_numpy(LABELS), perturbed=pert)
    pred.save(tmp_path / "p.npz")
    with np.load(tmp_path / "p.npz") as raw:
        assert sorted(raw.files) == ["labels", "logits", "perturbed_labels", "perturbed_logits"]
        assert raw["perturbed_logits"].dtype == np.float32 and raw["perturbed_labels"].dtype == np.int64
    back = load_predictions(tmp_path / "p.npz")
    assert back.perturbed is not None and back.perturbed.perturbed is None
    np.testing.assert_array_equal(back.perturbed.logits.numpy(), PERTURBED.astype(np.float32))
    np.testing.assert_array_equal(back.perturbed.labels.numpy(), PERTURBED_LABELS)
    torch.testing.assert_close(back.perturbed.probs, torch.softmax(back.perturbed.logits, 1))
    assert load_predictions(_write(tmp_path, logits=LOGITS, labels=LABELS)).perturbed is None
    # a probability-only companion is written as ln p, which gives back the same probabilities
    probs_only = Predictions(torch.from_numpy(UNIFORM), torch.from_numpy(LABELS),
                             perturbed=Predictions(torch.full((2, 3), 1 / 3, dtype=torch.float64), torch.tensor([0, 1])))
    probs_only.save(tmp_path / "q.npz")
    torch.testing.assert_close(load_predictions(tmp_path / "q.npz").perturbed.probs,
                               torch.full((2, 3), 1 / 3, dtype=torch.float64))


@pytest.mark.parametrize("extra, needle", [
    ({"perturbed_logits": PERTURBED}, "'perturbed_logits' without 'perturbed_labels'; store both or neither"),
    ({"perturbed_labels": PERTURBED_LABELS}, "'perturbed_labels' without 'perturbed_logits'"),
    ({"perturbed_logits": PERTURBED[:, :2], "perturbed_labels": PERTURBED_LABELS},
     "'perturbed_logits' must have K = 3 columns like the main predictions, got (4, 2)"),
    ({"perturbed_logits": PERTURBED, "perturbed_labels": PERTURBED_LABELS[:3]},
     "'perturbed_labels' must have shape (4,) to match 'perturbed_logits' (4, 3), got (3,)"),
    ({"perturbed_logits": np.where(np.eye(4, 3) > 0, np.nan, PERTURBED), "perturbed_labels": PERTURBED_LABELS},
     "'perturbed_logits' contains NaN or inf in 3 row(s)"),
    ({"perturbed_logits": PERTURBED, "perturbed_labels": np.array([0, 1, 3, 0])},
     "'perturbed_labels' must lie in [0, 2] for K = 3, got [0, 3]"),
    ({"perturbed_logits": PERTURBED, "perturbed_labels": np.array([0.5, 1, 2, 0])},
     "'perturbed_labels' must be integers, got dtype float64"),
])  # fmt: skip
def test_bad_perturbed_arrays_are_one_line_value_errors(tmp_path, extra, needle):
    with pytest.raises(ValueError) as info:
        load_predictions(_write(tmp_path, logits=LOGITS, labels=LABELS, **extra))
    assert needle in str(info.value) and "\n" not in str(info.value)
