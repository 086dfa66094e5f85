"""``head`` equals ``higher`` run over a module that holds only the classifier head.

The restriction, built here independently of metacal.meta's code: the real step updates the whole
network; the head alone is copied into an ``nn.Linear`` with an SGD optimizer carrying the head's
momentum state from before the step; ``higher`` takes the differentiable head step on the train
features of the OLD body (the head's inputs in the real forward) and evaluates the meta objective on the
meta-val features of the UPDATED body (constants) — the backend's documented choice.
"""

import copy

import higher
import pytest
import torch
import torch.nn.functional as F
from torch.func import functional_call

from metacal.losses import build as build_loss
from meta_nets import batches, clone_state, make_meta, rel_diff, run_backend, sgd_state

SGD = {
    "plain": (dict(lr=0.1), False),
    "momentum_wd": (dict(lr=0.1, momentum=0.9, weight_decay=5e-4), True),
    "nesterov_first": (dict(lr=0.1, momentum=0.9, nesterov=True), False),
}


def ce(logits, targets):
    return F.cross_entropy(logits, targets)


def restricted_higher(model, opt, meta, data, objective):
    x, y, xm, ym = data
    m, o = clone_state(model, opt)
    meta = {k: copy.deepcopy(v) for k, v in meta.items()}
    m.train()
    head = copy.deepcopy(m.classifier)
    head_opt = torch.optim.SGD(head.parameters(), **{k: o.defaults[k] for k in
                                                     ("lr", "momentum", "dampening", "weight_decay", "nesterov")})
    for p, q in zip(m.classifier.parameters(), head.parameters()):
        if "momentum_buffer" in o.state.get(p, {}):
            head_opt.state[q]["momentum_buffer"] = o.state[p]["momentum_buffer"].clone()
    o.zero_grad()
    logits, feats = m(x, return_features=True)
    if "gamma_net" in meta:
        gamma = meta["gamma_net"](feats)
        build_loss("focal", reduction="none")(logits, y, gamma=gamma.detach()).mean().backward()
    else:
        loss_module = meta["loss"]
        for p in loss_module.parameters():
            p.requires_grad_(False)
        loss_module(logits, y, head_weight=m.classifier.weight, head_bias=m.classifier.bias).mean().backward()
        for p in loss_module.parameters():
            p.requires_grad_(True)
    o.step()
    with torch.no_grad():
        _, meta_feats = functional_call(
            m, {n: b.clone() for n, b in m.named_buffers()}, (xm,), {"return_features": True}
        )
    feats = feats.detach()
    with higher.innerloop_ctx(head, head_opt, copy_initial_weights=False) as (fhead, diffopt):
        out = fhead(feats)
        if "gamma_net" in meta:
            inner = build_loss("focal", reduction="none")(out, y, gamma=gamma).mean()
            params = list(meta["gamma_net"].parameters())
        else:
            w, b = fhead.fast_params
            inner = meta["loss"](out, y, head_weight=w, head_bias=b).mean()
            params = meta["loss"].meta_parameters()
        new_w, new_b = diffopt.step(inner)
        # the restricted lookahead reproduces the real head update
        torch.testing.assert_close(new_w.detach(), m.classifier.weight.detach())
        torch.testing.assert_close(new_b.detach(), m.classifier.bias.detach())
        value = objective(fhead(meta_feats), ym)
        grads = torch.autograd.grad(value, params)
    return torch.cat([g.reshape(-1) for g in grads])


@pytest.mark.parametrize("kind", ["mlp", "cnn_bn", "resnet"])
@pytest.mark.parametrize("config", list(SGD))
@pytest.mark.parametrize("inner", ["focal", "l2"])
def test_head_equals_higher_over_the_head_only(kind, config, inner):
    sgd, warm = SGD[config]
    model, opt = sgd_state(kind, warm=warm, **sgd)
    meta = make_meta(model, torch.float64, inner)
    data = batches(kind)
    expected = restricted_higher(model, opt, meta, data, ce)
    got = run_backend("head", model, opt, meta, data, ce)[0]
    assert expected.abs().max() > 0
    assert rel_diff(got, expected) < 1e-8


def test_head_differs_from_full_network_for_focal():
    """The restriction is a real approximation for γ-Net (it ignores the body's dependence on φ)."""
    model, opt = sgd_state("cnn_bn", warm=True, lr=0.1, momentum=0.9)
    meta = make_meta(model, torch.float64, "focal")
    data = batches("cnn_bn")
    full = run_backend("jvp", model, opt, meta, data, ce)[0]
    head = run_backend("head", model, opt, meta, data, ce)[0]
    assert rel_diff(head, full) > 1e-3


def test_head_is_exact_for_learnable_l2():
    """CE + Σ c·θ_head²: φ enters only the head's update, so the head lookahead is the full hypergradient."""
    model, opt = sgd_state("resnet", warm=True, lr=0.1, momentum=0.9, weight_decay=5e-4)
    meta = make_meta(model, torch.float64, "l2")
    data = batches("resnet")
    full = run_backend("higher", model, opt, meta, data, ce)[0]
    head = run_backend("head", model, opt, meta, data, ce)[0]
    assert rel_diff(head, full) < 1e-8
