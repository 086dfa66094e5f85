"""What a checkpoint holds besides accelerate's own state: the loop counters and model-selection bookkeeping
(:class:`TrainState`, registered for checkpointing) and this process's running sums of the current epoch
(:class:`EpochProgress`, saved mid-epoch as ``progress_rank<r>.pt``), so that a resumed run reports the
same numbers as an uninterrupted one (metacal/train/checkpoint.py)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import torch


@dataclass
class TrainState:
    """Loop counters and model-selection bookkeeping (checkpointed)."""

    epoch: int = 0  # number of finished epochs = index of the epoch to run next
    global_step: int = 0
    step_in_epoch: int = 0  # steps already done in epoch ``epoch`` (0 at an epoch boundary)
    best_score: float = float("inf")
    best_epoch: int = -1
    best_metrics: dict[str, Any] = field(default_factory=dict)  # {"val": {...}, "test": {...}}
    history: list[dict[str, Any]] = field(default_factory=list)

    def state_dict(self) -> dict[str, Any]:
        return asdict(self)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            setattr(self, key, value)


#: A running value: a Python number (restored from a checkpoint) or a device tensor (added this session).
Value = float | torch.Tensor


@dataclass
class EpochProgress:
    """This process's running sums of the current epoch (saved mid-epoch as progress_rank<r>.pt).

    The sums stay on the device while the epoch runs (``loss_sum``/``meta_sum`` in float64, exactly the Python
    float sums they replace; γ and the meta-step diagnostics as lists of device tensors), so an iteration reads
    nothing back to the host; :meth:`to_dict` and :meth:`host_values` read them at a checkpoint or the epoch's
    end. A resumed epoch continues from the saved numbers."""

    loss_sum: Value = 0.0
    meta_sum: Value = 0.0
    count: int = 0
    meta_count: int = 0
    gammas: list[torch.Tensor] = field(default_factory=list)
    elapsed: float = 0.0  # seconds spent in this epoch before a resume
    # the learner's per-step diagnostics by name (metacal.meta.StepResult.diagnostics), one value per step that had it
    diagnostics: dict[str, list[Value]] = field(default_factory=dict)

    def gamma_values(self) -> torch.Tensor | None:
        """The γ of every sample so far, on the device of the newest (None before any)."""
        if not self.gammas:
            return None
        device = self.gammas[-1].device
        return torch.cat([g.to(device) for g in self.gammas])

    def to_dict(self, elapsed: float) -> dict[str, Any]:
        gammas = self.gamma_values()
        return {"loss_sum": float(self.loss_sum), "meta_sum": float(self.meta_sum), "count": self.count,
                "meta_count": self.meta_count, "gammas": torch.empty(0) if gammas is None else gammas.cpu(),
                "elapsed": elapsed, "diagnostics": {k: host_list(v) for k, v in self.diagnostics.items()}}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "EpochProgress":
        gammas = [d["gammas"]] if d["gammas"].numel() else []
        diagnostics = {k: list(v) for k, v in d.get("diagnostics", {}).items()}
        for old, name in LEGACY_DIAGNOSTICS:  # a checkpoint taken before the learner named its diagnostics
            if d.get(old):
                diagnostics[name] = list(d[old])
        return cls(float(d["loss_sum"]), float(d["meta_sum"]), int(d["count"]), int(d["meta_count"]), gammas,
                   float(d["elapsed"]), diagnostics)


#: the γ-Net meta step's diagnostics as mid-epoch checkpoints stored them before they were named by the learner
LEGACY_DIAGNOSTICS = (("offset_grads", "dJ_dgamma_offset"), ("meta_grad_norms", "meta_grad_norm"),
                      ("level_grads", "dJ_dlevel"))


def host_list(values: list[Value]) -> list[float]:
    """Python floats of a list of restored numbers followed by device scalars (one read for all tensors)."""
    numbers = [v for v in values if not isinstance(v, torch.Tensor)]
    tensors = [v for v in values if isinstance(v, torch.Tensor)]
    return numbers + (torch.stack(tensors).tolist() if tensors else [])


def host_values(values: list[Value]) -> torch.Tensor:
    """``torch.tensor`` of :func:`host_list`'s numbers (on the CPU, in the default dtype)."""
    return torch.tensor(host_list(values))
