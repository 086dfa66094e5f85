"""The trajectory hypergradient dJ(θ_K)/db of the γ-Net's bias (metacal/meta/trajectory.py) against two
independent oracles, in float64: ``higher`` unrolling all K SGD steps differentiably (b held fixed, as
RTHO assumes), and central finite differences of J(θ_K) in b with real torch.optim.SGD steps.

The γ-Net reads detached features, so the path b → θ_k → features_k → γ_k is not differentiated (by
design, as in the one-step backends); finite differences see it (≈ 1e-5 relative here). The
finite-difference test therefore zeroes W: γ = |b/τ| for every sample, independent of the features."""

import copy

import pytest
import torch
import torch.nn.functional as F

from metacal.meta import MetaLearner
from meta_nets import batches, clone_state, make_meta, sgd_state

K = 4
CONFIGS = {
    "plain": dict(lr=0.1),
    "momentum_wd": dict(lr=0.1, momentum=0.9, weight_decay=1e-2),
    "dampening": dict(lr=0.05, momentum=0.8, dampening=0.3, weight_decay=1e-3),
    "nesterov": dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4),
}


def ce(logits, targets):
    return F.cross_entropy(logits, targets)


def stream(kind):
    """K train batches and one meta-validation batch."""
    train = [batches(kind, seed=10 + k)[:2] for k in range(K)]
    return train, batches(kind, seed=50)[2:]


def focal_loss(gamma_net):
    from metacal.meta.inner import GammaFocalInner

    return GammaFocalInner(gamma_net)


def learner_gradient(model, opt, gamma_net, kind, every=1, split=None):
    """b's gradient after K iterations of a MetaLearner whose meta optimiser does not move φ (lr 0).
    With ``split`` the learner is rebuilt from its state_dict after that many iterations (a resume)."""
    m, o = clone_state(model, opt)
    net = copy.deepcopy(gamma_net)

    def build():
        return MetaLearner(m, o, ce, gamma_net=net, horizon="trajectory", every=every,
                           meta_optimizer=torch.optim.SGD(net.parameters(), lr=0.0))

    learner = build()
    train, meta = stream(kind)
    for k, (x, y) in enumerate(train):
        if split is not None and k == split:
            state = copy.deepcopy(learner.state_dict())
            learner = build()
            learner.load_state_dict(state)
        if k == K - 1:
            assert learner.iteration % every == 0, "the last iteration must be a meta step"
        learner.step(x, y, meta)
    return float(net.bias.grad)


def higher_gradient(model, opt, gamma_net, kind):
    import higher

    m, o = clone_state(model, opt)
    net = copy.deepcopy(gamma_net)
    inner = focal_loss(net)
    train, (xm, ym) = stream(kind)
    m.train()
    with higher.innerloop_ctx(m, o, copy_initial_weights=True) as (fmodel, diffopt):
        for x, y in train:
            logits, features = fmodel(x, return_features=True)
            diffopt.step(inner.total(logits, y, None, None, net(features)))
        objective = ce(fmodel(xm), ym)
        return float(torch.autograd.grad(objective, net.bias)[0])


def finite_difference(model, opt, gamma_net, kind, eps=1e-6):
    def value(sign):
        m, o = clone_state(model, opt)
        net = copy.deepcopy(gamma_net)
        with torch.no_grad():
            net.bias.add_(sign * eps)
        inner = focal_loss(net)
        train, (xm, ym) = stream(kind)
        m.train()
        for x, y in train:
            o.zero_grad()
            logits, features = m(x, return_features=True)
            inner.total(logits, y, None, None, net(features).detach()).backward()
            o.step()
        with torch.no_grad():
            return float(ce(m(xm), ym))

    return (value(1) - value(-1)) / (2 * eps)


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("kind", ["mlp_bn", "cnn_bn"])
def test_trajectory_matches_higher_unrolled(config, kind):
    model, opt = sgd_state(kind, **CONFIGS[config])
    gamma_net = make_meta(model, torch.float64)["gamma_net"]
    reference = higher_gradient(model, opt, gamma_net, kind)
    assert abs(reference) > 1e-6
    assert learner_gradient(model, opt, gamma_net, kind) == pytest.approx(reference, rel=1e-7)


