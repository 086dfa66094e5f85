"""``model.name: torchvision:<name>`` — any torchvision classification network as a metacal classifier.

``<name>`` is a builder listed by ``torchvision.models.list_models(module=torchvision.models)`` (resnet18,
convnext_tiny, efficientnet_b0, mobilenet_v3_small, vit_b_16, swin_t, …) or a model class of
``torchvision.models`` built with its own arguments (``VisionTransformer`` with ``image_size``,
``patch_size``, ``num_layers``, ``num_heads``, ``hidden_dim``, ``mlp_dim``). The network is built with
``num_classes=K`` — its head is a fresh K-class ``nn.Linear`` (torchvision's own init) — and without
weights, then wrapped in :class:`~metacal.models.features.FeatureClassifier`: the features are the head's
input (the penultimate layer), captured by a forward hook, so the stock network is not edited.

metacal's options (every other option goes to the torchvision builder, e.g. ``dropout``,
``stochastic_depth_prob``, ``image_size``):

* ``head`` / ``feature_layer`` — dotted module names, see FeatureClassifier (default: the Linear producing
  the output, found by a probe forward; its input).
* ``input_channels`` — inputs whose channel count is not 3 (Fashion-MNIST: 1): ``"repeat"`` (default)
  repeats a single channel three times in front of the network, so a first convolution trained on RGB
  is used as is; ``"first_conv"`` replaces the network's first ``nn.Conv2d`` by one with C input channels
  (PyTorch's default init; a 3-channel checkpoint's first convolution must then be skipped).
* ``resize`` — inputs are resized (bilinear) to ``resize × resize`` in front of the network.

For ``vit_*`` and ``VisionTransformer``, ``image_size`` defaults to the (resized) input size. Pretrained
weights by name (``weights=``, ``pretrained=``) are refused: runs never download (this workplace is
offline); pass local weights with ``model.checkpoint`` (metacal/train/init_weights.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable

import torch.nn.functional as F
from torch import Tensor, nn

from metacal.registry import UnknownNameError, list_command, unknown_name

from .base import check_input_shape, check_sizes
from .features import FeatureClassifier, set_submodule

PREFIX = "torchvision:"
INPUT_CHANNELS = ("repeat", "first_conv")
OFFLINE = ("this workplace is offline and runs never download weights: save the state dict on a machine with "
           "internet (torch.save(torchvision.models.{name}(weights=...).state_dict(), PATH)), copy it here and pass "
           "model.checkpoint: PATH, with model.checkpoint_skip naming the head to start the {k}-class head afresh "
           "(e.g. [net.fc] for resnets, [net.heads.head] for vit)")


class InputAdapter(nn.Module):
    """Parameter-free input preparation: repeat a single channel ``channels`` times, resize to ``size``²."""

    def __init__(self, channels: int | None = None, size: int | None = None) -> None:
        super().__init__()
        self.channels, self.size = channels, size

    def forward(self, x: Tensor) -> Tensor:
        if self.channels is not None:
            x = x.expand(-1, self.channels, *x.shape[2:])
        if self.size is not None:
            x = F.interpolate(x, size=(self.size, self.size), mode="bilinear", align_corners=False)
        return x

    def extra_repr(self) -> str:
        return f"channels={self.channels}, size={self.size}"


def classification_models() -> list[str]:
    import torchvision.models as tvm

    return list(tvm.list_models(module=tvm))


def resolve(name: str) -> Callable[..., nn.Module]:
    """The builder (or model class) called ``name`` in torchvision.models; unknown → UnknownNameError."""
    import torchvision.models as tvm

    builders = classification_models()
    if name in builders:
        return tvm.get_model_builder(name)
    found = getattr(tvm, name, None)
    if isinstance(found, type) and issubclass(found, nn.Module):
        return found
    raise UnknownNameError(unknown_name("torchvision model", name, builders,
                                        list_command("torchvision.models", "list_models(m)")))


def _replace_first_conv(net: nn.Module, in_channels: int, name: str) -> None:
    first = next(((n, m) for n, m in net.named_modules() if isinstance(m, nn.Conv2d)), None)
    if first is None:
        raise ValueError(f"torchvision:{name}: input_channels=first_conv needs an nn.Conv2d, the network has none")
    n, c = first
    set_submodule(net, n, nn.Conv2d(in_channels, c.out_channels, c.kernel_size, c.stride, c.padding, c.dilation,
                                    c.groups, c.bias is not None, c.padding_mode))


def build_torchvision(name: str, num_classes: int, in_channels: int = 3, input_shape: Sequence[int] | None = None,
                      head: str | None = None, feature_layer: str | None = None, input_channels: str = "repeat",
                      resize: int | None = None, **options: Any) -> FeatureClassifier:
    """torchvision's ``name`` with a K-class head, wrapped with the metacal contract (module docstring)."""
    label = PREFIX + name
    check_sizes(label, num_classes, in_channels)
    shape = check_input_shape(label, in_channels, input_shape, 3)
    for key in ("weights", "pretrained", "weights_backbone"):
        if options.get(key) not in (None, False):
            raise ValueError(f"{label}: model.options.{key}={options[key]!r} asks for pretrained weights by name, but "
                             + OFFLINE.format(name=name, k=num_classes))
        options.pop(key, None)
    if input_channels not in INPUT_CHANNELS:
        raise ValueError(f"{label}: input_channels must be one of {', '.join(INPUT_CHANNELS)}; got {input_channels!r}")
    if resize is not None and (isinstance(resize, bool) or not isinstance(resize, int) or resize < 1):
        raise ValueError(f"{label}: resize must be a positive int (the side of the resized input); got {resize!r}")
    repeat = None
    if in_channels != 3 and input_channels == "repeat":
        if in_channels != 1:
            raise ValueError(f"{label}: input_channels=repeat repeats a 1-channel input, these inputs have {in_channels} "
                             "channels; use input_channels: first_conv")
        repeat = 3
    builder = resolve(name)
    if name in ("inception_v3", "googlenet"):  # their train-mode output would be a tuple with auxiliary logits
        options.setdefault("aux_logits", False)
        options.setdefault("init_weights", True)
    if shape is not None and "image_size" not in options and (name.startswith("vit_") or name == "VisionTransformer"):
        side = resize if resize is not None else shape[1]
        if resize is not None or shape[1] == shape[2]:
            options["image_size"] = side
    try:
        net = builder(num_classes=num_classes, **options)
    except (TypeError, ValueError, AssertionError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ValueError(f"{label}: cannot build with options {options}: {first}") from None
    if in_channels != 3 and input_channels == "first_conv":
        _replace_first_conv(net, in_channels, name)
    adapter = InputAdapter(repeat, resize) if repeat is not None or resize is not None else None
    return FeatureClassifier(net, head=head, feature_layer=feature_layer, num_classes=num_classes,
                             input_shape=shape, input_adapter=adapter)


def is_torchvision(name: str) -> bool:
    return isinstance(name, str) and name.startswith(PREFIX)


def torchvision_name(name: str) -> str:
    return name[len(PREFIX):]

