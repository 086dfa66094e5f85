"""Tiny classifiers following the models contract (forward(x, return_features=False), .classifier last,
.feature_dim) and helpers shared by the meta tests."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from metacal.losses import build as build_loss
from metacal.meta import GammaNet, MetaLearner


class Contract(nn.Module):
    def forward(self, x, return_features=False):
        features = self.body(x)
        logits = self.classifier(features)
        return (logits, features) if return_features else logits


class TinyMLP(Contract):
    def __init__(self, in_features=6, hidden=5, num_classes=3, batchnorm=False, dropout=0.0):
        super().__init__()
        layers = [nn.Linear(in_features, hidden)]
        if batchnorm:
            layers.append(nn.BatchNorm1d(hidden))
        layers.append(nn.Tanh())
        if dropout:
            layers.append(nn.Dropout(dropout))
        self.body = nn.Sequential(*layers)
        self.feature_dim = hidden
        self.classifier = nn.Linear(hidden, num_classes)


class TinyBNCNN(Contract):
    def __init__(self, in_channels=1, width=4, num_classes=3):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, padding=1),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.Conv2d(width, width, 3, stride=2, padding=1),
            nn.BatchNorm2d(width),
            nn.Tanh(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.feature_dim = width
        self.classifier = nn.Linear(width, num_classes)


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.conv1 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + x)


class TinyResNet(Contract):
    def __init__(self, in_channels=1, width=4, num_classes=3):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            Block(width),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.feature_dim = width
        self.classifier = nn.Linear(width, num_classes)


class InplaceSharedCNN(Contract):
    """conv → ReLU(inplace) (the recorded conv output is overwritten: the JVP must recompute it) and one
    conv applied twice (two recorded outputs for one module, replayed in call order)."""

    def __init__(self, in_channels=1, width=4, num_classes=3):
        super().__init__()
        self.stem = nn.Conv2d(in_channels, width, 3, padding=1)
        self.shared = nn.Conv2d(width, width, 3, padding=1)
        self.bn = nn.BatchNorm2d(width)
        self.feature_dim = width
        self.classifier = nn.Linear(width, num_classes)

    def body(self, x):
        h = torch.relu_(self.stem(x))
        h = torch.tanh(self.bn(self.shared(h)))
        h = torch.tanh(self.shared(h)) + h
        return h.mean(dim=(2, 3))


class BatchStatsCNN(Contract):
    """Two train-mode BatchNorms for the recorded-statistics path of the JVP: ``bn_in`` normalises the input
    batch itself (the JVP pass sees that very tensor: the real forward's statistics apply) and ``bn``
    normalises a conv output that ReLU overwrote in place (the conv is recomputed, so are the statistics)."""

    def __init__(self, in_channels=1, width=4, num_classes=3):
        super().__init__()
        self.bn_in = nn.BatchNorm2d(in_channels)
        self.stem = nn.Conv2d(in_channels, width, 3, padding=1)
        self.bn = nn.BatchNorm2d(width)
        self.feature_dim = width
        self.classifier = nn.Linear(width, num_classes)

    def body(self, x):
        h = torch.relu_(self.stem(self.bn_in(x)))
        return torch.tanh(self.bn(h)).mean(dim=(2, 3))


NETS = {
    "mlp": TinyMLP,
    "mlp_bn": lambda: TinyMLP(batchnorm=True),
    "mlp_dropout": lambda: TinyMLP(hidden=16, batchnorm=True, dropout=0.5),
    "cnn_bn": TinyBNCNN,
    "resnet": TinyResNet,
    "inplace_shared": InplaceSharedCNN,
    "batch_stats": BatchStatsCNN,
}


def batches(kind: str, n: int = 12, num_classes: int = 3, dtype=torch.float64, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    shape = (n, 6) if kind.startswith("mlp") else (n, 1, 6, 6)
    x = torch.randn(shape, generator=g, dtype=dtype)
    y = torch.randint(0, num_classes, (n,), generator=g)
    xm = torch.randn(shape, generator=g, dtype=dtype)
    ym = torch.randint(0, num_classes, (n,), generator=g)
    return x, y, xm, ym


def sgd_state(kind, dtype=torch.float64, warm=False, seed=0, **sgd):
    """A model + SGD optimizer (after one CE warm-up step when ``warm``, so momentum buffers exist)."""
    torch.manual_seed(seed)
    model = NETS[kind]().to(dtype)
    opt = torch.optim.SGD(model.parameters(), **sgd)
    if warm:
        x, y, _, _ = batches(kind, dtype=dtype, seed=99)
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return model, opt


def clone_state(model, opt):
    """Independent copies of a model and its SGD optimizer (same hyper-parameters and momentum state)."""
    m2 = copy.deepcopy(model)
    o2 = torch.optim.SGD(m2.parameters(), **{k: v for k, v in opt.defaults.items() if k in
                                              ("lr", "momentum", "dampening", "weight_decay", "nesterov")})
    o2.load_state_dict(copy.deepcopy(opt.state_dict()))
    return m2, o2


def make_meta(model, dtype, inner="focal", seed=5, gamma_output="abs"):
    """(gamma_net, loss) kwargs for MetaLearner: γ-Net + focal, or the learnable-L2 loss (random coeffs)."""
    torch.manual_seed(seed)
    if inner == "focal":
        return {"gamma_net": GammaNet(model.feature_dim, 3, output=gamma_output).to(dtype)}
    loss = build_loss("ce_learnable_l2", weight_shape=tuple(model.classifier.weight.shape)).to(dtype)
    with torch.no_grad():  # non-zero coefficients so the penalty matters in the real step
        for p in loss.meta_parameters():
            p.uniform_(0.0, 0.5)
    return {"loss": loss}


def run_backend(backend, model, opt, meta_kwargs, data, objective, **options):
    """Run one meta step on copies; return (meta grads, model, opt, step output, meta kwargs copy)."""
    m, o = clone_state(model, opt)
    kw = {k: copy.deepcopy(v) for k, v in meta_kwargs.items()}
    step = MetaLearner(m, o, objective, backend=backend, **kw, **options)
    torch.manual_seed(123)  # same random stream (dropout masks) for every backend
    out = run_step(step, data)
    grads = torch.cat([p.grad.reshape(-1) for p in step.meta_parameters])
    return grads, m, o, out, kw


def run_step(learner, data):
    """One iteration of ``learner`` on ``data`` = (x, y, x_meta, y_meta)."""
    x, y, xm, ym = data
    return learner.step(x, y, (xm, ym))


def rel_diff(a, b):
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def objective_at_updated(model, opt, gamma_net, data, objective, loss_module=None):
    """J(θ'(φ)) by a plain real step from (copies of) the given state — the finite-difference oracle."""
    x, y, xm, ym = data
    m, o = clone_state(model, opt)
    m.train()
    o.zero_grad()
    logits, feats = m(x, return_features=True)
    if loss_module is None:
        gamma = gamma_net(feats)
        loss = build_loss("focal", reduction="none")(logits, y, gamma=gamma).mean()
    else:
        loss = loss_module(logits, y, head_weight=m.classifier.weight, head_bias=m.classifier.bias).mean()
    loss.backward()
    o.step()
    buffers = {n: b.clone() for n, b in m.named_buffers()}
    with torch.no_grad():
        return objective(functional_call(m, buffers, (xm,)), ym)
