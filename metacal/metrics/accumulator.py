"""Streaming collection of per-example predictions for epoch-level calibration metrics."""

from __future__ import annotations

from typing import Any, Callable

import torch

from .inputs import PROB_SUM_ATOL, array_inputs, check_labels
from .summary import summary


def looks_like_probs(x: torch.Tensor, atol: float = PROB_SUM_ATOL) -> bool:
    """True if every entry is in [0, 1] and every row sums to 1 within ``atol``."""
    return bool(((x >= 0) & (x <= 1)).all()) and bool(((x.sum(dim=1) - 1).abs() <= atol).all())


class CalibrationAccumulator:
    """Collects probabilities and labels batch by batch; ``compute()`` returns ``metrics.summary(...)``.

    Args:
        num_bins: bins for the binned metrics of the summary.
        inputs: ``"logits"`` (softmax applied), ``"probs"``, or ``"auto"`` (probabilities if every row is in
            [0, 1] and sums to 1 within 1e-3, else logits; decided per batch).
        gather: optional callable applied to each batch's probs and labels before they are stored, e.g.
            ``accelerator.gather_for_metrics`` so every rank sees the whole evaluation set.
    Per-example confidence, correctness and probabilities are kept on the CPU (float32 probs).
    """

    def __init__(
        self, num_bins: int = 15, inputs: str = "auto", gather: Callable[[torch.Tensor], torch.Tensor] | None = None
    ) -> None:
        if inputs not in ("auto", "logits", "probs"):
            raise ValueError(f"inputs must be 'auto', 'logits' or 'probs', got {inputs!r}")
        self.num_bins = num_bins
        self.inputs = inputs
        self.gather = gather
        self.reset()

    def reset(self) -> None:
        self._probs: list[torch.Tensor] = []
        self._labels: list[torch.Tensor] = []

    @torch.no_grad()
    @array_inputs("logits_or_probs", "labels")
    def update(self, logits_or_probs: torch.Tensor, labels: torch.Tensor) -> None:
        x = logits_or_probs.detach()
        if x.dim() != 2 or not x.is_floating_point():
            raise ValueError(f"expected N×K floating logits or probs, got {tuple(x.shape)} {x.dtype}")
        check_labels(labels, x.shape[0], x.shape[1])
        is_probs = self.inputs == "probs" or (self.inputs == "auto" and looks_like_probs(x))
        probs = x.float() if is_probs else torch.softmax(x.float(), dim=1)
        labels = labels.detach()
        if self.gather is not None:
            probs, labels = self.gather(probs), self.gather(labels)
        self._probs.append(probs.float().cpu())
        self._labels.append(labels.long().cpu())

    @property
    def num_samples(self) -> int:
        return sum(p.shape[0] for p in self._probs)

    @property
    def probs(self) -> torch.Tensor:
        return torch.cat(self._probs) if self._probs else torch.empty(0, 0)

    @property
    def labels(self) -> torch.Tensor:
        return torch.cat(self._labels) if self._labels else torch.empty(0, dtype=torch.long)

    @property
    def confidence(self) -> torch.Tensor:
        return self.probs.max(dim=1).values

    @property
    def correct(self) -> torch.Tensor:
        return (self.probs.argmax(dim=1) == self.labels).float()

    def compute(self) -> dict[str, Any]:
        if not self._probs:
            raise ValueError("CalibrationAccumulator.compute() called before any update()")
        return summary(self.probs, self.labels, self.num_bins)
