"""The backbone optimiser (``optim.*``): which parameters it trains, in which groups, with SGD or AdamW.

* Freezing (``model.freeze``): every parameter whose name starts with one of the prefixes (``p`` matches
  ``p`` and ``p.…``, names as in ``model.named_parameters()``) gets ``requires_grad=False`` and is left out
  of the optimiser, so neither a plain step, weight decay nor the meta step's SGD update moves it.
  BatchNorm running statistics are buffers, not parameters: in train mode they still follow the data.
* Groups (``optim.backbone_lr_scale`` = s): with s = 1 one group of every trainable parameter (the
  optimiser of every earlier run, unchanged); otherwise the head (``model.classifier``) at lr, everything
  else at lr·s — the head group first, so ``param_groups[0]["lr"]`` (the logged lr) is the configured lr.
  A schedule multiplies each group's lr by the same factor.
* ``sgd``: torch.optim.SGD(lr, momentum, weight_decay, nesterov) — Wang & Golebiowski 2024, §4.
  ``adamw``: torch.optim.AdamW(lr, betas, eps, weight_decay) with decoupled weight decay
  (Loshchilov & Hutter 2019): θ ← θ − lr·wd·θ, then the Adam step lr·m̂/(√v̂ + ε). Plain runs only: the meta
  step's one-step lookahead replicates SGD's update (config.check_fine_tuning refuses the combination).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from metacal.models.features import top_level_names
from metacal.models.weights import matches


def freeze(model: nn.Module, prefixes: Sequence[str]) -> list[str]:
    """``requires_grad_(False)`` on every parameter under one of ``prefixes``; returns their names. A prefix
    matching nothing, or freezing every parameter, is a one-line ValueError."""
    named = list(model.named_parameters())
    for p in prefixes:
        if not any(matches(n, p) for n, _ in named):
            raise ValueError(f"model.freeze {p!r} matches no parameter (prefixes of model.named_parameters() names; "
                             f"top-level modules: {', '.join(top_level_names(model))})")
    frozen = [n for n, param in named if any(matches(n, p) for p in prefixes)]
    if prefixes and len(frozen) == len(named):
        raise ValueError(f"model.freeze {list(prefixes)} freezes every parameter: nothing is left to train")
    for n, param in named:
        if n in frozen:
            param.requires_grad_(False)
    return frozen


def parameter_groups(model: nn.Module, lr: float, backbone_lr_scale: float = 1.0) -> list[Any]:
    """The optimiser's parameters (module docstring): a flat list, or [head group, backbone group]."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    if backbone_lr_scale == 1.0:
        return trainable
    head_ids = {id(p) for p in model.classifier.parameters()}
    head = [p for p in trainable if id(p) in head_ids]
    body = [p for p in trainable if id(p) not in head_ids]
    groups = [{"params": head, "lr": lr}] if head else []
    if body:
        groups.append({"params": body, "lr": lr * backbone_lr_scale})
    return groups


#: ``optim.name``: the backbone's optimiser (only sgd with the meta learners: their meta step differentiates its update).
OPTIMIZERS = ("sgd", "adamw")


def build_optimizer(optim: Any, model: nn.Module) -> torch.optim.Optimizer:
    """SGD or AdamW over :func:`parameter_groups` from the ``optim`` config section."""
    params = parameter_groups(model, optim.lr, optim.backbone_lr_scale)
    if optim.name == "adamw":
        return torch.optim.AdamW(params, lr=optim.lr, betas=tuple(optim.betas), eps=optim.eps,
                                 weight_decay=optim.weight_decay)
    return torch.optim.SGD(params, lr=optim.lr, momentum=optim.momentum, weight_decay=optim.weight_decay,
                           nesterov=optim.nesterov)
