"""What the one-step lookahead differentiates: torch.optim.SGD's update as a function of φ.

torch.optim.SGD (momentum μ, dampening τ, nesterov, weight decay wd, learning rate η) does, per parameter::

    d   = g + wd·θ                                  g = ∇θ L(θ, φ)
    buf = d                        (first step: no momentum buffer yet)
    buf = μ·buf_old + (1 − τ)·d    (later steps)
    d   = d + μ·buf  (nesterov)    or   d = buf  (μ ≠ 0, not nesterov)   or d unchanged (μ = 0)
    θ'  = θ − η·d

θ, buf_old and wd·θ do not depend on φ, so θ' depends on φ only through g and ∂θ'/∂φ = −η·c·∂g/∂φ with

    μ = 0                          c = 1
    μ ≠ 0, first step (buf = d)    c = 1            (nesterov: c = 1 + μ, since d + μ·d)
    μ ≠ 0, later steps             c = 1 − τ        (nesterov: c = 1 + μ(1 − τ); torch requires τ = 0 → 1 + μ)

With gradient clipping by total norm (clip factor s = min(1, max_norm/(‖g‖ + 1e-6)), as
``torch.nn.utils.clip_grad_norm_``) the real step uses s·g; the hypergradient treats s as a constant
(its dependence on φ through ‖g‖ is not differentiated — documented approximation, exact without clipping).
A parameter without a gradient is not moved by SGD: its scale is 0.
"""

from __future__ import annotations

import torch
from torch import nn


def unwrap_sgd(optimizer) -> torch.optim.SGD:
    """The torch.optim.SGD inside an optimizer wrapper (accelerate's AcceleratedOptimizer keeps it in
    ``.optimizer``), checked: the lookahead replicates SGD exactly; anything else is refused clearly."""
    inner = optimizer
    while not isinstance(inner, torch.optim.SGD) and hasattr(inner, "optimizer"):
        inner = inner.optimizer
    check_sgd(inner)
    return inner


def check_sgd(optimizer: torch.optim.Optimizer) -> None:
    """The lookahead replicates torch.optim.SGD exactly; anything else is refused with a clear message."""
    if not isinstance(optimizer, torch.optim.SGD):
        raise ValueError(
            f"the meta step differentiates torch.optim.SGD's update; got {type(optimizer).__name__} "
            "(use torch.optim.SGD for the backbone)"
        )
    for group in optimizer.param_groups:
        if group.get("maximize", False):
            raise ValueError("the meta step does not support SGD(maximize=True)")


def step_coefficient(group: dict, state: dict) -> float:
    """c of ∂θ'/∂φ = −η·c·∂g/∂φ for one parameter, from its group's settings and its state BEFORE the step."""
    momentum = float(group["momentum"])
    if momentum == 0:
        return 1.0
    dampening = float(group["dampening"])
    has_buffer = state.get("momentum_buffer") is not None
    if group["nesterov"]:
        return 1.0 + momentum * ((1.0 - dampening) if has_buffer else 1.0)
    return (1.0 - dampening) if has_buffer else 1.0


def lookahead_scales(optimizer: torch.optim.SGD) -> dict[nn.Parameter, float]:
    """η·c per parameter (call BEFORE ``optimizer.step()``); parameters without ``.grad`` get 0."""
    scales: dict[nn.Parameter, float] = {}
    for group in optimizer.param_groups:
        lr = float(group["lr"])
        for p in group["params"]:
            if p.grad is None:
                scales[p] = 0.0
            else:
                scales[p] = lr * step_coefficient(group, optimizer.state.get(p, {}))
    return scales


def clip_factor(grads: list[torch.Tensor | None], max_norm: float | None) -> float:
    """s = min(1, max_norm/(‖g‖₂ + 1e-6)) over all given gradients (1 when ``max_norm`` is None)."""
    if max_norm is None:
        return 1.0
    present = [g.detach() for g in grads if g is not None]
    if not present:
        return 1.0
    total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in present]))
    return float(torch.clamp(max_norm / (total + 1e-6), max=1.0))
