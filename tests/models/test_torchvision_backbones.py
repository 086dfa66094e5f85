"""``torchvision:<name>`` backbones and the generic feature wrapper (metacal/models/features.py,
metacal/models/torchvision_models.py): shapes, features = the head's input (checked against a manual
forward through the network's own layers), grayscale handling, feature_layer, and one-line errors."""

from __future__ import annotations

import pytest
import torch
import torchvision
from torch import nn

from metacal import models
from metacal.models import ContractError, FeatureClassifier, probe_contract, wrap
from metacal.registry import UnknownNameError

TINY_VIT = {"patch_size": 4, "num_layers": 1, "num_heads": 2, "hidden_dim": 8, "mlp_dim": 16}


def resnet18(in_channels: int = 3, side: int = 32, **options) -> FeatureClassifier:
    torch.manual_seed(0)
    return models.build("torchvision:resnet18", 10, in_channels, input_shape=(in_channels, side, side), **options)


def tiny_vit(**options) -> FeatureClassifier:
    torch.manual_seed(0)
    return models.build("torchvision:VisionTransformer", 5, 3, input_shape=(3, 8, 8), **{**TINY_VIT, **options})


def manual_resnet_features(net: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """torchvision ResNet's forward written out up to the head's input."""
    x = net.maxpool(net.relu(net.bn1(net.conv1(x))))
    x = net.layer4(net.layer3(net.layer2(net.layer1(x))))
    return torch.flatten(net.avgpool(x), 1)


def manual_vit_features(net: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """torchvision VisionTransformer's forward written out up to the head's input (the class token)."""
    x = net._process_input(x)
    x = torch.cat([net.class_token.expand(x.shape[0], -1, -1), x], dim=1)
    return net.encoder(x)[:, 0]


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_resnet18_logits_and_features_are_the_heads_output_and_input(train):
    model = resnet18().train(train)
    assert model.head_name == "fc" and model.feature_dim == 512 and model.features_are_head_input
    assert model.classifier is model.net.fc and (model.classifier.in_features, model.classifier.out_features) == (512, 10)
    seen = {}
    handle = model.classifier.register_forward_hook(lambda m, args, out: seen.update(inp=args[0], out=out))
    x = torch.randn(4, 3, 32, 32)
    try:
        logits, features = model(x, return_features=True)
    finally:
        handle.remove()
    assert logits.shape == (4, 10) and features.shape == (4, 512)
    assert seen["out"] is logits and seen["inp"] is features  # one forward pass, the head's own tensors
    model.eval()
    with torch.no_grad():
        logits, features = model(x, return_features=True)
        manual = manual_resnet_features(model.net, x)
        assert torch.equal(features, manual)
        assert torch.equal(logits, model.net.fc(manual)) and torch.equal(model(x), logits)


def test_tiny_vit_features_are_the_class_token_fed_to_the_head():
    model = tiny_vit().eval()
    assert model.head_name == "heads.head" and model.feature_dim == 8
    assert model.net.image_size == 8  # image_size defaults to the input size
    x = torch.randn(3, 3, 8, 8)
    with torch.no_grad():
        logits, features = model(x, return_features=True)
        manual = manual_vit_features(model.net, x)
    assert logits.shape == (3, 5) and features.shape == (3, 8)
    torch.testing.assert_close(features, manual, rtol=0, atol=1e-6)
    torch.testing.assert_close(logits, model.net.heads.head(manual), rtol=0, atol=1e-6)


def test_grayscale_repeat_feeds_the_network_three_copies_of_the_channel():
    model = resnet18(in_channels=1, side=28).eval()
    assert model.net.conv1.in_channels == 3  # the RGB first convolution is kept (pretrained weights fit)
    x = torch.randn(2, 1, 28, 28)
    with torch.no_grad():
        assert torch.equal(model(x), model.net(x.repeat(1, 3, 1, 1)))


def test_grayscale_first_conv_replaces_the_first_convolution():
    model = resnet18(in_channels=1, side=28, input_channels="first_conv").eval()
    conv = model.net.conv1
    assert (conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride) == (1, 64, (7, 7), (2, 2))
    assert model.adapter is None and model(torch.randn(2, 1, 28, 28)).shape == (2, 10)


def test_resize_reaches_the_network():
    model = resnet18(in_channels=1, side=28, resize=40)
    seen = {}
    handle = model.net.conv1.register_forward_pre_hook(lambda m, args: seen.update(shape=tuple(args[0].shape)))
    model(torch.randn(2, 1, 28, 28))
    handle.remove()
    assert seen["shape"] == (2, 3, 40, 40)


def test_feature_layer_override():
    at_pool = resnet18(feature_layer="avgpool")  # (N, 512, 1, 1) flattened = the head's input
    assert at_pool.feature_dim == 512 and at_pool.features_are_head_input
    deeper = resnet18(side=64, feature_layer="layer4")  # (N, 512, 2, 2) before pooling: another tensor
    assert deeper.feature_dim == 2048 and not deeper.features_are_head_input
    x = torch.randn(2, 3, 64, 64)
    deeper.eval()
    with torch.no_grad():
        logits, features = deeper(x, return_features=True)
        net = deeper.net
        manual = net.layer4(net.layer3(net.layer2(net.layer1(net.maxpool(net.relu(net.bn1(net.conv1(x))))))))
    assert torch.equal(features, manual.flatten(1)) and logits.shape == (2, 10)


@pytest.mark.parametrize("name,in_channels,side,head,dim", [
    ("convnext_tiny", 3, 32, "classifier.2", 768),
    ("efficientnet_b0", 3, 32, "classifier.1", 1280),
    ("mobilenet_v3_small", 1, 32, "classifier.3", 1024),
])
def test_other_families_find_their_head(name, in_channels, side, head, dim):
    model = models.build(f"torchvision:{name}", 7, in_channels, input_shape=(in_channels, side, side))
    assert (model.head_name, model.feature_dim, model.classifier.out_features) == (head, dim, 7)
    logits, features = model.train()(torch.randn(2, in_channels, side, side), return_features=True)
    assert logits.shape == (2, 7) and features.shape == (2, dim)


class TwoHeads(nn.Module):
    """A network whose last REGISTERED Linear is not the one producing the output."""

    def __init__(self) -> None:
        super().__init__()
        self.out = nn.Linear(6, 4)
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(12, 6), nn.ReLU())
        self.unused = nn.Linear(6, 6)

    def forward(self, x):
        return self.out(self.body(x))


def test_wrap_finds_the_head_by_probing_and_replaces_its_width():
    net = TwoHeads()
    model = wrap(net, 3, input_shape=(3, 2, 2))
    assert isinstance(model, FeatureClassifier) and model.head_name == "out"
    assert model.classifier.out_features == 3 and model.feature_dim == 6
    x = torch.randn(5, 3, 2, 2)
    logits, features = model(x, return_features=True)
    assert torch.equal(features, net.body(x)) and torch.equal(logits, net.out(net.body(x)))
    assert probe_contract(model, (3, 2, 2), 3) == {"feature_dim": 6, "features_are_head_input": True}


def test_wrap_returns_a_metacal_classifier_unchanged():
    own = models.build("mlp", 4, 1, input_shape=(1, 8))
    assert wrap(own, 4, input_shape=(1, 8)) is own and wrap(own) is own


def test_probe_leaves_modes_buffers_and_rng_untouched():
    model = resnet18().train()
    buffers = {n: b.clone() for n, b in model.named_buffers()}
    rng = torch.get_rng_state()
    probe_contract(model, (3, 32, 32), 10)
    assert all(m.training for m in model.modules())
    assert all(torch.equal(buffers[n], b) for n, b in model.named_buffers())
    assert torch.equal(rng, torch.get_rng_state())


class Reuses(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.act = nn.ReLU()
        self.lin = nn.Linear(4, 4)
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.act(self.lin(self.act(x))))


def one_line(err: BaseException) -> str:
    text = str(err)
    assert "\n" not in text
    return text


@pytest.mark.parametrize("build,match", [
    (lambda: models.build("torchvision:resnet19", 10, 3), "unknown torchvision model 'resnet19'; did you mean resnet18,"),
    (lambda: models.build("torchvision:squeezenet1_0", 10, 3, input_shape=(3, 32, 32)), "no nn.Linear of SqueezeNet"),
    (lambda: resnet18(feature_layer="layer9"), "feature_layer 'layer9' is not a module of ResNet"),
    (lambda: resnet18(feature_layer="bn1"), "modified in place later in the forward pass"),
    (lambda: resnet18(head="layer1"), "head 'layer1' is a Sequential, not an nn.Linear"),
    (lambda: resnet18(input_channels="rgb"), "input_channels must be one of repeat, first_conv"),
    (lambda: resnet18(in_channels=2), "repeats a 1-channel input, these inputs have 2 channels"),
    (lambda: models.build("torchvision:VisionTransformer", 5, 3, input_shape=(3, 10, 10), **TINY_VIT),
     "cannot build with options"),
    (lambda: wrap(Reuses(), 2, feature_layer="act", input_shape=(4,)), "'act' was reached 2 times"),
])
def test_errors_are_one_line(build, match):
    with pytest.raises((ContractError, ValueError, UnknownNameError)) as info:
        build()
    assert match in one_line(info.value)


@pytest.mark.parametrize("option", [{"weights": "IMAGENET1K_V1"}, {"pretrained": True}])
def test_pretrained_weights_by_name_are_refused_offline(option):
    with pytest.raises(ValueError) as info:
        resnet18(**option)
    text = one_line(info.value)
    assert "asks for pretrained weights by name" in text and "offline" in text and "model.checkpoint: PATH" in text


def test_every_listed_name_resolves():
    from metacal.models.torchvision_models import classification_models, resolve

    names = classification_models()
    assert {"resnet18", "convnext_tiny", "efficientnet_b0", "vit_b_16", "swin_t"} <= set(names)
    assert all(callable(resolve(n)) for n in names)
    assert resolve("VisionTransformer") is torchvision.models.VisionTransformer