@pytest.mark.parametrize("config", ["momentum_wd", "nesterov"])
def test_trajectory_matches_finite_difference(config):
    model, opt = sgd_state("mlp_bn", **CONFIGS[config])
    gamma_net = make_meta(model, torch.float64)["gamma_net"]
    with torch.no_grad():
        gamma_net.weight.zero_()
    fd = finite_difference(model, opt, gamma_net, "mlp_bn", eps=1e-7)
    assert abs(fd) > 1e-3
    assert learner_gradient(model, opt, gamma_net, "mlp_bn") == pytest.approx(fd, rel=1e-7)


def test_plain_iterations_advance_the_tangents():
    """With a meta step every 3rd call the tangents still follow every SGD step (iterations 0..3)."""
    model, opt = sgd_state("mlp_bn", **CONFIGS["momentum_wd"])
    gamma_net = make_meta(model, torch.float64)["gamma_net"]
    assert learner_gradient(model, opt, gamma_net, "mlp_bn", every=3) == pytest.approx(
        higher_gradient(model, opt, gamma_net, "mlp_bn"), rel=1e-7)


def test_tangents_survive_a_resume():
    model, opt = sgd_state("mlp_bn", **CONFIGS["momentum_wd"])
    gamma_net = make_meta(model, torch.float64)["gamma_net"]
    whole = learner_gradient(model, opt, gamma_net, "mlp_bn")
    assert learner_gradient(model, opt, gamma_net, "mlp_bn", split=2) == pytest.approx(whole, rel=1e-12)


def test_one_step_trajectory_is_the_one_step_hypergradient():
    """After a single iteration the trajectory and the one-step lookahead differentiate the same thing."""
    model, opt = sgd_state("cnn_bn", **CONFIGS["nesterov"])
    gamma_net = make_meta(model, torch.float64)["gamma_net"]
    x, y, xm, ym = batches("cnn_bn")
    grads = {}
    for horizon in ("step", "trajectory"):
        m, o = clone_state(model, opt)
        net = copy.deepcopy(gamma_net)
        MetaLearner(m, o, ce, gamma_net=net, horizon=horizon).step(x, y, (xm, ym))
        grads[horizon] = float(net.bias.grad)
    assert grads["trajectory"] == pytest.approx(grads["step"], rel=1e-9)


def test_trajectory_needs_a_gamma_net_and_a_known_horizon():
    model, opt = sgd_state("mlp", lr=0.1)
    loss = make_meta(model, torch.float64, inner="l2")["loss"]
    with pytest.raises(ValueError, match="needs a γ-Net"):
        MetaLearner(model, opt, ce, loss=loss, horizon="trajectory")
    with pytest.raises(ValueError, match="unknown meta horizon 'long'"):
        MetaLearner(model, opt, ce, loss=loss, horizon="long")


def test_level_gradient_is_per_unit_of_gamma_whatever_the_sign_of_b():
    """With γ = |b/τ| (W = 0), b < 0 flips ∂γ/∂b: the logged level gradient keeps "negative = raise γ"."""
    model, opt = sgd_state("mlp", lr=0.1)
    x, y, xm, ym = batches("mlp")
    levels = {}
    for sign in (1, -1):
        m, o = clone_state(model, opt)
        net = make_meta(model, torch.float64)["gamma_net"]
        with torch.no_grad():
            net.weight.zero_()
            net.bias.mul_(sign)
        out = MetaLearner(m, o, ce, gamma_net=net, horizon="trajectory").step(x, y, (xm, ym))
        assert float(out.level_grad) == pytest.approx(float(net.bias.grad) * net.tau * sign, rel=1e-9)
        levels[sign] = float(out.level_grad)
    assert levels[1] == pytest.approx(levels[-1], rel=1e-9)  # same γ, same training: same answer


