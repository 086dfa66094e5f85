"""The one contract between the training loop and a learner (metacal.meta.Stepper): every learner has it, and the
loop needs nothing else of them."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import TensorDataset

from metacal.losses import build as build_loss
from metacal.meta import MetaLearner, PlainStep, Stepper
from metacal.meta.auto import AutoScalar
from metacal.meta.root_finder import SignRootFinder


def test_every_learner_is_a_stepper_and_none_carries_a_gamma_net_class_attribute():
    for learner in (PlainStep, MetaLearner, AutoScalar):
        assert issubclass(learner, Stepper), learner.__name__
        assert "gamma_net" not in vars(learner), learner.__name__


def test_the_read_check_runs_before_each_measurement_and_only_then():
    torch.manual_seed(0)
    x, y = torch.randn(120, 4), torch.randint(0, 3, (120,))
    model, loss = nn.Sequential(nn.Linear(4, 3)), build_loss("focal", gamma=1.0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    auto = AutoScalar(model, loss, opt, TensorDataset(x, y), SignRootFinder(1.0, 1.0), "gamma", steps_per_epoch=3,
                      updates_per_epoch=1, average=lambda ts: None)
    calls = []
    auto.set_read_check(lambda: calls.append(auto.iteration))
    for _ in range(7):
        auto.step(x[:40], y[:40])
    assert calls == [3, 6]  # before the updates at the epochs' last steps
    assert auto.per_sample_gamma() is None
    plain = PlainStep(model, loss, opt)
    plain.set_read_check(lambda: calls.append("plain"))
    plain.step(x[:40], y[:40])
    assert calls == [3, 6] and plain.per_sample_gamma() is None and plain.epoch_metrics() == {}


def test_each_learner_writes_its_own_metrics_sections():
    """metrics.json's learner sections come from the learner (Stepper.summary): the automatic scalar's "auto",
    built from the history lines its epoch_metrics wrote; nothing for plain steps."""
    torch.manual_seed(0)
    x, y = torch.randn(60, 4), torch.randint(0, 3, (60,))
    model, loss = nn.Sequential(nn.Linear(4, 3)), build_loss("focal", gamma=1.0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    auto = AutoScalar(model, loss, opt, TensorDataset(x, y), SignRootFinder(1.0, 1.0), "gamma", steps_per_epoch=2,
                      average=lambda ts: None, measured_on=("meta_val", "val"))
    assert auto.summary([], 1) == {}  # no update yet: no record
    history = []
    for epoch in (1, 2):
        auto.step(x[:30], y[:30])
        auto.step(x[30:], y[30:])
        history.append({"epoch": epoch, "train": {"loss": 1.0, **auto.epoch_metrics()}})
    record = auto.summary(history, 1)["auto"]
    assert (record["knob"], record["measured_on"]) == ("gamma", ["meta_val", "val"])
    assert record["selected"] == history[0]["train"]["auto_gamma_trained"] == 1.0
    assert record["final"] == history[1]["train"]["auto_gamma"] == loss.gamma
    assert PlainStep(model, loss, opt).summary(history, 1) == {}


def test_the_meta_learner_reads_its_epoch_from_its_own_step_diagnostics():
    """A meta step names its diagnostics; epoch_metrics reduces each one's values of the epoch by hand-derived
    formulas: dJ/dδ of −1, 2, −3 → 3 meta steps, mean −2/3, two of three ask for a larger γ."""
    from metacal import models, objectives
    from metacal.meta import GammaNet

    torch.manual_seed(0)
    model = models.build("mlp", num_classes=3, in_channels=1, input_shape=(1, 4), hidden=[8])
    learner = MetaLearner(model, torch.optim.SGD(model.parameters(), lr=0.1), objectives.build("sece"),
                          gamma_net=GammaNet(model.feature_dim, num_heads=3))
    x, y = torch.randn(16, 1, 4), torch.randint(0, 3, (16,))
    out = learner.step(x, y, (x, y))
    assert list(out.diagnostics) == ["dJ_dgamma_offset", "meta_grad_norm"]
    assert float(out.diagnostics["dJ_dgamma_offset"]) == float(out.gamma_grad.sum())
    metrics = learner.epoch_metrics({"dJ_dgamma_offset": torch.tensor([-1.0, 2.0, -3.0]),
                                     "meta_grad_norm": torch.tensor([1.0, 3.0, 5.0])})
    assert metrics == {"meta_steps": 3, "meta_dgamma": torch.tensor(-2 / 3).item(), "raise_gamma_frac": 2 / 3,
                       "meta_grad_norm": 3.0}
    assert learner.epoch_metrics({}) == {} and learner.epoch_metrics() == {}
