"""nn.Module wrappers and the ``OBJECTIVES`` registry: ``build(name, **params)(logits, targets)``.

Each wrapper's constructor takes exactly the keyword parameters of its function (defaults included), checks
the names and the values once at construction (a clear ValueError), and calls the function in ``forward``.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

import torch
from torch import nn

from metacal.registry import Registry

from .avuc import avuc, savuc
from .dece import dece
from .mdca import mdca
from .mmce import mmce
from .sbece import sbece, sbece_label
from .sece import sece

OBJECTIVES: Registry[nn.Module] = Registry("objective")


class Objective(nn.Module):
    """Base wrapper: ``Objective(**params)(logits, targets) -> scalar tensor``; subclasses set ``function``."""

    function: Callable[..., torch.Tensor]
    name: str = ""

    def __init__(self, **params: Any) -> None:
        super().__init__()
        signature = inspect.signature(type(self).function)
        allowed = list(signature.parameters)[2:]  # everything after (logits, targets)
        unknown = sorted(set(params) - set(allowed))
        if unknown:
            raise ValueError(
                f"objective {self.name!r} got unknown parameter(s) {', '.join(unknown)}; "
                f"valid: {', '.join(allowed) or '(none)'}"
            )
        defaults = {key: p.default for key, p in signature.parameters.items() if key in allowed}
        self.params: dict[str, Any] = {**defaults, **params}
        self._validate()

    def _validate(self) -> None:
        """Evaluate once on a tiny well-formed batch so bad parameter values fail at construction."""
        logits = torch.tensor([[2.0, 0.0, -1.0], [0.0, 1.0, 0.5]], dtype=torch.float64)
        type(self).function(logits, torch.tensor([0, 2]), **self.params)

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return type(self).function(logits, targets, **self.params)

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.params.items())


def _register(name: str, fn: Callable[..., torch.Tensor], class_name: str) -> type[Objective]:
    cls = type(
        class_name,
        (Objective,),
        {
            "function": staticmethod(fn),
            "name": name,
            "__doc__": f"nn.Module form of :func:`{fn.__module__}.{fn.__name__}`.\n\n{fn.__doc__ or ''}",
            "__module__": __name__,
        },
    )
    OBJECTIVES.register(name)(cls)
    return cls


SECE = _register("sece", sece, "SECE")
DECE = _register("dece", dece, "DECE")
SBECE = _register("sbece", sbece, "SBECE")
SBECELabel = _register("sbece_label", sbece_label, "SBECELabel")
AvUC = _register("avuc", avuc, "AvUC")
SAvUC = _register("savuc", savuc, "SAvUC")
MMCE = _register("mmce", mmce, "MMCE")
MDCA = _register("mdca", mdca, "MDCA")
