"""The meta step under accelerate's bf16 autocast (``run.mixed_precision: bf16``), on CPU.

accelerate's ``prepare_model`` puts an autocast wrapper on the model *instance* (``model.forward``), bound to the
real module. ``higher`` copies instance attributes onto its functional model, so without care the functional
model ran the real weights: no fast weight reached the loss, the backbone never moved and the hypergradient
was None (seen on an H100 by scripts/gpu_check.py). Oracle here: the ``jvp`` backend, whose forwards go through
the wrapper itself, under the same autocast."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.state import AcceleratorState

from meta_nets import batches, clone_state, make_meta, rel_diff, run_step, sgd_state
from metacal.meta import MetaLearner


@pytest.fixture
def bf16():
    AcceleratorState._reset_state(True)
    yield Accelerator(cpu=True, mixed_precision="bf16")
    AcceleratorState._reset_state(True)


def meta_step(backend, model, opt, meta, data, accelerator):
    m, o = clone_state(model, opt)
    m = accelerator.prepare_model(m)
    assert "forward" in m.__dict__  # the instance-level autocast wrapper this test is about
    step = MetaLearner(m, o, lambda z, y: F.cross_entropy(z, y), backend=backend, autocast=accelerator.autocast,
                       **{k: copy.deepcopy(v) for k, v in meta.items()})
    out = run_step(step, data)
    return torch.cat([p.grad.reshape(-1) for p in step.meta_parameters]), m, out


@pytest.mark.parametrize("inner", ["focal", "l2"])
def test_higher_under_bf16_autocast_steps_the_backbone_and_agrees_with_jvp(bf16, inner):
    model, opt = sgd_state("resnet", dtype=torch.float32, warm=True, lr=0.1, momentum=0.9, weight_decay=5e-4)
    meta, data = make_meta(model, torch.float32, inner), batches("resnet", n=32, dtype=torch.float32)
    g_jvp, m_jvp, out_jvp = meta_step("jvp", model, opt, meta, data, bf16)
    g_higher, m_higher, out_higher = meta_step("higher", model, opt, meta, data, bf16)
    assert "forward" in m_higher.__dict__  # the wrapper is put back after the functional copy is made
    moved = max(float((p.detach() - q.detach()).abs().max()) for p, q in zip(m_higher.parameters(), model.parameters()))
    assert moved > 1e-3  # the backbone took its step
    for (name, p), q in zip(m_higher.named_parameters(), m_jvp.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6, msg=name)  # the same real step
    assert rel_diff(g_higher, g_jvp) < 0.02, (g_higher, g_jvp)  # both differentiate bf16 forwards
    if inner == "focal":
        assert out_higher.gamma_grad is not None
        assert rel_diff(out_higher.gamma_grad, out_jvp.gamma_grad) < 0.02