def _two_rank_worker(rank, store, model, opt, gamma_net, queue):
    """One of two gloo ranks: half of every batch, gradients averaged by hand (what DDP does)."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    try:
        def backward(loss):
            loss.backward()
            for p in model.parameters():
                if p.grad is not None:
                    dist.all_reduce(p.grad)
                    p.grad.div_(2)

        learner = MetaLearner(model, opt, ce, gamma_net=gamma_net, horizon="trajectory", backward=backward,
                              meta_optimizer=torch.optim.SGD(gamma_net.parameters(), lr=0.0))
        train, (xm, ym) = stream("mlp")
        half = slice(6 * rank, 6 * rank + 6)
        for x, y in train:
            learner.step(x[half], y[half], (xm[half], ym[half]))
        queue.put((rank, float(gamma_net.bias.grad)))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_two_processes_give_the_single_process_global_batch_gradient(tmp_path):
    """Tangent directions and v are averaged over ranks, so every rank holds dJ/db of the global batch."""
    import torch.multiprocessing as mp

    model, opt = sgd_state("mlp", **CONFIGS["momentum_wd"])
    gamma_net = make_meta(model, torch.float64)["gamma_net"]
    single = learner_gradient(model, opt, gamma_net, "mlp")
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_two_rank_worker, args=(r, tmp_path / "store", *clone_state(model, opt),
                                                        copy.deepcopy(gamma_net), queue)) for r in range(2)]
    for p in procs:
        p.start()
    results = dict(queue.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    assert results[0] == pytest.approx(single, rel=1e-9) and results[1] == pytest.approx(single, rel=1e-9)


@pytest.mark.parametrize("config", ["momentum_wd", "nesterov", "dampening"])
def test_decay_zero_is_the_one_step_hypergradient_at_every_step(config):
    """β = 0 forgets every earlier step: b's gradient is the one-step lookahead's, step after step (the SGD
    coefficient c of first step / existing buffer / nesterov comes out of the tangent recursion)."""
    model, opt = sgd_state("mlp_bn", **CONFIGS[config])
    gamma_net = make_meta(model, torch.float64)["gamma_net"]
    train, meta = stream("mlp_bn")
    grads = {}
    for horizon, decay in (("step", 1.0), ("trajectory", 0.0)):
        m, o = clone_state(model, opt)
        net = copy.deepcopy(gamma_net)
        learner = MetaLearner(m, o, ce, gamma_net=net, horizon=horizon, horizon_decay=decay,
                              meta_optimizer=torch.optim.SGD(net.parameters(), lr=0.0))
        grads[horizon] = []
        for x, y in train:
            learner.step(x, y, meta)
            grads[horizon].append(float(net.bias.grad))
    assert grads["trajectory"] == pytest.approx(grads["step"], rel=1e-9)
    assert len(set(grads["step"])) == K  # a different gradient at every step: the comparison is not trivial


def test_decay_weights_older_steps_geometrically():
    """0 < β < 1 lies strictly between the one-step (β = 0) and the whole-trajectory (β = 1) gradients here,
    and a bad β is refused."""
    model, opt = sgd_state("mlp", **CONFIGS["momentum_wd"])
    gamma_net = make_meta(model, torch.float64)["gamma_net"]
    values = []
    for decay in (0.0, 0.5, 1.0):
        m, o = clone_state(model, opt)
        net = copy.deepcopy(gamma_net)
        learner = MetaLearner(m, o, ce, gamma_net=net, horizon="trajectory", horizon_decay=decay,
                              meta_optimizer=torch.optim.SGD(net.parameters(), lr=0.0))
        train, meta = stream("mlp")
        for x, y in train:
            learner.step(x, y, meta)
        values.append(float(net.bias.grad))
    assert min(values[0], values[2]) < values[1] < max(values[0], values[2])
    with pytest.raises(ValueError, match=r"horizon decay must be in \[0, 1\]"):
        MetaLearner(model, opt, ce, gamma_net=copy.deepcopy(gamma_net), horizon="trajectory", horizon_decay=1.5)


def test_meta_optimizer_state_of_a_single_group_run_loads_into_two_groups():
    """Runs saved before meta.shape_lr_scale had one Adam group over (A, W, b); a resume now builds two
    groups (b; A and W): each parameter keeps its own Adam moments."""
    model, opt = sgd_state("mlp", lr=0.1)
    x, y, xm, ym = batches("mlp")
    net = make_meta(model, torch.float64)["gamma_net"]
    old = MetaLearner(model, opt, ce, gamma_net=net, meta_optimizer=torch.optim.Adam(net.parameters(), lr=1e-4))
    old.step(x, y, (xm, ym))
    saved = copy.deepcopy(old.state_dict())
    groups = [{"params": [net.bias]}, {"params": [net.attention, net.weight], "lr": 1e-5}]
    new = MetaLearner(model, opt, ce, gamma_net=net, meta_optimizer=torch.optim.Adam(groups, lr=1e-4))
    new.load_state_dict(saved)
    state = new.meta_optimizer.state
    for p in (net.attention, net.weight, net.bias):
        assert torch.equal(state[p]["exp_avg"], old.meta_optimizer.state[p]["exp_avg"])
    assert [g["lr"] for g in new.meta_optimizer.param_groups] == [1e-4, 1e-5]
