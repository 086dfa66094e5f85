"""Optimisers, lr schedules, freezing and parameter groups of the trainer (metacal/train/optim.py,
metacal/train/schedules.py): lr curves and AdamW updates against values computed by hand, frozen
parameters bitwise unchanged after a plain and a meta step, and the config errors."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from metacal import losses, models, objectives
from metacal.meta import GammaNet, MetaLearner, PlainStep
from metacal.train.config import ConfigError, build_config
from metacal.train.optim import build_optimizer, freeze, parameter_groups
from metacal.train.schedules import build_schedule, lr_factor
from metacal.train.schema import OptimConfig, ScheduleConfig


def lr_curve(schedule: ScheduleConfig, steps_per_epoch: int, base: float = 0.2, groups: int = 1) -> list[float]:
    """The lr of each iteration of a whole run, read from the optimiser as the loop would drive it."""
    params = [{"params": [nn.Parameter(torch.zeros(1))], "lr": base} for _ in range(groups)]
    opt = torch.optim.SGD(params, lr=base)
    sched = build_schedule(schedule, opt, steps_per_epoch)
    lrs = []
    for _ in range(schedule.epochs):
        for _ in range(steps_per_epoch):
            lrs.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.iteration_done()
        sched.epoch_done()
    return lrs


def test_cosine_with_warmup_by_hand():
    # E = 4 iterations per epoch, 3 epochs: T = 12; warm-up 0.5 epoch: W = 2; base lr 0.2
    lrs = lr_curve(ScheduleConfig(name="cosine", epochs=3, warmup_epochs=0.5), steps_per_epoch=4)
    assert len(lrs) == 12
    expected = {
        0: 0.2 * 1 / 2,                               # warm-up (t + 1)/W
        1: 0.2 * 2 / 2,
        2: 0.2,                                       # ½(1 + cos 0)
        3: 0.2 * 0.5 * (1 + 0.9510565162951535),      # cos(π/10) = 0.95106: 0.195106
        7: 0.2 * 0.5,                                 # cos(5π/10) = 0: half way, 0.1
        11: 0.2 * 0.5 * (1 - 0.9510565162951535),     # cos(9π/10): 0.004894, positive at the last step
    }
    for t, value in expected.items():
        assert lrs[t] == pytest.approx(value, rel=1e-12), t
    assert lrs[3] == pytest.approx(0.19510565, abs=1e-8) and lrs[11] == pytest.approx(0.00489435, abs=1e-8)
    assert all(a >= b for a, b in zip(lrs[2:], lrs[3:]))  # non-increasing after the warm-up


def test_step_with_warmup_and_constant_with_warmup_by_hand():
    step = lr_curve(ScheduleConfig(name="step", epochs=3, milestones=[1, 2], lr_decay=0.1, warmup_epochs=0.5), 4)
    assert step[:4] == pytest.approx([0.1, 0.2, 0.2, 0.2])
    assert step[4:8] == pytest.approx([0.02] * 4) and step[8:] == pytest.approx([0.002] * 4)
    const = lr_curve(ScheduleConfig(name="constant", epochs=2, warmup_epochs=1), 4)
    assert const == pytest.approx([0.05, 0.1, 0.15, 0.2, 0.2, 0.2, 0.2, 0.2])
    # a warm-up shorter than one iteration still warms up over one iteration: W = max(1, round(0.1·4)) = 1
    assert lr_curve(ScheduleConfig(name="constant", epochs=1, warmup_epochs=0.1), 4) == pytest.approx([0.2] * 4)


def test_step_without_warmup_is_the_epoch_level_multisteplr():
    cfg = ScheduleConfig(name="step", epochs=4, milestones=[1, 3], lr_decay=0.1)
    lrs = lr_curve(cfg, steps_per_epoch=3)
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.2)
    assert not build_schedule(cfg, opt, 3).per_iteration
    reference = torch.optim.lr_scheduler.MultiStepLR(
        torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.2), milestones=[1, 3], gamma=0.1)
    expected = []
    for _ in range(4):
        expected += [reference.get_last_lr()[0]] * 3
        reference.optimizer.step()
        reference.step()
    assert lrs == expected  # bitwise: the very same scheduler
    assert lrs[::3] == pytest.approx([0.2, 0.02, 0.02, 0.002])


def test_every_group_is_scaled_by_the_same_factor():
    params = [{"params": [nn.Parameter(torch.zeros(1))], "lr": 0.2},
              {"params": [nn.Parameter(torch.zeros(1))], "lr": 0.02}]
    opt = torch.optim.SGD(params, lr=0.2)
    sched = build_schedule(ScheduleConfig(name="cosine", epochs=2, warmup_epochs=0.25), opt, 4)
    factor = lr_factor("cosine", 2, 4, 0.25)
    for t in range(8):
        assert opt.param_groups[0]["lr"] == pytest.approx(0.2 * factor(t))
        assert opt.param_groups[1]["lr"] == pytest.approx(0.02 * factor(t))
        opt.step()
        sched.iteration_done()


def test_schedule_state_round_trip_continues_the_curve():
    cfg = ScheduleConfig(name="cosine", epochs=3, warmup_epochs=0.5)
    full = lr_curve(cfg, 4)
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.2)
    first = build_schedule(cfg, opt, 4)
    for _ in range(5):
        opt.step()
        first.iteration_done()
    opt2 = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.2)
    second = build_schedule(cfg, opt2, 4)
    second.load_state_dict(first.state_dict())
    opt2.load_state_dict(opt.state_dict())
    assert opt2.param_groups[0]["lr"] == full[5]


def test_adamw_updates_by_hand():
    """θ0 = 1, lr 0.1, betas (0.9, 0.999), eps 1e-8, wd 0.01, gradients 0.5 then −1 (Loshchilov & Hutter 2019)."""
    theta = nn.Parameter(torch.tensor([1.0], dtype=torch.float64))
    opt = build_optimizer(OptimConfig(name="adamw", lr=0.1, betas=[0.9, 0.999], eps=1e-8, weight_decay=0.01),
                          nn.ParameterList([theta]))
    assert isinstance(opt, torch.optim.AdamW)
    values = []
    for g in (0.5, -1.0):
        theta.grad = torch.tensor([g], dtype=torch.float64)
        opt.step()
        values.append(float(theta.detach()))
    # step 1: θ = 1·(1 − 0.1·0.01) = 0.999; m̂ = 0.5, v̂ = 0.25 → θ = 0.999 − 0.1·0.5/(0.5 + 1e-8) = 0.899000002
    assert values[0] == pytest.approx(0.899000002, abs=1e-12)
    # step 2: θ = 0.899000002·0.999; m = 0.9·0.05 − 0.1 = −0.055, m̂ = −0.055/0.19;
    # v = 0.999·0.00025 + 0.001 = 0.00124975, v̂ = v/0.001999 = 0.625187593… → θ ≈ 0.934711
    m_hat, v_hat = -0.055 / 0.19, 0.00124975 / 0.001999
    step2 = 0.899000002 * 0.999 - 0.1 * m_hat / (math.sqrt(v_hat) + 1e-8)
    assert values[1] == pytest.approx(step2, abs=1e-12) and values[1] == pytest.approx(0.934711, abs=1e-6)


def test_adamw_weight_decay_is_decoupled():
    """With a zero gradient Adam's direction is 0/(0 + ε) = 0, so only the decay acts: θ·(1 − lr·wd). (Adam
    with L2 would see g = wd·θ and step by about lr.)"""
    theta = nn.Parameter(torch.tensor([2.0], dtype=torch.float64))
    opt = build_optimizer(OptimConfig(name="adamw", lr=0.1, weight_decay=0.05), nn.ParameterList([theta]))
    theta.grad = torch.zeros(1, dtype=torch.float64)
    opt.step()
    assert float(theta.detach()) == pytest.approx(2.0 * (1 - 0.1 * 0.05), abs=1e-15)


def small_model():
    torch.manual_seed(0)
    return models.build("small_resnet", 4, 1, widths=(4, 8), blocks=(1, 1), strides=(2, 2), stem_width=4)


def test_backbone_lr_scale_groups():
    model = small_model()
    freeze(model, ["stem"])
    groups = parameter_groups(model, lr=0.2, backbone_lr_scale=0.1)
    head = {id(p) for p in model.classifier.parameters()}
    assert [g["lr"] for g in groups] == [0.2, pytest.approx(0.02)]
    assert {id(p) for p in groups[0]["params"]} == head
    trainable = {id(p) for n, p in model.named_parameters() if not n.startswith("stem")}
    assert {id(p) for p in groups[1]["params"]} == trainable - head
    opt = build_optimizer(OptimConfig(lr=0.2, backbone_lr_scale=0.1), model)
    assert [g["lr"] for g in opt.param_groups] == [0.2, pytest.approx(0.02)]
    # scale 1: one flat group, every trainable parameter in model order (the optimiser of earlier runs)
    flat = parameter_groups(model, lr=0.2)
    assert [id(p) for p in flat] == [id(p) for n, p in model.named_parameters() if not n.startswith("stem")]


def test_freeze_prefixes_and_errors():
    seq = nn.Sequential(*[nn.Linear(2, 2) for _ in range(11)])
    frozen = freeze(seq, ["1"])
    assert frozen == ["1.weight", "1.bias"]  # "1" does not match "10.…"
    assert not seq[1].weight.requires_grad and seq[10].weight.requires_grad
    with pytest.raises(ValueError, match=r"model.freeze 'stem2' matches no parameter .*top-level modules: stem, layers, "
                                         r"classifier"):
        freeze(small_model(), ["stem2"])
    with pytest.raises(ValueError, match="freezes every parameter"):
        freeze(small_model(), ["stem", "layers", "classifier"])


FROZEN = ["stem", "layers.0"]


def frozen_state(model):
    return {n: p.detach().clone() for n, p in model.named_parameters() if any(n.startswith(f) for f in FROZEN)}


def assert_frozen_unchanged(model, before):
    for n, p in model.named_parameters():
        if n in before:
            assert torch.equal(p, before[n]), n
            assert p.grad is None, n
    assert any(not torch.equal(p, q) for p, q in zip(model.classifier.parameters(), small_model().classifier.parameters()))


def test_frozen_parameters_are_unchanged_by_a_plain_step():
    model = small_model()
    freeze(model, FROZEN)
    opt = build_optimizer(OptimConfig(lr=0.1, momentum=0.9, weight_decay=5e-4), model)
    opt_ids = {id(p) for g in opt.param_groups for p in g["params"]}
    assert not opt_ids & {id(p) for n, p in model.named_parameters() if n.split(".")[0] == "stem"}
    before = frozen_state(model)
    running = model.stem[1].running_mean.clone()
    step = PlainStep(model, losses.build("ce"), opt)
    for _ in range(2):
        step.step(torch.randn(8, 1, 12, 12), torch.arange(8) % 4)
    assert_frozen_unchanged(model, before)
    assert not torch.equal(model.stem[1].running_mean, running)  # BN statistics are buffers: they still move


@pytest.mark.parametrize("backend,horizon", [("jvp", "step"), ("higher", "step"), ("head", "step"),
                                             ("jvp", "trajectory")])
def test_frozen_parameters_are_unchanged_by_meta_steps(backend, horizon):
    model = small_model()
    freeze(model, FROZEN)
    opt = build_optimizer(OptimConfig(lr=0.1, momentum=0.9, weight_decay=5e-4, backbone_lr_scale=0.5), model)
    gamma_net = GammaNet(model.feature_dim, 4)
    learner = MetaLearner(model, opt, objectives.build("sece"), gamma_net=gamma_net, backend=backend,
                          loss=losses.build("focal", reduction="none"), horizon=horizon)
    before = frozen_state(model)
    phi = [p.detach().clone() for p in gamma_net.parameters()]
    for _ in range(2):
        out = learner.step(torch.randn(8, 1, 12, 12), torch.arange(8) % 4,
                           (torch.randn(8, 1, 12, 12), torch.arange(8) % 4))
        assert torch.isfinite(out.meta_objective)
    assert_frozen_unchanged(model, before)
    assert any(not torch.equal(a, b) for a, b in zip(phi, gamma_net.parameters()))  # the γ-Net did learn


def config(**sections):
    base = {"data": {"name": "gaussian_mixture"}, "model": {"name": "mlp"}}
    return build_config({**base, **sections})


@pytest.mark.parametrize("sections,message", [
    ({"optim": {"name": "adamw"}, "learner": "gamma_net"},
     "optim.name=adamw cannot be used with learner gamma_net: its meta step differentiates through torch.optim.SGD's "
     "update (metacal/meta/sgd_lookahead.py); use optim.name=sgd"),
    ({"optim": {"name": "adam"}}, "config key 'optim.name': unknown value 'adam'; did you mean adamw? available: sgd, adamw"),
    ({"schedule": {"name": "linear"}}, "config key 'schedule.name': unknown value 'linear'; available: step, cosine, constant"),
    ({"optim": {"betas": [0.9]}}, "optim.betas must be two numbers in [0, 1); got [0.9]"),
    ({"optim": {"eps": 0.0}}, "optim.eps must be a finite number > 0; got 0.0"),
    ({"optim": {"eps": float("inf")}}, "optim.eps must be a finite number > 0; got inf"),
    ({"optim": {"backbone_lr_scale": -1.0}}, "optim.backbone_lr_scale must be a finite number >= 0; got -1.0"),
    ({"optim": {"backbone_lr_scale": float("inf")}}, "optim.backbone_lr_scale must be a finite number >= 0; got inf"),
    # torch.optim.SGD checks lr < 0 and weight_decay < 0, which NaN passes, and momentum only for >= 0
    ({"optim": {"lr": float("nan")}}, "optim.lr must be a finite number >= 0; got nan"),
    ({"optim": {"lr": float("inf")}}, "optim.lr must be a finite number >= 0; got inf"),
    ({"optim": {"lr": -0.1}}, "optim.lr must be a finite number >= 0; got -0.1"),
    ({"optim": {"weight_decay": float("nan")}}, "optim.weight_decay must be a finite number >= 0; got nan"),
    ({"optim": {"momentum": 1.0}}, "optim.momentum must be in [0, 1); got 1.0"),
    ({"optim": {"momentum": -0.5}}, "optim.momentum must be in [0, 1); got -0.5"),
])
def test_config_errors(sections, message):
    with pytest.raises(ConfigError) as info:
        config(**sections)
    assert str(info.value) == message


@pytest.mark.parametrize("epochs, warmup, message", [
    (2, 2.0, "warmup_epochs must be >= 0 and the warm-up shorter than the run (2 epochs, 8 iterations); got 2.0 "
             "(8 iterations)"),
    (3, -0.5, "warmup_epochs must be >= 0 and the warm-up shorter than the run (3 epochs, 12 iterations); got -0.5 "
              "(0 iterations)"),
])
def test_warmup_longer_than_the_run_is_refused_by_the_schedule(epochs, warmup, message):
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    with pytest.raises(ValueError) as info:
        build_schedule(ScheduleConfig(name="cosine", epochs=epochs, warmup_epochs=warmup), opt, 4)
    assert str(info.value) == message


def test_defaults_are_todays_sgd_and_multisteplr():
    cfg = config()
    assert (cfg.optim.name, cfg.optim.backbone_lr_scale, cfg.schedule.name, cfg.schedule.warmup_epochs) == \
        ("sgd", 1.0, "step", 0.0)
    assert (cfg.model.checkpoint, cfg.model.checkpoint_skip, cfg.model.freeze) == (None, [], [])
