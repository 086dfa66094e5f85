"""Each architecture is the published one: parameter counts against the papers / reference
implementations, layer counts against the depth in the name, and — where torchvision has the
same network — identical outputs after copying the weights across (an independent oracle)."""

from __future__ import annotations

import math

import pytest
import torch
import torchvision
from torch import nn

from metacal import models
from metacal.models.resnet_cifar import PadShortcut



def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())

# Published parameter counts, 10 classes, and where they come from. The tolerance is 2 % or
# the rounding of the published figure, whichever is larger.
PUBLISHED = [
    # Kuang Liu pytorch-cifar layout (focal_calibration Net/resnet.py); counts as listed for
    # CIFAR-10 in the DA2Lite model zoo README (ResNet18 11.17M, ResNet50 23.52M) and printed
    # by a pytorch-cifar port ("#11173962", "#21282122" for resnet18/resnet34).
    ("resnet18", {}, 11.17e6, 0.005e6),
    ("resnet34", {}, 21.28e6, 0.005e6),
    ("resnet50", {}, 23.52e6, 0.005e6),
    # He et al. 2016, Table 6 (CIFAR-10): 0.27M, 0.46M, 0.85M, 1.7M — also the table in
    # akamaster/pytorch_resnet_cifar10 (option A shortcuts, as in the paper).
    ("resnet20", {}, 0.27e6, 0.005e6),
    ("resnet32", {}, 0.46e6, 0.005e6),
    ("resnet56", {}, 0.85e6, 0.005e6),
    ("resnet110", {}, 1.7e6, 0.05e6),
    # Zagoruyko & Komodakis 2016, Table 4 / Fig. 1 of the README: WRN-28-10 36.5M.
    ("wrn28_10", {}, 36.5e6, 0.05e6),
    # Huang et al. 2017, Table 2: DenseNet-BC (L=100, k=12) 0.8M.
    ("densenet100", {}, 0.8e6, 0.05e6),
]


@pytest.mark.parametrize("name,options,published,rounding", PUBLISHED,
                         ids=[p[0] for p in PUBLISHED])
def test_parameter_counts_match_publications(get_model, name, options, published, rounding):
    count = n_params(get_model(name, 10, 3, **options))
    assert abs(count - published) <= max(0.02 * published, rounding), count


def _basic_post(c_in: int, w: int, stride: int, projection: str) -> int:
    """Post-activation BasicBlock: two 3×3 convs + 2 BN, plus a 1×1 conv + BN projection."""
    n = c_in * w * 9 + 2 * w + w * w * 9 + 2 * w
    if projection == "B" and (stride != 1 or c_in != w):
        n += c_in * w + 2 * w
    return n


def _cifar_resnet_count(stem: int, widths, blocks, k: int, projection: str) -> int:
    n, c = 3 * stem * 9 + 2 * stem, stem
    for i, (w, b) in enumerate(zip(widths, blocks)):
        for j in range(b):
            n += _basic_post(c, w, 2 if (i > 0 and j == 0) else 1, projection)
            c = w
    return n + c * k + k


