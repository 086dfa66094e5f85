"""Starting a model from a local state dict (metacal/models/weights.py): exact round trips, and one-line
errors naming missing keys, unexpected keys and shape mismatches."""

from __future__ import annotations

import pytest
import torch
import torchvision
from safetensors.torch import save_file

from metacal import models
from metacal.models import WeightsMismatchError, load_weights
from metacal.models.weights import read_state_dict


def resnet18(num_classes: int = 10, seed: int = 0):
    torch.manual_seed(seed)
    return models.build("torchvision:resnet18", num_classes, 3, input_shape=(3, 32, 32))


def reference(num_classes: int = 10) -> torchvision.models.ResNet:
    """A torchvision ResNet-18 with other (seeded) weights and non-trivial BN statistics."""
    torch.manual_seed(123)
    net = torchvision.models.resnet18(num_classes=num_classes)
    net.train()(torch.randn(4, 3, 32, 32))  # running statistics ≠ their initial values
    return net


def error_of(model, state, **kwargs) -> str:
    with pytest.raises(WeightsMismatchError) as info:
        load_weights(model, state, source="w.pth", **kwargs)
    text = str(info.value)
    assert "\n" not in text
    return text


def test_torchvision_state_dict_round_trip(tmp_path):
    net = reference()
    torch.save(net.state_dict(), tmp_path / "r18.pth")
    model = resnet18()
    loaded = load_weights(model, read_state_dict(tmp_path / "r18.pth"))
    assert len(loaded) == len(net.state_dict())
    for name, tensor in net.state_dict().items():
        assert torch.equal(model.state_dict()[f"net.{name}"], tensor), name
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(model.eval()(x), net.eval()(x))


@pytest.mark.parametrize("fmt", ["pt", "safetensors", "nested", "ddp"])
def test_metacal_state_dict_round_trip_in_every_file_format(fmt, tmp_path):
    source = resnet18(seed=1)
    state = source.state_dict()
    path = tmp_path / f"w.{'safetensors' if fmt == 'safetensors' else 'pt'}"
    if fmt == "safetensors":
        save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    else:
        obj = {"pt": state, "nested": {"state_dict": state, "epoch": 3},
               "ddp": {f"module.{k}": v for k, v in state.items()}}[fmt]
        torch.save(obj, path)
    model = resnet18(seed=2)
    assert not torch.equal(model.net.conv1.weight, source.net.conv1.weight)
    load_weights(model, read_state_dict(path))
    for name, tensor in state.items():
        assert torch.equal(model.state_dict()[name], tensor), name


def test_missing_keys_are_named():
    state = reference().state_dict()
    del state["layer4.1.bn2.weight"], state["layer4.1.bn2.bias"]
    text = error_of(resnet18(), state)
    assert text == ("w.pth does not fit the model: 2 of the model's tensors missing: net.layer4.1.bn2.bias, "
                    "net.layer4.1.bn2.weight")


def test_absent_num_batches_tracked_is_accepted():
    state = {k: v for k, v in reference().state_dict().items() if not k.endswith("num_batches_tracked")}
    model = resnet18()
    load_weights(model, state)
    assert torch.equal(model.net.bn1.running_mean, reference().bn1.running_mean)


def test_shape_mismatch_names_the_shapes_and_the_head_skip():
    text = error_of(resnet18(), reference(num_classes=1000).state_dict())
    assert text.startswith("w.pth does not fit the model: 2 tensor(s) of another shape: net.fc.bias [1000] in the "
                           "checkpoint but [10] in the model, net.fc.weight [1000, 512] in the checkpoint but "
                           "[10, 512] in the model")
    assert text.endswith("; model.checkpoint_skip: [net.fc] keeps the model's fresh head instead")


def test_skipping_the_head_loads_the_rest_and_keeps_the_fresh_head():
    net = reference(num_classes=1000)
    model = resnet18()
    head_before = model.classifier.weight.detach().clone()
    loaded = load_weights(model, net.state_dict(), skip=["net.fc"])
    assert "net.fc.weight" not in loaded and len(loaded) == len(net.state_dict()) - 2
    assert torch.equal(model.classifier.weight, head_before)
    assert torch.equal(model.net.layer3[0].conv1.weight, net.layer3[0].conv1.weight)


def test_a_checkpoint_of_another_architecture_is_one_line():
    torch.manual_seed(0)
    other = models.build("small_resnet", 10, 3)
    text = error_of(resnet18(), other.state_dict())
    assert text.startswith("w.pth does not fit the model (another architecture? only 0 of its 122 tensors are in "
                           "the checkpoint): ")
    assert "of the model's tensors missing: net.bn1.bias" in text and "the model does not have: classifier.bias" in text


def test_skip_prefix_matching_nothing_lists_the_modules():
    text = error_of(resnet18(), reference().state_dict(), skip=["fc"])
    assert "model.checkpoint_skip 'fc' matches no tensor of the model" in text and "net.conv1, net.bn1" in text


def test_prefixes_match_whole_name_components():
    from metacal.models.weights import matches

    assert matches("net.fc", "net.fc") and matches("net.fc.weight", "net.fc")
    assert not matches("net.fc2.weight", "net.fc") and not matches("net.f", "net.fc")


def test_unreadable_files_are_one_line(tmp_path):
    text_file = tmp_path / "notes.pth"
    text_file.write_text("not a checkpoint")
    with pytest.raises(WeightsMismatchError, match="is not a state dict saved with torch.save or safetensors"):
        read_state_dict(text_file)
    torch.save([1, 2, 3], tmp_path / "list.pt")
    with pytest.raises(WeightsMismatchError, match="does not hold a state dict"):
        read_state_dict(tmp_path / "list.pt")
    with pytest.raises(FileNotFoundError):
        read_state_dict(tmp_path / "absent.pth")
