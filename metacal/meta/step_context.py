"""Shared machinery of the hypergradient backends: what a backend sees (:class:`StepContext`), what it
returns (:class:`StepResult`), the real SGD step and the final contraction that turns a tangent of the
network into meta-parameter gradients.

Exact one-step hypergradient (docs/conventions.md#meta-step). With θ' = SGD-step(θ, g(θ, φ)) and the meta
objective J(θ') on the meta-val batch, v = ∇θ' J (detached) and t_p = −η_p·c_p·s·v_p per parameter
(see :mod:`metacal.meta.sgd_lookahead`)::

    dJ/dφ = Σ_p v_pᵀ ∂θ'_p/∂φ = ∂/∂φ [ tᵀ g(θ, φ) ]
    tᵀ g  = Σ_i (∂L/∂z_i)(z_i, φ) · (J t)_i  +  Σ_head (∂L/∂θ_head)|_z · t_head

where L = mean inner loss, z_i the train logits at the OLD θ, J t the network's Jacobian–vector product
along t at the old θ (train-mode batch statistics, as in the real forward) and the second term is the
part of L that depends on the head's parameters directly (the learnable-L2 penalty). Only these two
small terms are differentiated w.r.t. φ (second order through the loss head only).
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Protocol, runtime_checkable

import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from .replay import PrimalRecorder
from .sgd_lookahead import lookahead_scales
from .slots import TensorSlots


def differentiable_attention():
    """Context in which ``scaled_dot_product_attention`` uses its math kernel (matmul, softmax). torch's fused
    CPU/GPU attention kernels have neither a forward-mode rule (the ``jvp`` JVP pass) nor a second derivative
    (``higher``'s differentiable step, the trajectory's double backward); the math kernel computes the same
    attention and has both, so transformers (torchvision's ViT) work with every backend. (With attention
    dropout > 0 the math kernel draws other masks than a fused real forward would.)"""
    return sdpa_kernel([SDPBackend.MATH])


@dataclass
class StepResult:
    """What one iteration reports (tensors detached)."""

    loss: torch.Tensor  # mean inner loss of the train batch (0-dim)
    meta_objective: torch.Tensor | None = None  # J(θ') on the meta-val batch; None on a plain iteration
    gamma: torch.Tensor | None = None  # per-sample γ of the train batch (N,); None without a γ-Net
    # diagnostics of a meta step (None otherwise): dJ/dγ_i of the one-step hypergradient (N,) — its sum is
    # dJ/dδ for a global offset γ_i + δ, negative when the meta step asks for a larger γ — and ‖dJ/dφ‖
    gamma_grad: torch.Tensor | None = None
    meta_grad_norm: torch.Tensor | None = None
    # with meta horizon "trajectory": dJ/db of the γ-Net's bias b through every past step, per unit of the
    # batch's mean γ (dJ/db ÷ mean ∂γ_i/∂b; negative: asks for a larger γ)
    level_grad: torch.Tensor | None = None
    # an update of the automatic scalar (metacal.meta.auto): its new value, the gap ĝ, its SE s, the band k·s,
    # the step σ and the decision (+1 raise, −1 lower, 0 hold); None on every other iteration
    control: dict[str, float] | None = None
    # the learner's own named 0-dim diagnostics of this iteration, in the order it logs them: the trainer writes
    # them per step (TensorBoard) and hands each one's values of the epoch back to the learner's epoch_metrics
    diagnostics: dict[str, torch.Tensor] = field(default_factory=dict)


@runtime_checkable
class Stepper(Protocol):
    """What the training loop drives, whatever the learner (:class:`metacal.meta.PlainStep`,
    :class:`metacal.meta.MetaLearner`, :class:`metacal.meta.auto.AutoScalar`): the loop, setup and outputs use
    these and nothing else of it."""

    def step(self, inputs: torch.Tensor, targets: torch.Tensor) -> StepResult:
        """One training iteration on a batch."""

    def epoch_metrics(self, diagnostics: Mapping[str, torch.Tensor] | None = None) -> dict[str, float]:
        """The learner's own numbers for the epoch's history line ({} for none), from ``diagnostics``: every value
        of each of its :attr:`StepResult.diagnostics` this epoch on this process (a 1-d CPU tensor per name)."""

    def checkpointables(self) -> list[Any]:
        """Objects with state_dict/load_state_dict that a checkpoint must hold besides network and optimiser."""

    def per_sample_gamma(self) -> nn.Module | None:
        """The module that gives each sample its γ from its features (the γ-Net), which predictions record and the
        run returns; None where γ is not per sample."""

    def set_read_check(self, check: Callable[[], None]) -> None:
        """``check`` is called before the learner reads values to the host mid-epoch (the trainer checks there that
        the steps so far stayed finite)."""

    def summary(self, history: list[dict[str, Any]], selected_epoch: int) -> dict[str, Any]:
        """The learner's own sections of metrics.json, from the run's history and its selected epoch ({} for none;
        the automatic scalar's ``"auto"``)."""


@dataclass
class StepContext:
    """Everything a backend needs for one iteration (built once by :class:`metacal.meta.MetaLearner`)."""

    model: nn.Module  # unwrapped module: lookahead / JVP / meta-val forward
    forward_model: nn.Module  # possibly DDP-wrapped: the real train forward
    optimizer: Any  # what the trainer steps (torch.optim.SGD or a wrapper such as AcceleratedOptimizer)
    sgd: torch.optim.SGD  # the torch SGD inside ``optimizer`` (hyper-parameters, momentum state)
    inner: Any  # GammaFocalInner | LearnableL2Inner
    objective: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # meta objective J on logits
    backward: Callable[[torch.Tensor], None]
    max_grad_norm: float | None = None
    average: Callable[[list[torch.Tensor]], None] = lambda tensors: None  # mean over processes, in place
    autocast: Callable[[], Any] = nullcontext  # mixed precision for forwards that bypass model.forward (higher)
    head_names: tuple[str, str | None] = field(init=False)
    slots: TensorSlots = field(init=False)
    recorder: PrimalRecorder = field(init=False)

    def __post_init__(self) -> None:
        self.head_names = head_names(self.model)
        self.slots = TensorSlots(self.model)
        self.recorder = PrimalRecorder(self.model)


@dataclass
class RealStep:
    """What the real step leaves behind for the hypergradient (all detached except ``meta``)."""

    loss: torch.Tensor
    logits: torch.Tensor  # train logits at the old θ
    features: torch.Tensor  # train features (head input) at the old θ
    meta: Any  # γ(φ) with its graph to φ (None for learnable L2)
    old_params: dict[str, torch.Tensor]  # θ before the step (only when requested)
    scales: dict[str, float]  # η·c·s per parameter name (0 for parameters SGD did not move)
    rng: "RNGState | None" = None  # RNG state before the real forward (to replay dropout masks)


class RNGState:
    """The CPU (and, for CUDA inputs, that device's) RNG state; :meth:`replay` re-runs a block with the
    same random draws (dropout masks) as the captured forward, leaving the global RNG stream untouched."""

    def __init__(self, device: torch.device) -> None:
        self.cpu = torch.get_rng_state()
        self.device = device if device.type == "cuda" else None
        self.cuda = torch.cuda.get_rng_state(device) if self.device is not None else None

    @contextmanager
    def replay(self) -> Iterator[None]:
        devices = [self.device] if self.device is not None else []
        with torch.random.fork_rng(devices=devices):
            torch.set_rng_state(self.cpu)
            if self.device is not None:
                torch.cuda.set_rng_state(self.cuda, self.device)
            yield


def head_names(model: nn.Module) -> tuple[str, str | None]:
    """Names of the classifier head's weight and bias among ``model.named_parameters()``."""
    head = getattr(model, "classifier", None)
    if not isinstance(head, nn.Linear):
        raise ValueError("the meta step needs model.classifier to be the nn.Linear head (models contract)")
    ids = {id(p): n for n, p in model.named_parameters()}
    bias = ids.get(id(head.bias)) if head.bias is not None else None
    return ids[id(head.weight)], bias


def head_params(ctx: StepContext, params: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor | None]:
    w, b = ctx.head_names
    return params[w], (params[b] if b is not None else None)


@contextmanager
def frozen_meta_parameters(inner) -> Iterator[None]:
    """Temporarily ``requires_grad=False`` on φ, so a loss that contains φ directly backpropagates into θ only."""
    params = [p for p in inner.meta_parameters() if p.requires_grad]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p in params:
            p.requires_grad_(True)


def copies(named: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Detached copies of the tensors, made by one multi-tensor copy (one kernel launch per group on a GPU
    rather than one per tensor); the values are bit for bit those of ``t.clone()``."""
    sources = [t.detach() for t in named.values()]
    targets = [torch.empty_like(t) for t in sources]
    torch._foreach_copy_(targets, sources)
    return dict(zip(named, targets))


def real_step(
    ctx: StepContext, inputs, targets, keep_old: bool, with_meta_graph: bool = True, recorder=None
) -> RealStep:
    """The real iteration's backbone update: forward (updates BN running stats once), inner loss at the
    current γ (detached: the inner backward never reaches φ), ``backward``, optional clipping, SGD step."""
    model, optimizer = ctx.model, ctx.optimizer
    optimizer.zero_grad(set_to_none=True)
    rng = RNGState(inputs.device) if keep_old else None
    with recorder.recording() if recorder is not None else nullcontext():
        logits, features = ctx.forward_model(inputs, return_features=True)
    with torch.set_grad_enabled(with_meta_graph and torch.is_grad_enabled()):
        meta = ctx.inner.meta_inputs(features)
    frozen = meta.detach() if torch.is_tensor(meta) else meta
    w, b = ctx.model.classifier.weight, ctx.model.classifier.bias
    with frozen_meta_parameters(ctx.inner):  # the real backward must not touch φ (learnable-L2 coeffs)
        loss = ctx.inner.total(logits, targets, w, b, frozen)
        ctx.backward(loss)
    named = dict(model.named_parameters())
    s = 1.0
    if ctx.max_grad_norm is not None:
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), ctx.max_grad_norm)
        s = float(torch.clamp(ctx.max_grad_norm / (norm + 1e-6), max=1.0))
    by_param = lookahead_scales(ctx.sgd)
    scales = {n: by_param.get(p, 0.0) * s for n, p in named.items()}
    old = copies(named) if keep_old else {}
    optimizer.step()
    return RealStep(loss.detach(), logits.detach(), features.detach(), meta, old, scales, rng)


def meta_val_forward(ctx: StepContext, inputs, return_features: bool = False):
    """Train-mode forward of the unwrapped model at its current (real, updated) θ on the meta-val batch,
    with scratch BN buffers (batch statistics; the real running statistics are not touched)."""
    with ctx.slots.swapped(ctx.slots.scratch_buffers()):
        return ctx.model(inputs, return_features=True) if return_features else ctx.model(inputs)


def contract_hypergradient(
    ctx: StepContext,
    real: RealStep,
    targets: torch.Tensor,
    logit_tangent: torch.Tensor | None,
    head_tangent: tuple[torch.Tensor, torch.Tensor | None],
    head_at_old: tuple[torch.Tensor, torch.Tensor | None],
) -> torch.Tensor | None:
    """∂/∂φ [Σ_i (∂L/∂z_i)·(J t)_i + (∂L/∂θ_head)·t_head], accumulated into the meta-parameters' .grad;
    returns dJ/dγ_i, the same contraction differentiated w.r.t. the per-sample γ (None without a γ-Net).

    Only φ receives gradients; z, θ_head are fresh detached leaves, so nothing reaches the backbone."""
    inner = ctx.inner
    meta_params = [p for p in inner.meta_parameters() if p.requires_grad]
    z = real.logits.detach().requires_grad_(True)
    leaves: list[torch.Tensor] = [z]
    w_old, b_old = head_at_old
    w = b = None
    if inner.uses_head_params:
        w = w_old.detach().requires_grad_(True)
        leaves.append(w)
        if b_old is not None:
            b = b_old.detach().requires_grad_(True)
            leaves.append(b)
    with torch.enable_grad():
        loss = inner.total(z, targets, w, b, real.meta)
        grads = torch.autograd.grad(loss, leaves, create_graph=True, allow_unused=True)
        terms = []
        if logit_tangent is not None and inner.logits_depend_on_meta:
            terms.append((grads[0] * logit_tangent.to(grads[0].dtype)).sum())
        if inner.uses_head_params:
            tw, tb = head_tangent
            if grads[1] is not None:
                terms.append((grads[1] * tw).sum())
            if b is not None and grads[2] is not None and tb is not None:
                terms.append((grads[2] * tb).sum())
        terms = [t for t in terms if t.requires_grad]
        if not terms:
            return None
        with_gamma = torch.is_tensor(real.meta) and real.meta.requires_grad
        hyper = torch.autograd.grad(sum(terms), meta_params + ([real.meta] if with_gamma else []),
                                    allow_unused=True)
    accumulate_grads(meta_params, hyper[:len(meta_params)])
    return hyper[-1].detach() if with_gamma else None


def accumulate_grads(params: list[torch.Tensor], grads) -> None:
    """``p.grad += g`` (or ``= g``) for every gradient that is not None."""
    for p, g in zip(params, grads):
        if g is not None:
            p.grad = g.detach() if p.grad is None else p.grad + g.detach()
