"""The trajectory hypergradient dJ(θ_K)/db of the γ-Net's bias against a reference written out by hand, in
float64: K steps of torch.optim.SGD's update rule as plain tensor code (weight decay, momentum buffer with
buf = clone(d) when absent, else μ·buf + (1 − τ)·d; nesterov), b held fixed along the trajectory, J on a meta
batch at θ_K and dJ/db by ``torch.autograd.grad``. The cases the forward-mode recursion can get wrong: an
optimizer that already holds momentum buffers (earlier plain steps; or only some parameters, a group added
later) and parameters SGD never moves (requires_grad but not in the optimizer; requires_grad False).

Also: central differences in b with real ``torch.optim.SGD`` steps (W = 0, so γ = |b/τ| does not depend on
the features, whose path the γ-Net detaches), and bad batches refused before any state changes."""

from __future__ import annotations


import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from meta_nets import TinyMLP, batches, make_meta
from metacal.losses import build as build_loss
from metacal.meta import MetaLearner, PlainStep

K = 4
#: SGD settings; ``warm``: plain CE steps before the run (momentum buffers exist); ``late``: parameters put in a
#: group added after the warm steps (no buffer yet); ``unheld``: trainable but not in the optimizer;
#: ``no_grad``: requires_grad False.
CASES: dict[str, dict] = {
    "momentum": dict(sgd=dict(lr=0.1, momentum=0.9)),
    "momentum_warm": dict(sgd=dict(lr=0.1, momentum=0.9), warm=2),
    "dampening_warm": dict(sgd=dict(lr=0.05, momentum=0.8, dampening=0.3), warm=2),
    "dampening_partial_buffers": dict(sgd=dict(lr=0.05, momentum=0.8, dampening=0.3), warm=2,
                                      late=("classifier.weight",)),
    "nesterov": dict(sgd=dict(lr=0.1, momentum=0.9, nesterov=True), warm=2),
    "weight_decay": dict(sgd=dict(lr=0.1, weight_decay=0.05)),
    "weight_decay_momentum": dict(sgd=dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.02), warm=1),
    "frozen": dict(sgd=dict(lr=0.05, momentum=0.8, dampening=0.3, weight_decay=0.01), warm=2,
                   unheld=("body.0.bias",), no_grad=("classifier.bias",)),
}


def build(case: str, kind: str = "mlp") -> tuple[nn.Module, torch.optim.SGD]:
    """The model and its SGD optimizer after the case's warm-up steps (deterministic: one call per consumer)."""
    spec = CASES[case]
    torch.manual_seed(0)
    model = TinyMLP(batchnorm=kind == "mlp_bn").double()
    named = dict(model.named_parameters())
    for name in spec.get("no_grad", ()):
        named[name].requires_grad_(False)
    late = spec.get("late", ())
    held = [p for n, p in named.items() if p.requires_grad and n not in (*spec.get("unheld", ()), *late)]
    opt = torch.optim.SGD(held, **spec["sgd"])
    for k in range(spec.get("warm", 0)):
        x, y, _, _ = batches(kind, seed=90 + k)
        model.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()
    model.zero_grad(set_to_none=True)
    if late:
        opt.add_param_group({"params": [named[n] for n in late]})
    return model, opt


def gamma_net(model: nn.Module, flat: bool = False):
    net = make_meta(model, torch.float64)["gamma_net"]
    if flat:  # W = 0: γ = |b/τ| for every sample
        with torch.no_grad():
            net.weight.zero_()
    return net


def stream(kind: str = "mlp"):
    """K train batches and one meta-validation batch."""
    return [batches(kind, seed=10 + k)[:2] for k in range(K)], batches(kind, seed=50)[2:]


def learner_gradient(case: str, flat: bool = False) -> float:
    """b's gradient after K iterations of a MetaLearner (horizon "trajectory") whose meta optimizer keeps φ."""
    model, opt = build(case)
    net = gamma_net(model, flat)
    learner = MetaLearner(model, opt, F.cross_entropy, gamma_net=net, horizon="trajectory",
                          meta_optimizer=torch.optim.SGD(net.parameters(), lr=0.0))
    train, meta = stream()
    for x, y in train:
        learner.step(x, y, meta)
    return float(net.bias.grad)


