"""MetaLearner properties: the real step is a plain SGD step with the same γ (θ', momentum, BN running stats
updated once), no backbone gradient from the meta objective, every, hooks, SGD coefficients, errors."""

import copy

import pytest
import torch
import torch.nn.functional as F

from metacal.losses import build as build_loss
from metacal.meta import BACKENDS, GammaNet, MetaLearner, step_coefficient
from meta_nets import batches, clone_state, make_meta, run_step, sgd_state

BACKEND_NAMES = ["jvp", "higher", "head"]


def ce(logits, targets):
    return F.cross_entropy(logits, targets)


def plain_step(model, opt, meta, data):
    """The real step written out by hand: forward, γ = γ-Net(features), focal/L2 loss, backward, SGD."""
    x, y = data[0], data[1]
    m, o = clone_state(model, opt)
    meta = {k: copy.deepcopy(v) for k, v in meta.items()}
    m.train()
    o.zero_grad()
    logits, feats = m(x, return_features=True)
    if "gamma_net" in meta:
        gamma = meta["gamma_net"](feats).detach()
        loss = build_loss("focal", reduction="none")(logits, y, gamma=gamma).mean()
    else:
        gamma = None
        loss_module = meta["loss"].requires_grad_(False)
        loss = loss_module(logits, y, head_weight=m.classifier.weight, head_bias=m.classifier.bias).mean()
        by_hand = F.cross_entropy(logits, y) + (loss_module.coeff_weight * m.classifier.weight.pow(2)).sum() + (
            loss_module.coeff_bias * m.classifier.bias.pow(2)
        ).sum()
        assert torch.isclose(loss, by_hand)
    loss.backward()
    o.step()
    return m, o, float(loss.detach()), gamma


@pytest.mark.parametrize("backend", BACKEND_NAMES)
@pytest.mark.parametrize("kind", ["cnn_bn", "resnet"])
@pytest.mark.parametrize("inner", ["focal", "l2"])
def test_real_step_is_the_plain_step(backend, kind, inner):
    dtype = torch.float32
    model, opt = sgd_state(kind, dtype=dtype, warm=True, lr=0.1, momentum=0.9, weight_decay=5e-4)
    meta = make_meta(model, dtype, inner)
    data = batches(kind, dtype=dtype)
    ref, ref_opt, ref_loss, ref_gamma = plain_step(model, opt, meta, data)

    m, o = clone_state(model, opt)
    kw = {k: copy.deepcopy(v) for k, v in meta.items()}
    step = MetaLearner(m, o, ce, backend=backend, **kw)
    phi_before = [p.detach().clone() for p in step.meta_parameters]
    out = run_step(step, data)

    assert (out.meta_objective is not None) and float(out.loss) == pytest.approx(ref_loss, rel=1e-6)
    if inner == "focal":
        torch.testing.assert_close(out.gamma, ref_gamma)
    for (name, p), q in zip(m.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-6, msg=name)
        torch.testing.assert_close(o.state[p]["momentum_buffer"], ref_opt.state[q]["momentum_buffer"],
                                   rtol=1e-6, atol=1e-6)
        if backend == "higher":  # θ' came from autograd.grad through the fast weights: no .grad at all
            assert p.grad is None
        else:  # exactly the inner loss's gradient: nothing from the meta objective was added
            torch.testing.assert_close(p.grad, q.grad, rtol=0, atol=0, msg=name)
    # BN running statistics updated exactly once, by the real forward
    for (name, b), c in zip(m.named_buffers(), ref.buffers()):
        torch.testing.assert_close(b, c, rtol=1e-6, atol=1e-7, msg=name)
    assert any(n.endswith("num_batches_tracked") and int(b) == 2 for n, b in m.named_buffers())
    # the meta-parameters moved (one Adam step), by their hypergradient
    assert all(p.grad is not None for p in step.meta_parameters)
    assert any(not torch.equal(a, b) for a, b in zip(phi_before, step.meta_parameters))


