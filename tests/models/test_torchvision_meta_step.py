"""One FLγ-SECE meta step on torchvision backbones (resnet18, a tiny VisionTransformer): the γ-Net reads the
wrapper's features, and the exact hypergradient of the ``jvp`` backend (forward mode, attention through the
math kernel) equals the ``higher`` reference (differentiable unrolled SGD step) in float64."""

from __future__ import annotations

import copy

import pytest
import torch

from metacal import losses, models, objectives
from metacal.meta import GammaNet, MetaLearner

CASES = {
    "resnet18": ("torchvision:resnet18", {}, (1, 16, 16)),
    "vit": ("torchvision:VisionTransformer",
            {"patch_size": 4, "num_layers": 1, "num_heads": 2, "hidden_dim": 8, "mlp_dim": 16}, (3, 8, 8)),
}
K = 4


def build(case: str):
    name, options, shape = CASES[case]
    torch.manual_seed(0)
    model = models.build(name, K, shape[0], input_shape=shape, **options).double()
    # a non-zero head (torchvision's ViT starts it at 0) so that the body moves in the first step too
    torch.nn.init.normal_(model.classifier.weight, std=0.3)
    gamma_net = GammaNet(model.feature_dim, K).double()
    gen = torch.Generator().manual_seed(1)
    x, xm = (torch.randn(6, *shape, generator=gen, dtype=torch.float64) for _ in range(2))
    return model, gamma_net, x, torch.arange(6) % K, xm, (torch.arange(6) + 1) % K


def meta_step(model, gamma_net, backend, x, y, xm, ym):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    learner = MetaLearner(model, opt, objectives.build("sece"), gamma_net=gamma_net, backend=backend,
                          loss=losses.build("focal", reduction="none"),
                          meta_optimizer=torch.optim.SGD(gamma_net.parameters(), lr=0.0))
    seen = {}
    handle = gamma_net.register_forward_pre_hook(lambda m, args: seen.setdefault("features", args[0].detach()))
    try:
        out = learner.step(x, y, (xm, ym))
    finally:
        handle.remove()
    return out, seen["features"], [p.grad.clone() for p in gamma_net.parameters()]


@pytest.mark.parametrize("case", sorted(CASES))
def test_meta_step_reads_the_wrappers_features_and_jvp_equals_higher(case):
    model, gamma_net, x, y, xm, ym = build(case)
    reference = copy.deepcopy(model).train()
    with torch.no_grad():
        _, expected_features = reference(x, return_features=True)

    results = {}
    for backend in ("jvp", "higher"):
        m, g = copy.deepcopy(model), copy.deepcopy(gamma_net)
        out, features, grads = meta_step(m, g, backend, x, y, xm, ym)
        # the γ-Net saw the penultimate features of the real train forward at the old θ
        assert features.shape == (6, model.feature_dim)
        torch.testing.assert_close(features, expected_features, rtol=0, atol=1e-12)
        assert out.gamma.shape == (6,) and torch.isfinite(out.meta_objective)
        moved = [n for (n, p), q in zip(m.named_parameters(), model.parameters()) if not torch.equal(p, q)]
        assert "net.conv1.weight" in moved or "net.conv_proj.weight" in moved  # the body took the SGD step
        results[backend] = grads
    norm = torch.cat([g.reshape(-1) for g in results["higher"]]).norm()
    assert norm > 1e-3
    for a, b in zip(results["jvp"], results["higher"]):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10 * float(norm))


@pytest.mark.parametrize("case", sorted(CASES))
def test_head_backend_runs_on_the_wrapper(case):
    model, gamma_net, x, y, xm, ym = build(case)
    out, features, grads = meta_step(model, gamma_net, "head", x, y, xm, ym)
    assert all(torch.isfinite(g).all() for g in grads) and any(g.abs().sum() > 0 for g in grads)
