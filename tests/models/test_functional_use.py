"""The models work with the functional tools the meta step uses: `higher` (patched copies),
torch.func.functional_call, and forward-mode AD along a parameter direction (the "jvp" backend,
docs/conventions.md#meta-step) — checked against finite differences in float64."""

from __future__ import annotations

import higher
import torch
import torch.autograd.forward_ad as fwAD
from torch import nn
from torch.func import functional_call

from metacal import models


def _small():
    torch.manual_seed(0)
    return models.build("small_resnet", 10, 1, widths=(4, 8), blocks=(1, 1), strides=(2, 2),
                        stem_width=4)


def test_higher_patched_model_returns_the_same_logits_and_features():
    model = _small().train()
    x, y = torch.randn(6, 1, 12, 12), torch.arange(6) % 10
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    with torch.no_grad():
        ref_logits, ref_feats = model(x, return_features=True)
    with higher.innerloop_ctx(model, opt) as (fmodel, diffopt):
        logits, feats = fmodel(x, return_features=True)
        torch.testing.assert_close(logits, ref_logits)
        torch.testing.assert_close(feats, ref_feats)
        diffopt.step(nn.functional.cross_entropy(logits, y))
        after = fmodel(x)
        # the fast weights differ after one step, and depend differentiably on the initial ones
        assert not torch.allclose(after, ref_logits)
        grad = torch.autograd.grad(after.sum(), fmodel.parameters(time=0), allow_unused=True)
        assert any(g is not None and g.abs().sum() > 0 for g in grad)


def test_forward_mode_jvp_along_parameters_matches_finite_differences():
    model = _small().double().eval()
    x = torch.randn(3, 1, 12, 12, dtype=torch.float64)
    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())
    torch.manual_seed(1)
    v = {k: torch.randn_like(p) for k, p in params.items()}
    with fwAD.dual_level():
        duals = {k: fwAD.make_dual(p.detach(), v[k]) for k, p in params.items()}
        logits, feats = functional_call(model, (duals, buffers), (x,), {"return_features": True})
        jvp = fwAD.unpack_dual(logits).tangent
        assert fwAD.unpack_dual(feats).tangent.shape == feats.shape
    eps = 1e-6
    with torch.no_grad():
        plus = {k: p + eps * v[k] for k, p in params.items()}
        minus = {k: p - eps * v[k] for k, p in params.items()}
        plus = functional_call(model, (plus, buffers), (x,))
        minus = functional_call(model, (minus, buffers), (x,))
    torch.testing.assert_close(jvp, (plus - minus) / (2 * eps), rtol=1e-5, atol=1e-7)