def test_exact_counts_from_hand_formulas(get_model):
    """Closed-form counts written from the papers' layer descriptions."""
    # ResNet-110 (n=18, option A): 1,727,962; ResNet-20: 269,722.
    he = (16, 32, 64)
    assert n_params(get_model("resnet110")) == _cifar_resnet_count(16, he, (18,) * 3, 10, "A")
    assert _cifar_resnet_count(16, he, (18,) * 3, 10, "A") == 1_727_962
    assert n_params(get_model("resnet20")) == _cifar_resnet_count(16, he, (3,) * 3, 10, "A")
    assert _cifar_resnet_count(16, he, (3,) * 3, 10, "A") == 269_722
    # WRN-26-10 as in focal_calibration: 4 post-activation blocks/stage at 160/320/640.
    wide = _cifar_resnet_count(16, (160, 320, 640), (4,) * 3, 10, "B")
    assert n_params(get_model("wrn26_10")) == wide == 36_481_434
    # WRN-28-10, pre-activation: BN(c_in) conv3×3 BN(w) conv3×3 [+ 1×1 conv], final BN.
    n, c = 3 * 16 * 9, 16
    for i, w in enumerate((160, 320, 640)):
        for j in range(4):
            n += 2 * c + c * w * 9 + 2 * w + w * w * 9 + (c * w if c != w else 0)
            c = w
    assert n_params(get_model("wrn28_10")) == n + 2 * c + c * 10 + 10 == 36_479_194
    # DenseNet-BC-100, k=12: 3×3 stem to 24, 3×16 bottleneck layers, compression ½.
    n, c = 3 * 24 * 9, 24
    for block in range(3):
        for _ in range(16):
            n += 2 * c + c * 48 + 2 * 48 + 48 * 12 * 9
            c += 12
        if block < 2:
            n += 2 * c + c * (c // 2)
            c //= 2
    assert n_params(get_model("densenet100")) == n + 2 * c + c * 10 + 10 == 769_162
    # MNIST-1D CNN (Greydanus 2020): convs 1→25 (k5), 25→25 (k3) ×2, head 25·5 → 10.
    cnn = (25 * 5 + 25) + 2 * (25 * 25 * 3 + 25) + 125 * 10 + 10
    assert n_params(get_model("cnn1d", 10, 1)) == cnn == 5210
    # MLP 784-256-256-10.
    assert n_params(get_model("mlp", 10, 1, input_shape=(1, 28, 28))) == (
        784 * 256 + 256 + 256 * 256 + 256 + 256 * 10 + 10) == 269_322


def _conv_count(model: nn.Module, kernel: int | None = None) -> int:
    return sum(1 for m in model.modules() if isinstance(m, (nn.Conv1d, nn.Conv2d))
               and (kernel is None or m.kernel_size[0] == kernel))


def test_depths_match_the_names(get_model):
    # He et al.: 6n+2 weighted layers = 3×3 stem + 6n 3×3 convs + fc (option A: no 1×1 convs).
    assert _conv_count(get_model("resnet110")) + 1 == 110
    assert _conv_count(get_model("resnet20")) + 1 == 20
    # focal_calibration's "resnet110": 3 + 3·36 convs outside the shortcuts + fc.
    model = get_model("resnet110_bottleneck")
    assert sum(1 for m in model.modules() if type(m).__name__ == "Bottleneck") == 36
    assert 1 + 3 * 36 + 1 == 110 and model.feature_dim == 2048
    # WRN-28-10 and WRN-26-10 have the same 24 3×3 block convs; they count depth differently.
    for name in ("wrn28_10", "wrn26_10"):
        assert _conv_count(get_model(name), 3) == 1 + 24
    assert _conv_count(get_model("wrn28_10"), 1) == 3  # 28 = 25 + 3 projections
    assert _conv_count(get_model("wrn26_10"), 3) + 1 == 26  # 26 = 25 + fc
    # DenseNet-BC-100: stem + 48×2 + 2 transitions + fc = 100.
    assert _conv_count(get_model("densenet100")) + 1 == 100


def test_option_a_shortcut_subsamples_and_zero_pads():
    x = torch.arange(2 * 16 * 4 * 4, dtype=torch.float32).reshape(2, 16, 4, 4)
    out = PadShortcut(16, 32, 2)(x)
    assert out.shape == (2, 32, 2, 2)
    assert torch.equal(out[:, 8:24], x[:, :, ::2, ::2])
    assert out[:, :8].abs().sum() == 0 and out[:, 24:].abs().sum() == 0


def test_small_resnet_is_small_and_accepts_any_channels(get_model):
    for c in (1, 3):
        model = get_model("small_resnet", 10, c)
        assert n_params(model) < 1_000_000
        assert n_params(model) == 78_042 + 16 * 9 * (c - 1)  # only the stem sees the channels


# ---------------------------------------------------------------- torchvision as an oracle
def _randomise(model: nn.Module) -> None:
    """Random weights AND random BN running statistics, so a misplaced BN cannot hide."""
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if t.is_floating_point():
                t.copy_(torch.rand(t.shape, generator=g) + 0.5 if "running_var" in name
                        else torch.randn(t.shape, generator=g) * 0.1)


def _copy_in_order(src: nn.Module, dst: nn.Module) -> None:
    s, d = list(src.state_dict().items()), dst.state_dict()
    d_items = list(d.items())
    assert len(s) == len(d_items)
    for (sk, sv), (dk, dv) in zip(s, d_items):
        assert sv.shape == dv.shape, (sk, dk)
    dst.load_state_dict({dk: sv for (_, sv), (dk, _) in zip(s, d_items)})


def _cifar_stem_torchvision(tv: nn.Module, conv_attr: str, width: int, drop: list[str]) -> None:
    parent = tv.features if hasattr(tv, "features") else tv
    setattr(parent, conv_attr, nn.Conv2d(3, width, 3, 1, 1, bias=False))
    for attr in drop:
        setattr(parent, attr, nn.Identity())


TV = torchvision.models
ORACLES = [
    ("resnet18", {}, lambda: TV.resnet18(num_classes=10), ("conv1", 64, ["maxpool"]), 16),
    ("resnet50", {}, lambda: TV.resnet50(num_classes=10), ("conv1", 64, ["maxpool"]), 16),
    ("densenet121", {}, lambda: TV.densenet121(num_classes=10), None, 32),
    ("densenet121", {"stem": "cifar"}, lambda: TV.densenet121(num_classes=10),
     ("conv0", 64, ["norm0", "relu0", "pool0"]), 8),
    ("densenet100", {}, lambda: TV.DenseNet(12, (16, 16, 16), 24, 4, 0.0, 10),
     ("conv0", 24, ["norm0", "relu0", "pool0"]), 8),
]


ORACLE_IDS = ["resnet18", "resnet50", "densenet121", "densenet121-cifar", "densenet100"]


@pytest.mark.parametrize("name,options,make_tv,stem,size", ORACLES, ids=ORACLE_IDS)
def test_same_function_as_torchvision(get_model, name, options, make_tv, stem, size):
    """Our CIFAR ResNets are torchvision's with a 3×3 stride-1 stem and no max-pool; our
    DenseNets are torchvision's DenseNet (with the CIFAR stem where stated). Same weights in,
    same logits and features out (eval mode)."""
    torch.manual_seed(0)
    ours = models.build(name, 10, 3, **options).eval()
    tv = make_tv().eval()
    if stem is not None:
        _cifar_stem_torchvision(tv, *stem)
    assert n_params(ours) == n_params(tv)
    _randomise(ours)
    _copy_in_order(ours, tv)
    head = tv.fc if hasattr(tv, "fc") else tv.classifier
    seen = {}
    head.register_forward_hook(lambda m, inp, out: seen.update(feat=inp[0]))
    x = torch.randn(2, 3, size, size)
    with torch.no_grad():
        logits, feats = ours(x, return_features=True)
        expected = tv(x)
    torch.testing.assert_close(logits, expected, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(feats, seen["feat"], rtol=1e-4, atol=1e-4)
    assert math.isfinite(float(logits.abs().sum())) and logits.abs().sum() > 0
