"""Finite-difference check of the exact hypergradient (float64): perturb the meta-parameters along a random
direction u, redo the real SGD step from the same starting state, evaluate the meta objective at θ'(φ ± εu)
(train-mode BN batch statistics), central difference vs ⟨hypergradient, u⟩. This checks the SGD
coefficient c (momentum, dampening, nesterov, weight decay; first step and existing buffer) independently
of both implementations."""

import copy

import pytest
import torch
import torch.nn.functional as F

from metacal.objectives import build as build_objective
from meta_nets import batches, make_meta, objective_at_updated, run_backend, sgd_state

CONFIGS = {
    "plain": (dict(lr=0.1), False),
    "momentum_first": (dict(lr=0.1, momentum=0.9, weight_decay=1e-3), False),
    "dampening_buffer": (dict(lr=0.05, momentum=0.8, dampening=0.3, weight_decay=1e-3), True),
    "nesterov_first": (dict(lr=0.1, momentum=0.9, nesterov=True), False),
    "nesterov_buffer": (dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4), True),
}


def ce(logits, targets):
    return F.cross_entropy(logits, targets)


def directional_fd(model, opt, meta, data, objective, u, eps=1e-5):
    module = meta.get("gamma_net") or meta["loss"]

    def value(sign):
        moved = copy.deepcopy(module)
        with torch.no_grad():
            for p, d in zip(moved.parameters(), u):
                p.add_(sign * eps * d)
        if "gamma_net" in meta:
            return objective_at_updated(model, opt, moved, data, objective)
        return objective_at_updated(model, opt, None, data, objective, loss_module=moved)

    return float((value(1) - value(-1)) / (2 * eps))


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("kind", ["mlp_bn", "cnn_bn"])
@pytest.mark.parametrize("inner", ["focal", "l2"])
def test_hypergradient_matches_finite_difference(config, kind, inner):
    sgd, warm = CONFIGS[config]
    model, opt = sgd_state(kind, warm=warm, **sgd)
    meta = make_meta(model, torch.float64, inner)
    data = batches(kind)
    module = meta.get("gamma_net") or meta["loss"]
    torch.manual_seed(7)
    u = [torch.randn_like(p) for p in module.parameters()]
    flat_u = torch.cat([d.reshape(-1) for d in u])
    fd = directional_fd(model, opt, meta, data, ce, u)
    assert abs(fd) > 1e-6
    for backend in ("jvp", "higher"):
        hyper = run_backend(backend, model, opt, meta, data, ce)[0]
        assert float(hyper @ flat_u) == pytest.approx(fd, rel=1e-6), backend


def test_hypergradient_matches_finite_difference_sece():
    model, opt = sgd_state("mlp_bn", warm=True, lr=0.1, momentum=0.9, weight_decay=5e-4)
    meta = make_meta(model, torch.float64, "focal")
    data = batches("mlp_bn", n=16)
    sece = build_objective("sece", bandwidth=0.1)
    torch.manual_seed(7)
    u = [torch.randn_like(p) for p in meta["gamma_net"].parameters()]
    fd = directional_fd(model, opt, meta, data, sece, u, eps=1e-7)  # SECE's t_a = 100 soft rank: small ε
    hyper = run_backend("jvp", model, opt, meta, data, sece)[0]
    assert float(hyper @ torch.cat([d.reshape(-1) for d in u])) == pytest.approx(fd, rel=1e-6)


@pytest.mark.parametrize("config", ["momentum_first", "nesterov_buffer"])
@pytest.mark.parametrize("kind", ["mlp_bn", "cnn_bn"])
def test_gamma_offset_diagnostic_matches_finite_difference(config, kind):
    """StepResult.gamma_grad sums to dJ/dδ for a global offset γ_i + δ (the meta step's "raise γ?" signal)."""
    sgd, warm = CONFIGS[config]
    model, opt = sgd_state(kind, warm=warm, **sgd)
    meta = make_meta(model, torch.float64, "focal")
    data = batches(kind)
    gamma_net, eps = meta["gamma_net"], 1e-5

    def value(delta):
        return objective_at_updated(model, opt, lambda f: gamma_net(f) + delta, data, ce)

    fd = float((value(eps) - value(-eps)) / (2 * eps))
    assert abs(fd) > 1e-6
    for backend in ("jvp", "higher"):
        out = run_backend(backend, model, opt, meta, data, ce)[3]
        assert out.gamma_grad.shape == (data[0].shape[0],)
        assert float(out.gamma_grad.sum()) == pytest.approx(fd, rel=1e-6), backend
        assert float(out.meta_grad_norm) > 0
