"""The automatic scalar's stepper (metacal/meta/auto.py): the gap it measures against a direct numpy
computation, the shards of several processes summing to the one-process sample, when it updates, and
what it writes into the loss."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from meta_nets import TinyMLP
from torch.utils.data import DataLoader, TensorDataset

from metacal.losses import build as build_loss
from metacal.meta.auto import AutoScalar, AutoSettings, build_finder, update_points
from metacal.meta.gap_control import gap_estimate, gap_sums
from metacal.meta.root_finder import SignRootFinder


def data(n: int = 300, seed: int = 0) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    return TensorDataset(torch.randn(n, 6, generator=g), torch.randint(0, 3, (n,), generator=g))


def test_gap_and_its_standard_error_match_numpy():
    torch.manual_seed(0)
    model, ds = TinyMLP(batchnorm=True), data()
    model.train()
    sums = gap_sums(model, DataLoader(ds, batch_size=64), torch.device("cpu"))
    assert model.training  # restored after the eval-mode pass
    model.eval()
    with torch.no_grad():
        probs = model(ds.tensors[0]).softmax(-1).double().numpy()
    d = probs.max(1) - (probs.argmax(1) == ds.tensors[1].numpy())
    gap, se = gap_estimate(sums)
    assert gap == pytest.approx(d.mean(), abs=1e-7)  # float32 probabilities
    assert se == pytest.approx(d.std(ddof=1) / np.sqrt(len(d)), abs=1e-7)


def test_two_process_shards_sum_to_the_one_process_sample():
    """Each rank measures its share; the sums (what the processes average) give the one-process ĝ and s."""
    torch.manual_seed(1)
    model, ds = TinyMLP(), data(301)
    loss = build_loss("focal", gamma=1.0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def stepper(rank: int, world: int) -> AutoScalar:
        return AutoScalar(model, loss, opt, ds, SignRootFinder(1.0, 1.0), "gamma", steps_per_epoch=4,
                          sample=200, rank=rank, world_size=world, average=lambda ts: None)

    one = gap_sums(model, stepper(0, 1).control.loader, torch.device("cpu"))
    two = [gap_sums(model, stepper(r, 2).control.loader, torch.device("cpu")) for r in (0, 1)]
    assert [len(stepper(r, 2).control.loader.dataset) for r in (0, 1)] == [100, 100]
    torch.testing.assert_close(two[0] + two[1], one, rtol=1e-6, atol=1e-6)  # float32 batches of other sizes
    assert gap_estimate(two[0] + two[1]) == pytest.approx(gap_estimate(one), abs=1e-8)


@pytest.mark.parametrize("steps, updates, points", [(10, 1, {10}), (10, 3, {3, 7, 10}), (4, 4, {1, 2, 3, 4})])
def test_update_points(steps, updates, points):
    assert update_points(steps, updates) == frozenset(points)


def test_more_updates_than_steps_is_refused():
    with pytest.raises(ValueError, match=r"updates_per_epoch must be in \[1, 4\]"):
        update_points(4, 5)


def test_updates_at_the_epoch_points_and_writes_the_loss():
    """γ changes only after the update points; the loss trains with the finder's value; the report says
    which γ the measured network trained with and which the update chose."""
    torch.manual_seed(2)
    model, ds = TinyMLP(), data()
    loss = build_loss("focal", gamma=1.0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gaps = iter([0.5, -0.5, 0.5, 0.0])  # an over-confident, an under-confident, … measurement
    auto = AutoScalar(model, loss, opt, ds, SignRootFinder(2.0, 1.0, hi=10.0, band=1.0), "gamma",
                      steps_per_epoch=3, updates_per_epoch=1)
    auto.control.measure = lambda model: (next(gaps), 0.01)
    assert loss.gamma == 2.0
    x, y = ds.tensors[0][:32], ds.tensors[1][:32]
    seen = []
    for _ in range(12):
        out = auto.step(x, y)
        seen.append((float(out.gamma[0]), out.control is not None, loss.gamma))
    # +1; a flip: −0.5; a flip: +0.25; inside the band: hold
    assert [s[0] for s in seen] == [2.0] * 3 + [3.0] * 3 + [2.5] * 3 + [2.75] * 3
    assert [i for i, s in enumerate(seen) if s[1]] == [2, 5, 8, 11]
    assert loss.gamma == 2.75 and auto.epoch_metrics()["auto_gamma_trained"] == 2.75
    report = auto.epoch_metrics()
    assert report["auto_decision"] == 0.0  # the last gap was inside the band
    assert (report["auto_held"], report["auto_at_limit"], report["auto_max"]) == (0.0, 0.0, 10.0)


def test_a_loss_without_the_scalar_is_refused():
    model, ds = TinyMLP(), data()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="no scalar 'gamma'"):
        AutoScalar(model, build_loss("focal", gamma=[1.0, 2.0, 3.0]), opt, ds, SignRootFinder(1.0, 1.0), "gamma",
                   steps_per_epoch=3)
    with pytest.raises(ValueError, match="the gap needs at least 2 held-out samples"):
        AutoScalar(model, build_loss("focal"), opt, ds, SignRootFinder(1.0, 1.0), "gamma", steps_per_epoch=3,
                   sample=1)
    # a sample larger than the split is the whole split, in the order of sample=None
    whole = AutoScalar(model, build_loss("focal"), opt, ds, SignRootFinder(1.0, 1.0), "gamma", steps_per_epoch=3)
    capped = AutoScalar(model, build_loss("focal"), opt, ds, SignRootFinder(1.0, 1.0), "gamma", steps_per_epoch=3,
                        sample=5000)
    assert capped.control.loader.dataset.indices == whole.control.loader.dataset.indices == list(range(300))


def test_label_smoothing_epsilon_is_a_knob_too():
    loss = build_loss("label_smoothing", epsilon=0.05)
    assert loss.confidence_knob == "epsilon" and loss.knob_range == (0.0, 1.0)
    assert build_loss("dual_focal").confidence_knob == "gamma"
    assert build_loss("inverse_focal").confidence_knob is None  # its γ raises confidence
    assert build_loss("ce").confidence_knob is None


@pytest.mark.parametrize("name, params, first_step, distance", [
    ("focal", {}, 1 / 3, 2.0),  # 2·max(1/3, 1): the unit, not the first step
    ("focal", {}, 1.0, 2.0),
    ("focal", {}, 3.0, 6.0),  # a larger first step: 2 first steps, as before the unit
    ("dual_focal", {}, 0.5, 2.0),
    ("label_smoothing", {"epsilon": 0.0}, 0.05, 0.1),
    ("label_smoothing", {"epsilon": 0.0}, 0.01, 0.1),
])
def test_the_probe_distance_is_probe_first_steps_and_probe_knob_units(name, params, first_step, distance):
    finder, _ = build_finder(AutoSettings(first_step=first_step), build_loss(name, **params), name)
    assert finder.probe * max(finder.first_step, finder.unit) == pytest.approx(distance)


class CountingDataset(TensorDataset):
    """A TensorDataset that counts its reads."""

    reads = 0

    def __getitem__(self, index):
        type(self).reads += 1
        return super().__getitem__(index)


@pytest.mark.parametrize("keep_bytes, kept", [(10**9, True), (100, False)])
def test_the_measured_sample_is_read_once_when_it_is_small(keep_bytes, kept, monkeypatch):
    """The second measurement gives the same ĝ, s from memory without a read; above KEEP_BYTES every
    measurement reads the sample again."""
    import metacal.meta.gap_control as gap_control

    monkeypatch.setattr(gap_control, "KEEP_BYTES", keep_bytes)
    torch.manual_seed(2)
    base = data(150)
    ds = CountingDataset(*base.tensors)
    model, loss = TinyMLP(), build_loss("focal", gamma=1.0)
    stepper = AutoScalar(model, loss, torch.optim.SGD(model.parameters(), lr=0.1), ds, SignRootFinder(1.0, 1.0),
                         "gamma", steps_per_epoch=4, sample=120, batch_size=50, average=lambda ts: None)
    CountingDataset.reads = 0
    first = stepper.control.measure(model)
    assert CountingDataset.reads == 120
    second = stepper.control.measure(model)
    assert second == first and first == gap_estimate(gap_sums(model, stepper.control.loader, torch.device("cpu")))
    assert CountingDataset.reads == (240 if kept else 360)  # the direct gap_sums above read it once more
    assert (stepper.control.kept is not None) == kept
