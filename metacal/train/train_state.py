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


@dataclass
class EpochProgress:
    """This process's running sums of the current epoch (saved mid-epoch as progress_rank<r>.pt)."""

    loss_sum: float = 0.0
    meta_sum: float = 0.0
    count: int = 0
    meta_count: int = 0
    gammas: list[torch.Tensor] = field(default_factory=list)
    elapsed: float = 0.0  # seconds spent in this epoch before a resume
    # meta-step diagnostics, one value per meta step: dJ/dδ (global γ offset) and ‖dJ/dφ‖
    offset_grads: list[float] = field(default_factory=list)
    meta_grad_norms: list[float] = field(default_factory=list)
    level_grads: list[float] = field(default_factory=list)  # dJ/db through the trajectory (meta.horizon)

    def to_dict(self, elapsed: float) -> dict[str, Any]:
        gammas = torch.cat(self.gammas) if self.gammas else torch.empty(0)
        return {"loss_sum": self.loss_sum, "meta_sum": self.meta_sum, "count": self.count,
                "meta_count": self.meta_count, "gammas": gammas, "elapsed": elapsed,
                "offset_grads": list(self.offset_grads), "meta_grad_norms": list(self.meta_grad_norms),
                "level_grads": list(self.level_grads)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "EpochProgress":
        gammas = [d["gammas"]] if d["gammas"].numel() else []
        return cls(float(d["loss_sum"]), float(d["meta_sum"]), int(d["count"]), int(d["meta_count"]), gammas,
                   float(d["elapsed"]), list(d.get("offset_grads", [])), list(d.get("meta_grad_norms", [])),
                   list(d.get("level_grads", [])))
