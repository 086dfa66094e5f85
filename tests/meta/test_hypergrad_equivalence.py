"""``jvp`` (forward-mode JVP, no second-order graph) equals ``higher`` (full second-order lookahead).

Both run one MetaLearner step from identical copies of the same state; compared are the meta-parameters'
hypergradients (left in ``.grad``), the updated backbone, BN buffers and momentum buffers.
"""

import pytest
import torch
import torch.nn.functional as F

from metacal.objectives import build as build_objective
from meta_nets import batches, make_meta, rel_diff, run_backend, sgd_state

SGD_CONFIGS = {
    "plain": dict(lr=0.1),
    "momentum_wd": dict(lr=0.1, momentum=0.9, weight_decay=5e-4),
    "dampening": dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=1e-3),
    "nesterov": dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4),
}


def ce(logits, targets):
    return F.cross_entropy(logits, targets)


def compare(kind, sgd, warm, inner, objective, dtype=torch.float64, **options):
    model, opt = sgd_state(kind, dtype=dtype, warm=warm, **sgd)
    meta = make_meta(model, dtype, inner)
    data = batches(kind, dtype=dtype)
    g_ref, m_ref, o_ref, out_ref, _ = run_backend("higher", model, opt, meta, data, objective, **options)
    g_jvp, m_jvp, o_jvp, out_jvp, _ = run_backend("jvp", model, opt, meta, data, objective, **options)
    assert g_ref.abs().max() > 0
    # the same real step
    for (n, p), q in zip(m_ref.named_parameters(), m_jvp.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7, msg=n)
        if "momentum_buffer" in o_ref.state.get(p, {}):
            torch.testing.assert_close(o_ref.state[p]["momentum_buffer"], o_jvp.state[q]["momentum_buffer"])
    for b, c in zip(m_ref.buffers(), m_jvp.buffers()):
        torch.testing.assert_close(b, c, rtol=1e-6, atol=1e-7)
    assert float(out_ref.meta_objective) == pytest.approx(float(out_jvp.meta_objective), rel=1e-6)
    return rel_diff(g_jvp, g_ref)


@pytest.mark.parametrize("kind", ["mlp", "cnn_bn", "resnet"])
@pytest.mark.parametrize("config", list(SGD_CONFIGS))
@pytest.mark.parametrize("warm", [False, True], ids=["first_step", "buffer_exists"])
def test_jvp_equals_higher_focal_float64(kind, config, warm):
    assert compare(kind, SGD_CONFIGS[config], warm, "focal", ce) < 1e-8


@pytest.mark.parametrize("kind", ["mlp", "resnet"])
@pytest.mark.parametrize("config", ["plain", "nesterov", "dampening"])
def test_jvp_equals_higher_learnable_l2_float64(kind, config):
    assert compare(kind, SGD_CONFIGS[config], True, "l2", ce) < 1e-8


@pytest.mark.parametrize("name", ["sece", "dece"])
@pytest.mark.parametrize("inner", ["focal", "l2"])
def test_jvp_equals_higher_calibration_objectives(name, inner):
    objective = build_objective(name)
    assert compare("cnn_bn", SGD_CONFIGS["momentum_wd"], True, inner, objective) < 1e-8


@pytest.mark.parametrize("kind", ["cnn_bn", "resnet"])
def test_jvp_equals_higher_float32(kind):
    """float32 at 1e-4 relative, SECE + 0.5·CE meta objective (Bohdal et al.'s later form)."""
    assert compare(
        kind, SGD_CONFIGS["momentum_wd"], True, "focal", build_objective("sece"), dtype=torch.float32,
        ce_weight=0.5,
    ) < 1e-4


@pytest.mark.parametrize("output", ["softplus", "sigmoid", "relu"])
def test_jvp_equals_higher_other_gamma_maps(output):
    model, opt = sgd_state("mlp", warm=True, **SGD_CONFIGS["momentum_wd"])
    meta = make_meta(model, torch.float64, "focal", gamma_output=output)
    data = batches("mlp")
    g_ref = run_backend("higher", model, opt, meta, data, ce)[0]
    g_jvp = run_backend("jvp", model, opt, meta, data, ce)[0]
    assert rel_diff(g_jvp, g_ref) < 1e-8


def test_jvp_equals_higher_with_gradient_clipping():
    """Clipping active (max norm far below ‖g‖): both treat the clip factor as a constant."""
    assert compare("resnet", SGD_CONFIGS["momentum_wd"], True, "focal", ce, max_grad_norm=1e-3) < 1e-8


def test_jvp_equals_higher_with_dropout():
    """The JVP replays the real forward's RNG state, so it differentiates through the same dropout masks."""
    assert compare("mlp_dropout", SGD_CONFIGS["momentum_wd"], True, "focal", ce) < 1e-8


def test_jvp_replay_of_primal_outputs_is_safe():
    """In-place-modified conv outputs fall back to recomputation; a module called twice replays in order."""
    import metacal.meta.replay as replay

    calls = []
    original = replay._ReplayLinearOp.apply

    def counting(*args):
        calls.append(args[3][0].shape)
        return original(*args)

    replay._ReplayLinearOp.apply = counting
    try:
        assert compare("inplace_shared", SGD_CONFIGS["momentum_wd"], True, "focal", ce) < 1e-8
    finally:
        replay._ReplayLinearOp.apply = original
    # replayed: shared conv ×2 and the classifier; the stem's output was modified in place by relu_
    assert len(calls) == 3


@pytest.mark.parametrize(("kind", "expected"), [
    ("resnet", [True, True, True]),  # every BatchNorm normalises a replayed conv output
    ("batch_stats", [True, False]),  # the input batch itself; a conv output overwritten in place
])
def test_jvp_reuses_the_real_forwards_batch_statistics_only_for_the_same_input(kind, expected):
    """The JVP pass applies the real forward's BatchNorm statistics exactly when its input is the tensor the
    real forward normalised, unmodified; otherwise it recomputes them — the hypergradient is higher's either way."""
    from metacal.meta.replay import PrimalRecorder

    hits = []
    original = PrimalRecorder.pop_batch_stats

    def spy(self, module, x):
        stats = original(self, module, x)
        hits.append(stats is not None)
        return stats

    PrimalRecorder.pop_batch_stats = spy
    try:
        assert compare(kind, SGD_CONFIGS["momentum_wd"], True, "focal", ce) < 1e-8
    finally:
        PrimalRecorder.pop_batch_stats = original
    assert hits == expected