@pytest.mark.parametrize("backend", BACKEND_NAMES)
def test_every_and_plain_iterations(backend):
    model, opt = sgd_state("cnn_bn", warm=True, lr=0.1, momentum=0.9)
    meta = make_meta(model, torch.float64, "focal")
    data = batches("cnn_bn")
    step = MetaLearner(model, opt, ce, backend=backend, every=2, **meta)
    flags = []
    for i in range(4):
        phi = [p.detach().clone() for p in step.meta_parameters]
        if i % 2 == 1:  # a plain iteration must equal the hand-written plain step with the current φ
            ref, _, ref_loss, _ = plain_step(model, opt, meta, data)
        out = run_step(step, data)
        flags.append((out.meta_objective is not None))
        moved = any(not torch.equal(a, b) for a, b in zip(phi, step.meta_parameters))
        assert moved == (out.meta_objective is not None)
        if i % 2 == 1:
            assert out.meta_objective is None
            assert float(out.loss) == pytest.approx(ref_loss, rel=1e-12)
            for p, q in zip(model.parameters(), ref.parameters()):
                torch.testing.assert_close(p, q)
    assert flags == [True, False, True, False]
    assert step.state_dict()["iteration"] == 4


def test_plain_iteration_leaves_learnable_l2_coefficients_alone():
    model, opt = sgd_state("mlp", lr=0.1)
    meta = make_meta(model, torch.float64, "l2")
    step = MetaLearner(model, opt, ce, backend="jvp", every=2, **meta)
    data = batches("mlp")
    run_step(step, data)
    grads = [p.grad.clone() for p in step.meta_parameters]
    values = [p.detach().clone() for p in step.meta_parameters]
    run_step(step, data)  # plain: the CE + penalty backward must not reach the coefficients
    for p, g, v in zip(step.meta_parameters, grads, values):
        assert torch.equal(p.grad, g) and torch.equal(p, v)


@pytest.mark.parametrize("backend", ["jvp", "head"])
def test_hooks_are_called(backend):
    model, opt = sgd_state("mlp", lr=0.1)
    meta = make_meta(model, torch.float64, "focal")
    calls = {"backward": 0, "average": []}

    def backward(loss):
        calls["backward"] += 1
        loss.backward()

    def average(tensors):
        calls["average"].append([t.shape for t in tensors])

    step = MetaLearner(model, opt, ce, backend=backend, backward=backward, average=average, **meta)
    run_step(step, batches("mlp"))
    assert calls["backward"] == 1
    v_shapes = [p.shape for p in model.parameters()]
    if backend == "head":
        v_shapes = [model.classifier.weight.shape, model.classifier.bias.shape]
    phi_shapes = [p.shape for p in meta["gamma_net"].parameters()]  # A, W, b of the γ-Net
    assert len(phi_shapes) == 3
    assert calls["average"] == [v_shapes, phi_shapes]  # first the meta-val gradients v, then φ's


def test_sgd_coefficient_table():
    """c of ∂θ'/∂φ = −η·c·∂g/∂φ, derived in metacal.meta.sgd_lookahead (and checked by finite differences)."""
    buf = {"momentum_buffer": torch.zeros(1)}
    g = lambda **kw: {"momentum": 0.0, "dampening": 0.0, "nesterov": False, **kw}  # noqa: E731
    assert step_coefficient(g(), {}) == 1.0
    assert step_coefficient(g(momentum=0.9), {}) == 1.0
    assert step_coefficient(g(momentum=0.9, dampening=0.3), {}) == 1.0  # first step: buf = d
    assert step_coefficient(g(momentum=0.9, dampening=0.3), buf) == pytest.approx(0.7)
    assert step_coefficient(g(momentum=0.9, nesterov=True), {}) == pytest.approx(1.9)
    assert step_coefficient(g(momentum=0.9, nesterov=True), buf) == pytest.approx(1.9)


def test_errors():
    model, _ = sgd_state("mlp")
    gamma_net = GammaNet(model.feature_dim, 3).double()
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="torch.optim.SGD"):
        MetaLearner(model, torch.optim.Adam(model.parameters()), ce, gamma_net=gamma_net)
    with pytest.raises(ValueError, match="available: head, higher, jvp"):
        MetaLearner(model, sgd, ce, gamma_net=gamma_net, backend="nope")
    with pytest.raises(ValueError, match="gamma_net"):
        MetaLearner(model, sgd, ce)
    with pytest.raises(ValueError, match="every must be"):
        MetaLearner(model, sgd, ce, gamma_net=gamma_net, every=0)
    step = MetaLearner(model, sgd, ce, gamma_net=gamma_net)
    x, y, _, _ = batches("mlp")
    with pytest.raises(ValueError, match="meta-validation batch"):
        step.step(x, y)
    assert sorted(BACKENDS) == ["head", "higher", "jvp"]


