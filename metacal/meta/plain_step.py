"""A training iteration without a learner: the loss's parameters stay as configured (``learner`` absent)."""

from __future__ import annotations

from typing import Any, Callable, Mapping

import torch
from torch import nn

from .learner import check_batch
from .step_context import StepResult


class PlainStep:
    """A training iteration without meta-learning: ``prepare_batch`` → forward → loss → backward → step."""

    def __init__(self, model: nn.Module, loss: nn.Module, optimizer: Any,
                 backward: Callable[[torch.Tensor], Any] | None = None, head: nn.Linear | None = None) -> None:
        if getattr(loss, "needs_head_params", False) and head is None:
            raise ValueError("this loss penalises the classifier head: pass head=model.classifier")
        self.model, self.loss, self.optimizer, self.head = model, loss, optimizer, head
        self.backward = backward if backward is not None else torch.Tensor.backward

    def step(self, inputs: torch.Tensor, targets: torch.Tensor) -> StepResult:
        check_batch(self.model, inputs, targets, "train")  # before mixup's generator or the model moves
        inputs, extra = self.loss.prepare_batch(inputs, targets)
        if getattr(self.loss, "needs_head_params", False):  # fixed learnable-L2 coefficients
            extra.update(head_weight=self.head.weight, head_bias=self.head.bias)
        loss = self.loss(self.model(inputs), targets, **extra).mean()
        self.optimizer.zero_grad(set_to_none=True)
        self.backward(loss)
        self.optimizer.step()
        return StepResult(loss.detach())

    def checkpointables(self) -> list[Any]:
        return []

    def epoch_metrics(self, diagnostics: Mapping[str, torch.Tensor] | None = None) -> dict[str, float]:
        return {}

    def per_sample_gamma(self) -> nn.Module | None:
        return None

    def set_read_check(self, check: Callable[[], None]) -> None:
        """Nothing is read mid-epoch."""

    def summary(self, history: list[dict[str, Any]], selected_epoch: int) -> dict[str, Any]:
        return {}