def reference_gradient(case: str) -> float:
    """dJ(θ_K)/db by reverse mode through K SGD steps written out as tensor code (not torch.optim)."""
    model, opt = build(case)
    net = gamma_net(model)
    a, w, tau = net.attention.detach(), net.weight.detach(), net.tau
    b = net.bias.detach().clone().requires_grad_(True)
    state = {id(p): (g, opt.state.get(p, {}).get("momentum_buffer")) for g in opt.param_groups for p in g["params"]}
    named = dict(model.named_parameters())
    moved = [n for n, p in named.items() if id(p) in state]  # the rest is constant
    theta = {n: p.detach().clone().requires_grad_(n in moved) for n, p in named.items()}
    buf = {n: None if state[id(named[n])][1] is None else state[id(named[n])][1].clone() for n in moved}
    train, (xm, ym) = stream()
    for x, y in train:
        logits, features = functional_call(model, theta, (x,), {"return_features": True})
        f = features.detach()  # the γ-Net reads detached features
        gamma = ((torch.softmax(f @ a, dim=1) @ a.T @ w + b) / tau).abs()
        log_p = F.log_softmax(logits, dim=1).gather(1, y[:, None])[:, 0]
        loss = (-(1.0 - log_p.exp()) ** gamma * log_p).mean()
        grads = torch.autograd.grad(loss, [theta[n] for n in moved], create_graph=True)
        for n, g in zip(moved, grads):
            group = state[id(named[n])][0]
            mu, damp = group["momentum"], group["dampening"]
            d = g + group["weight_decay"] * theta[n]
            if mu != 0:
                buf[n] = d if buf[n] is None else mu * buf[n] + (1.0 - damp) * d
                d = d + mu * buf[n] if group["nesterov"] else buf[n]
            theta[n] = theta[n] - group["lr"] * d
    objective = F.cross_entropy(functional_call(model, theta, (xm,)), ym)
    return float(torch.autograd.grad(objective, b)[0])


def finite_difference(case: str, eps: float = 1e-7) -> float:
    """(J(b + ε) − J(b − ε)) / 2ε after K real torch.optim.SGD steps of the focal loss at γ = |b/τ|."""
    def value(sign: int) -> float:
        model, opt = build(case)
        net = gamma_net(model, flat=True)
        with torch.no_grad():
            net.bias.add_(sign * eps)
        focal = build_loss("focal", reduction="none")
        train, (xm, ym) = stream()
        for x, y in train:
            opt.zero_grad(set_to_none=True)
            logits, features = model(x, return_features=True)
            with torch.no_grad():
                gamma = net(features)
            focal(logits, y, gamma=gamma).mean().backward()
            opt.step()
        with torch.no_grad():
            return float(F.cross_entropy(model(xm), ym))

    return (value(1) - value(-1)) / (2 * eps)


def relative_error(value: float, reference: float) -> float:
    return abs(value - reference) / abs(reference)


@pytest.mark.parametrize("case", list(CASES))
def test_trajectory_matches_the_unrolled_reference(case):
    reference = reference_gradient(case)
    assert abs(reference) > 1e-4
    assert relative_error(learner_gradient(case), reference) <= 1e-10


def test_the_cases_start_from_the_optimizer_state_they_name():
    """dampening_warm: every parameter has a buffer; partial: the late group has none; frozen: the unheld and
    requires_grad=False parameters are not in the optimizer (so the learner must not look them up)."""
    _, opt = build("dampening_warm")
    assert all(opt.state[p].get("momentum_buffer") is not None for g in opt.param_groups for p in g["params"])
    model, opt = build("dampening_partial_buffers")
    assert "momentum_buffer" not in opt.state.get(model.classifier.weight, {})
    model, opt = build("frozen")
    held = {id(p) for g in opt.param_groups for p in g["params"]}
    assert model.body[0].bias.requires_grad and id(model.body[0].bias) not in held
    assert not model.classifier.bias.requires_grad and id(model.classifier.bias) not in held


