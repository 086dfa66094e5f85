"""docs/evaluation.md's meta-learner example, run as written on a small model: one real SGD step, one γ-Net update."""

import pytest
import torch

import metacal.objectives
from metacal import models
from metacal.meta import GammaNet, MetaLearner, PlainStep
from metacal.losses import build as build_loss


def _batches(seed: int, n: int = 32):
    g = torch.Generator().manual_seed(seed)
    while True:
        yield torch.randn(n, 1, 40, generator=g), torch.randint(0, 10, (n,), generator=g)


def test_readme_example_updates_backbone_and_gamma_net():
    torch.manual_seed(0)
    model = models.build("cnn1d", num_classes=10, in_channels=1, input_shape=(1, 40))
    sece = metacal.objectives.build("sece", bandwidth=0.01)
    meta_batches = _batches(1)
    x, y = next(_batches(2))
    before = [p.detach().clone() for p in model.parameters()]
    learner = MetaLearner(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), sece,
                          gamma_net=GammaNet(model.feature_dim, num_heads=10), meta_val=meta_batches)
    phi = [p.detach().clone() for p in learner.meta_parameters]
    result = learner.step(x, y)
    assert result.meta_objective is not None and result.gamma.shape == (32,)
    assert abs(float(result.gamma.mean()) - 1.0) < 0.05  # γ starts at init_gamma = 1 (GammaNet docstring)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert any(not torch.equal(a, b) for a, b in zip(phi, learner.meta_parameters))


def test_plain_step_equals_a_hand_written_sgd_step():
    torch.manual_seed(0)
    model = models.build("mlp", num_classes=3, in_channels=1, input_shape=(1, 5))
    ref = [p.detach().clone() for p in model.parameters()]
    x, y = torch.randn(8, 1, 5), torch.randint(0, 3, (8,))
    loss = build_loss("focal", gamma=2.0)
    out = PlainStep(model, loss, torch.optim.SGD(model.parameters(), lr=0.5)).step(x, y)
    clone = models.build("mlp", num_classes=3, in_channels=1, input_shape=(1, 5))
    with torch.no_grad():
        for p, r in zip(clone.parameters(), ref):
            p.copy_(r)
    value = loss(clone(x), y)
    grads = torch.autograd.grad(value, list(clone.parameters()))
    assert float(out.loss) == float(value.detach())
    for p, r, g in zip(model.parameters(), ref, grads):
        torch.testing.assert_close(p.detach(), r - 0.5 * g)
    assert out.meta_objective is None and out.gamma is None
    with pytest.raises(ValueError, match="head=model.classifier"):  # learnable L2 needs the head
        PlainStep(model, build_loss("ce_learnable_l2", weight_shape=(3, model.feature_dim)), None)
