"""The ``OBJECTIVES`` registry: ``build(name, **params)`` → a callable ``objective(logits, targets)``.

An objective is a plain function ``f(logits, targets, **params) -> scalar``; ``build`` binds its parameters
with :func:`functools.partial` after checking their names against the signature and their values by one
evaluation on a tiny well-formed batch, so a bad config fails at construction with a clear ValueError.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

import torch

from metacal.registry import Registry

from .avuc import avuc, savuc
from .dece import dece
from .mdca import mdca
from .mmce import mmce
from .sbece import sbece, sbece_label
from .sece import sece

Objective = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
OBJECTIVES: Registry[torch.Tensor] = Registry("objective", listing="metacal.objectives", supplied=("logits", "targets"))
for _name, _fn in (("sece", sece), ("dece", dece), ("sbece", sbece), ("sbece_label", sbece_label),
                   ("avuc", avuc), ("savuc", savuc), ("mmce", mmce), ("mdca", mdca)):
    OBJECTIVES.register(_name)(_fn)


def build(name: str, **params: Any) -> functools.partial:
    """The registered objective ``name`` with ``params`` bound (``.keywords`` holds every parameter,
    defaults included); an unknown name raises UnknownNameError listing the valid ones."""
    OBJECTIVES.check_options(name, list(params))
    fn = OBJECTIVES.get(name)
    options = OBJECTIVES.options(name)
    defaults = {key: p.default for key, p in inspect.signature(fn).parameters.items() if key in options}
    objective = functools.partial(fn, **{**defaults, **params})
    logits = torch.tensor([[2.0, 0.0, -1.0], [0.0, 1.0, 0.5]], dtype=torch.float64)
    objective(logits, torch.tensor([0, 2]))  # bad parameter values fail here, not mid-training
    return objective