@pytest.mark.parametrize("case", ["dampening_warm", "frozen"])
def test_trajectory_matches_central_differences(case):
    fd = finite_difference(case)
    assert abs(fd) > 1e-3
    assert relative_error(learner_gradient(case, flat=True), fd) <= 1e-6


def state_of(learner: MetaLearner | PlainStep, model: nn.Module, opt: torch.optim.SGD) -> list[torch.Tensor]:
    """Every tensor a bad batch must leave alone: weights, BN buffers, SGD state, φ, meta-optimizer state, tangents."""
    out = [t.detach().clone() for t in model.state_dict().values()]
    out += [b.clone() for s in opt.state.values() for b in s.values() if torch.is_tensor(b)]
    if isinstance(learner, MetaLearner):
        out += [p.detach().clone() for p in learner.meta_parameters]
        out += [t.clone() for s in learner.meta_optimizer.state.values() for t in s.values() if torch.is_tensor(t)]
        out += [t.clone() for part in learner.trajectory.state_dict().values() for t in part.values()]
    return out


def assert_unchanged(before: list[torch.Tensor], after: list[torch.Tensor]) -> None:
    assert len(before) == len(after) and all(torch.equal(a, b) for a, b in zip(before, after))


def ready_learner():
    """A trajectory learner one good iteration in (momentum buffers, tangents and Adam moments exist)."""
    model, opt = build("dampening_warm", "mlp_bn")
    net = gamma_net(model)
    learner = MetaLearner(model, opt, F.cross_entropy, gamma_net=net, horizon="trajectory")
    x, y, xm, ym = batches("mlp_bn", seed=3)
    learner.step(x, y, (xm, ym))
    return learner, model, opt


X, Y, XM, YM = batches("mlp_bn", seed=4)
BAD_META = {
    "out of range": ((XM, torch.full_like(YM, 3)), r"meta-validation targets must lie in \[0, 2\] for 3 classes"),
    "negative": ((XM, YM - 1 - YM.max()), r"meta-validation targets must lie in \[0, 2\]"),
    "whole floats": ((XM, YM.double()), "meta-validation targets must hold integer class indices"),
    "non-integer floats": ((XM, YM + 0.5), "meta-validation targets must hold integer class indices"),
    "one-hot": ((XM, F.one_hot(YM, 3)), r"meta-validation targets must be a 1-D tensor of class indices"),
    "too few": ((XM, YM[:-1]), "meta-validation inputs has 12 rows but meta-validation targets has 11 entries"),
    "not a pair": ((XM, YM, YM), "meta_batch must be a pair"),
}


@pytest.mark.parametrize("bad", list(BAD_META))
def test_a_bad_meta_batch_is_refused_before_anything_changes(bad):
    learner, model, opt = ready_learner()
    meta_batch, message = BAD_META[bad]
    before, iteration = state_of(learner, model, opt), learner.iteration
    with pytest.raises(ValueError, match=message) as error:
        learner.step(X, Y, meta_batch)
    assert "\n" not in str(error.value)
    assert_unchanged(before, state_of(learner, model, opt))
    assert learner.iteration == iteration


@pytest.mark.parametrize("targets", [Y.double(), Y + 0.7], ids=["whole floats", "non-integer floats"])
def test_float_train_targets_are_refused_not_truncated(targets):
    learner, model, opt = ready_learner()
    before = state_of(learner, model, opt)
    with pytest.raises(ValueError, match="train targets must hold integer class indices"):
        learner.step(X, targets, (XM, YM))
    assert_unchanged(before, state_of(learner, model, opt))

    model, opt = build("dampening_warm", "mlp_bn")
    mixup = build_loss("mixup")
    plain = PlainStep(model, mixup, opt)
    plain.step(X, Y)
    before, generator = state_of(plain, model, opt), mixup.generator.get_state()
    with pytest.raises(ValueError, match="train targets must hold integer class indices"):
        plain.step(X, targets)
    assert_unchanged(before, state_of(plain, model, opt))
    assert torch.equal(mixup.generator.get_state(), generator)
    with pytest.raises(ValueError, match=r"train targets must lie in \[0, 2\]"):
        plain.step(X, torch.full_like(Y, 7))
