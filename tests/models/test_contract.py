"""The interface every classifier promises (docs/conventions.md#interfaces, metacal.models)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from metacal import models

# (name, in_channels, options, input shape without batch) — small spatial sizes keep it fast;
# global average pooling makes every 2-D model size-agnostic.
CASES = [
    ("small_resnet", 1, {}, (1, 28, 28)),
    ("small_resnet", 3, {}, (3, 28, 28)),
    ("cnn1d", 1, {}, (1, 40)),
    ("cnn1d", 1, {"pool": "avg"}, (1, 40)),
    ("mlp", 1, {"input_shape": (1, 28, 28)}, (1, 28, 28)),
    ("mlp", 1, {"input_shape": (1, 40)}, (1, 40)),
    ("mlp", 2, {"in_features": 2 * 5 * 5, "hidden": (), "batch_norm": True}, (2, 5, 5)),
    ("mlp", 3, {"in_features": 12, "hidden": (8,), "batch_norm": True, "dropout": 0.5}, (3, 4)),
    ("mlp", 16, {"input_shape": (16,), "hidden": (8,)}, (16,)),  # (N, D) embeddings of an arrays file
    ("mlp", 2, {"input_shape": (2, 3, 2, 2), "hidden": (8,)}, (2, 3, 2, 2)),  # any rank: flattened
    ("resnet18", 3, {}, (3, 16, 16)),
    ("resnet34", 3, {}, (3, 8, 8)),
    ("resnet50", 3, {}, (3, 8, 8)),
    ("resnet20", 3, {}, (3, 8, 8)),
    ("resnet32", 3, {}, (3, 8, 8)),
    ("resnet56", 3, {"shortcut": "B"}, (3, 8, 8)),
    ("resnet110", 3, {}, (3, 8, 8)),
    ("resnet110_bottleneck", 3, {}, (3, 8, 8)),
    ("wrn28_10", 3, {}, (3, 8, 8)),
    ("wrn26_10", 3, {}, (3, 8, 8)),
    ("wide_resnet", 3, {"depth": 10, "widen_factor": 2, "dropout": 0.3}, (3, 8, 8)),
    ("wide_resnet", 1, {"depth": 8, "widen_factor": 1, "style": "postact"}, (1, 8, 8)),
    ("densenet100", 3, {}, (3, 8, 8)),
    ("densenet121", 3, {}, (3, 32, 32)),
    ("densenet121", 3, {"stem": "cifar"}, (3, 8, 8)),
]
IDS = [f"{n}-c{c}-" + ",".join(f"{k}={v}" for k, v in o.items()) for n, c, o, _ in CASES]
EXPECTED_FEATURES = {"small_resnet": 64, "cnn1d": 125, "resnet18": 512, "resnet34": 512,
                     "resnet50": 2048, "resnet20": 64, "resnet110": 64, "wrn28_10": 640,
                     "wrn26_10": 640, "densenet100": 342, "densenet121": 1024}


def test_registry_lists_every_family():
    assert set(models.available()) >= {
        "small_resnet", "cnn1d", "mlp", "resnet18", "resnet34", "resnet50", "resnet110",
        "wrn28_10", "wrn26_10", "densenet100", "densenet121"}
    assert models.available() == models.MODELS.available() == sorted(models.available())


@pytest.mark.parametrize("name,in_channels,options,shape", CASES, ids=IDS)
@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_logits_features_and_head(get_model, name, in_channels, options, shape, train):
    k = 10
    model = get_model(name, k, in_channels, **options)
    model.train(train)
    head = model.classifier
    assert isinstance(head, nn.Linear)
    assert (head.in_features, head.out_features) == (model.feature_dim, k)
    if name in EXPECTED_FEATURES and not options.get("pool"):
        assert model.feature_dim == EXPECTED_FEATURES[name]

    # The head is the last op: capture what it sees and returns during the forward pass.
    seen = {}
    handle = head.register_forward_hook(lambda m, inp, out: seen.update(inp=inp[0], out=out))
    torch.manual_seed(1)
    x = torch.randn(2, *shape)
    try:
        with torch.no_grad():
            torch.manual_seed(2)
            logits, features = model(x, return_features=True)
            assert seen["out"] is logits and seen["inp"] is features  # same forward pass
            torch.manual_seed(2)  # same dropout mask
            plain = model(x)
    finally:
        handle.remove()
    assert logits.shape == (2, k) and features.shape == (2, model.feature_dim)
    assert torch.isfinite(logits).all() and torch.isfinite(features).all()
    assert torch.equal(logits, head(features))  # logits = classifier(features), exactly
    assert torch.equal(plain, logits)  # return_features does not change the logits


@pytest.mark.parametrize(
    "name,in_channels,options,shape",
    [c for c in CASES if c[0] in ("small_resnet", "resnet20", "densenet100", "wrn26_10")],
)
def test_eval_mode_uses_running_statistics(get_model, name, in_channels, options, shape):
    """Train mode normalises with batch statistics, so a sample's logits depend on its batch
    mates; eval mode uses running statistics, so they do not."""
    model = get_model(name, 10, in_channels, **options)
    torch.manual_seed(3)
    x = torch.randn(4, *shape)
    with torch.no_grad():
        model.train()
        train_full, train_half = model(x)[:2], model(x[:2])
        model.eval()
        eval_full, eval_half = model(x)[:2], model(x[:2])
    assert not torch.allclose(train_full, train_half, atol=1e-4)
    torch.testing.assert_close(eval_full, eval_half, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "name,in_channels,options,shape",
    [c for c in CASES if c[0] not in ("resnet110_bottleneck", "wrn28_10", "wrn26_10", "resnet34",
                                      "resnet32", "densenet121")]
    + [("wide_resnet", 3, {"depth": 10, "widen_factor": 1}, (3, 8, 8)),
       ("densenet121", 3, {"stem": "cifar"}, (3, 8, 8))],
)
def test_gradients_reach_every_parameter(name, in_channels, options, shape):
    torch.manual_seed(0)
    model = models.build(name, 10, in_channels, **options).train()
    x = torch.randn(4, *shape)
    y = torch.tensor([0, 1, 2, 3])
    nn.functional.cross_entropy(model(x), y).backward()
    for pname, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), pname
        assert p.grad.abs().sum() > 0, f"{name}: no gradient reaches {pname}"


def test_float64_and_device_follow_the_input():
    model = models.build("small_resnet", 10, 1).double().eval()
    logits, feats = model(torch.randn(2, 1, 28, 28, dtype=torch.float64), return_features=True)
    assert logits.dtype == feats.dtype == torch.float64


@pytest.mark.parametrize("name", ["resnet20", "resnet18", "densenet121"])
def test_tiny_imagenet_sized_inputs(get_model, name):
    """64×64 inputs (Tiny-ImageNet, 200 classes) go through the same models."""
    model = get_model(name, 200, 3, **({"stem": "cifar"} if name == "densenet121" else {}))
    with torch.no_grad():
        logits, feats = model.eval()(torch.randn(1, 3, 64, 64), return_features=True)
    assert logits.shape == (1, 200) and feats.shape == (1, model.feature_dim)
