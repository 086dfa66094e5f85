"""The meta learners' config section ``meta`` (:class:`MetaSettings`, where every default is written) and the names
its choice keys take: the hypergradient backends, the horizons and the meta optimisers.

The section is read by ``learner: gamma_net`` (FLγ-*, per-sample γ from a γ-Net) and ``learner: loss`` (the loss's
own ``meta_parameters()``, e.g. the ce_learnable_l2 coefficients of CE-SECE / CE-DECE): a hypergradient step of
them after every backbone step (metacal/meta/meta_learners.py builds both).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Dict, Optional

import torch
from torch import nn

from .hypergrad_head import head_meta_step
from .hypergrad_higher import higher_meta_step
from .hypergrad_jvp import jvp_meta_step
from .step_context import StepResult

SECTION = "meta"

#: The hypergradient backends by name: "higher" (exact, the reference, one process only), "jvp" (exact,
#: forward-mode; the default), "head" (lookahead through the classifier head only, Bohdal et al. 2023).
BACKENDS: dict[str, Callable[..., StepResult]] = {
    "higher": higher_meta_step,
    "jvp": jvp_meta_step,
    "head": head_meta_step,
}

#: What the γ-Net's bias b (the γ level) is differentiated through: "step" (the one-step lookahead, as
#: every other φ; Wang & Golebiowski 2024) or "trajectory" (forward-mode accumulation over the whole
#: training trajectory, :mod:`metacal.meta.trajectory`).
HORIZONS = ("step", "trajectory")

#: ``meta.optimizer``: the optimiser of the meta-parameters φ, by name.
META_OPTIMIZERS = {"adam": torch.optim.Adam, "sgd": torch.optim.SGD}


def _finite_not_negative(value: Any) -> bool:
    return math.isfinite(value) and value >= 0  # an infinite rate or weight makes the first meta step non-finite


@dataclass
class MetaSettings:
    """The config section ``meta`` (module docstring); each field's comment says what it holds."""

    backend: str = "jvp"  # hypergradient backend of metacal.meta: higher | jvp | head
    # what the γ-Net's bias (the γ level) is differentiated through: "step" (one-step lookahead, the paper)
    # or "trajectory" (all past steps, forward-mode; metacal/meta/trajectory.py)
    horizon: str = "step"
    horizon_decay: float = 1.0  # trajectory: a step k iterations back counts β^k (1: all; 0: the last only)
    # γ-Net only: the meta lr of its per-sample shape (attention A, weight W) is lr × shape_lr_scale; its
    # bias b (the γ level) uses lr. 0 freezes the shape: one learned γ for every sample.
    shape_lr_scale: float = 1.0
    objective: str = "sece"  # a metacal.objectives name (the meta-validation objective)
    objective_params: Dict[str, Any] = field(default_factory=dict)
    gamma_net: Dict[str, Any] = field(default_factory=dict)  # GammaNet options (tau, init_gamma, output …)
    ce_weight: float = 0.0  # meta objective J = objective + ce_weight·CE
    every: int = 1  # a meta step every n-th iteration (the others are plain steps at the current γ)
    max_meta_grad_norm: Optional[float] = None  # clip φ's gradient (total norm)
    max_backbone_grad_norm: Optional[float] = None  # clip the backbone's gradient in meta runs (total norm)
    optimizer: str = "adam"  # adam | sgd
    # 1e-4, not Bohdal et al.'s 1e-3: with τ = 0.01 an Adam step of 1e-3 on the γ-Net's bias moves γ by 0.1
    # per iteration and the one-step γ-Net runs away on the over-confident MNIST-1D regime (measured in
    # docs/ablations/meta_signal.md); every shipped config leaves it at this default except the trajectory
    # method, whose restoring signal takes 1e-3
    lr: float = 1e-4
    weight_decay: float = 0.0
    batch_size: int = 128  # global meta-validation batch, split across processes

    #: the allowed values of the section's choice keys, each list from its owner
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {
        "backend": tuple(BACKENDS), "horizon": HORIZONS, "optimizer": tuple(META_OPTIMIZERS)}
    #: (key, the test its value passes, what the value must do); horizon_decay is checked where the trajectory reads it
    RANGES: ClassVar[tuple[tuple[str, Callable[[Any], bool], str], ...]] = (
        ("batch_size", lambda v: v > 0, "be > 0"),
        ("lr", _finite_not_negative, "be a finite number >= 0"),
        ("weight_decay", _finite_not_negative, "be a finite number >= 0"),
        ("shape_lr_scale", _finite_not_negative, "be a finite number >= 0 (0 freezes the γ-Net's shape)"),
        ("ce_weight", _finite_not_negative, "be a finite number >= 0 (0: the calibration objective alone)"),
    )
    #: the global batch of the section, split across processes
    GLOBAL_BATCH: ClassVar[str] = "batch_size"

    def config_problem(self, cfg: Any) -> str | None:
        """The meta step differentiates SGD's update (metacal/meta/sgd_lookahead.py): another optimiser is refused."""
        if cfg.optim.name != "sgd":
            return (f"optim.name={cfg.optim.name} cannot be used with learner {cfg.learner}: its meta step "
                    "differentiates through torch.optim.SGD's update (metacal/meta/sgd_lookahead.py); "
                    "use optim.name=sgd")
        return None

    def graph_problem(self, model: nn.Module) -> str | None:
        """Why a meta step with these settings cannot be replayed from a CUDA graph (one line), or None."""
        if self.horizon != "step":
            return f"run.cuda_graphs does not replay meta.horizon {self.horizon}; use meta.horizon step"
        if self.max_backbone_grad_norm is not None:
            return ("run.cuda_graphs does not replay a meta step with meta.max_backbone_grad_norm (the clipping "
                    "factor is read to the host)")
        if any(isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0 for m in model.modules()):
            return ("run.cuda_graphs does not replay a meta step of a network with dropout (the JVP pass repeats "
                    "the real forward's masks by restoring the RNG state, which a graph bakes in)")
        return None