class WrappedSGD:
    """Stands in for accelerate's AcceleratedOptimizer: the torch SGD lives in ``.optimizer``."""

    def __init__(self, optimizer):
        self.optimizer = optimizer
        self.steps = 0

    def zero_grad(self, set_to_none=True):
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def step(self):
        self.steps += 1
        self.optimizer.step()


@pytest.mark.parametrize("backend", BACKEND_NAMES)
def test_wrapped_optimizer(backend):
    model, opt = sgd_state("cnn_bn", warm=True, lr=0.1, momentum=0.9, weight_decay=5e-4)
    meta = make_meta(model, torch.float64, "focal")
    data = batches("cnn_bn")
    m1, o1 = clone_state(model, opt)
    m2, o2 = clone_state(model, opt)
    s1 = MetaLearner(m1, o1, ce, backend=backend, **copy.deepcopy(meta))
    wrapper = WrappedSGD(o2)
    s2 = MetaLearner(m2, wrapper, ce, backend=backend, **copy.deepcopy(meta))
    run_step(s1, data)
    run_step(s2, data)
    assert wrapper.steps == (0 if backend == "higher" else 1)
    for p, q in zip(m1.parameters(), m2.parameters()):
        assert torch.equal(p, q)
    for p, q in zip(s1.meta_parameters, s2.meta_parameters):
        assert torch.equal(p.grad, q.grad)


def test_ddp_forward_model(tmp_path):
    """A DDP-wrapped forward_model (world size 1, gloo): jvp/head use it for the real forward and give the
    same result as without it; higher refuses with a clear message."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        for backend in ("jvp", "head"):
            model, opt = sgd_state("cnn_bn", warm=True, lr=0.1, momentum=0.9)
            meta = make_meta(model, torch.float64, "focal")
            data = batches("cnn_bn")
            m1, o1 = clone_state(model, opt)
            m2, o2 = clone_state(model, opt)
            s1 = MetaLearner(m1, o1, ce, backend=backend, **copy.deepcopy(meta))
            s2 = MetaLearner(m2, o2, ce, backend=backend, forward_model=DistributedDataParallel(m2),
                          **copy.deepcopy(meta))
            run_step(s1, data)
            run_step(s2, data)
            for p, q in zip(m1.parameters(), m2.parameters()):
                torch.testing.assert_close(p, q, rtol=1e-12, atol=1e-12)
            for p, q in zip(s1.meta_parameters, s2.meta_parameters):
                torch.testing.assert_close(p.grad, q.grad, rtol=1e-10, atol=1e-12)
        model, opt = sgd_state("mlp", lr=0.1)
        with pytest.raises(ValueError, match="DistributedDataParallel"):
            MetaLearner(model, opt, ce, backend="higher", forward_model=DistributedDataParallel(model),
                        **make_meta(model, torch.float64, "focal"))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("backend", BACKEND_NAMES)
def test_gradient_clipping_in_the_real_step(backend):
    """max_grad_norm clips the real step exactly like clip_grad_norm_ before optimizer.step()."""
    model, opt = sgd_state("resnet", warm=True, lr=0.1, momentum=0.9)
    meta = make_meta(model, torch.float64, "focal")
    x, y, xm, ym = batches("resnet")
    ref, ref_opt = clone_state(model, opt)
    gamma_net = copy.deepcopy(meta["gamma_net"])
    ref_opt.zero_grad()
    logits, feats = ref(x, return_features=True)
    build_loss("focal", reduction="none")(logits, y, gamma=gamma_net(feats).detach()).mean().backward()
    norm = torch.nn.utils.clip_grad_norm_(ref.parameters(), 1e-3)
    assert norm > 1e-2  # clipping is active
    ref_opt.step()
    m, o = clone_state(model, opt)
    MetaLearner(m, o, ce, backend=backend, max_grad_norm=1e-3, **copy.deepcopy(meta)).step(x, y, (xm, ym))
    for p, q in zip(m.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-10, atol=1e-12)
