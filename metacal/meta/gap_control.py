"""The automatic scalar's measure-and-move, on its own: usable from any training loop, not only metacal's trainer.

Once per update, one forward pass in eval mode over a fixed seeded sample of held-out data measures the signed
calibration gap ĝ = mean_i (max_c p_ic − 1[argmax_c p_ic = y_i]) and its standard error s; the loss's
confidence scalar (focal γ, label-smoothing ε: :attr:`metacal.losses.base.Loss.confidence_knob`) then moves by
the sign rule of :class:`metacal.meta.root_finder.SignRootFinder`, and is written into the loss. The trainer's
``learner: auto`` (:class:`metacal.meta.auto.AutoScalar`) calls :meth:`GapControl.update` at its update
points; in a loop of one's own, call it once per epoch (README, "Your own training loop"):

    loss_fn = metacal.losses.build("focal", gamma=1.0)
    auto = metacal.auto_gamma(loss_fn, held_out)  # owns loss_fn.gamma from now on
    for epoch in range(epochs):
        for x, y in train_loader:
            ...  # loss_fn(model(x), y).mean().backward(); optimizer.step()
        auto.update(model)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Callable

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, Subset

from metacal.distributed import average_over_processes

from .root_finder import SignRootFinder


#: The measured sample is kept in host memory after its first reading when its inputs take at most this many
#: bytes: reading and collating it sample by sample costs a small model several times its forward pass
#: (scripts/bench_auto.py reports the controller's time). Meta-val is read through the deterministic eval view.
KEEP_BYTES = 256 * 2**20


@torch.no_grad()
def gap_sums(model: nn.Module, batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
             device: torch.device) -> torch.Tensor:
    """[Σ d_i, Σ d_i², n] over ``batches`` with d_i = confidence − 1[correct], the model in eval mode."""
    was_training = model.training
    model.eval()
    sums = torch.zeros(3, dtype=torch.float64, device=device)
    try:
        for inputs, targets in batches:
            probs = model(inputs.to(device)).float().softmax(dim=-1)
            confidence, predicted = probs.max(dim=-1)
            d = (confidence - (predicted == targets.to(device)).float()).double()
            sums += torch.stack([d.sum(), (d * d).sum(), torch.tensor(float(d.numel()), dtype=torch.float64,
                                                                         device=device)])
    finally:
        model.train(was_training)
    return sums


def gap_estimate(sums: torch.Tensor) -> tuple[float, float]:
    """ĝ and its standard error s = √(var/n), var the unbiased sample variance, from :func:`gap_sums`."""
    total, squares, n = sums.tolist()  # one host read
    if n < 2:
        raise ValueError(f"the calibration gap needs at least 2 samples, got {int(n)}")
    mean = total / n
    variance = max(squares - n * mean * mean, 0.0) / (n - 1)
    return mean, (variance / n) ** 0.5


class GapControl:
    """Sets ``loss.<knob>`` to ``finder``'s value, and moves it by the gap measured on ``held_out``.

    Args:
        loss: the loss whose scalar is set (a float attribute named ``knob``).
        held_out: the measured dataset of ``(input, label)``; this process measures its share of ``sample``
            samples of it (a fixed subsample drawn once with ``seed``; None: all).
        finder: the root finder; its value is written into the loss now and after every update.
        batch_size: the per-process batch of the measuring forward pass.
        rank / world_size / average: this process's share, and the in-place mean over processes that gives
            every rank the same ĝ, s (a no-op in one process).
    """

    def __init__(self, loss: nn.Module, held_out: Dataset, finder: SignRootFinder, knob: str, *,
                 sample: int | None = None, batch_size: int = 512, seed: int = 0, rank: int = 0,
                 world_size: int = 1,
                 average: Callable[[list[torch.Tensor]], None] = average_over_processes) -> None:
        if not isinstance(getattr(loss, knob, None), float):
            raise ValueError(f"the loss has no scalar {knob!r} to set (one number, not per class)")
        n = len(held_out)
        if n < 2 or (sample is not None and sample < 2):
            raise ValueError(f"the gap needs at least 2 held-out samples; the measured splits have {n}, the sample "
                             f"is {sample}")
        self.loss, self.knob, self.finder, self.average = loss, knob, finder, average
        size = n if sample is None else min(sample, n)
        order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:size].sort().values
        shard = order[rank::world_size].tolist()
        self.loader = DataLoader(Subset(held_out, shard), batch_size=batch_size, shuffle=False)
        self.kept: list[tuple[torch.Tensor, torch.Tensor]] | None = None  # the sample's batches, once read
        self.last: dict[str, float] = {}
        self.apply()

    @property
    def value(self) -> float:
        """The scalar the loss holds now."""
        return float(self.finder.value)

    def apply(self) -> None:
        setattr(self.loss, self.knob, self.value)

    def sample_batches(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """This process's share of the measured sample, batch by batch: read through the loader until it has been
        read once and kept (when its inputs fit in :data:`KEEP_BYTES`), then from memory."""
        if self.kept is not None:
            yield from self.kept
            return
        kept: list[tuple[torch.Tensor, torch.Tensor]] | None = []
        for i, (inputs, targets) in enumerate(self.loader):
            if i == 0 and inputs.element_size() * inputs.nelement() * len(self.loader) > KEEP_BYTES:
                kept = None
            if kept is not None:
                kept.append((inputs, targets))
            yield inputs, targets
        self.kept = kept

    def measure(self, model: nn.Module) -> tuple[float, float]:
        """ĝ ± s of ``model`` on the measured sample, over every process."""
        device = next(model.parameters()).device
        sums = gap_sums(model, self.sample_batches(), device)
        self.average([sums])  # a mean of sums: the ratios ĝ and s are those of the global sums
        return gap_estimate(sums)

    def update(self, model: nn.Module) -> dict[str, float]:
        """Measure ``model``'s gap, move the scalar and write it into the loss. Returns ``<knob>_trained`` (the value
        the measured network trained with), ``<knob>`` (after the move), ``gap``, ``gap_se``, ``band`` (k·s),
        ``step``, ``decision`` (+1 raise, −1 lower, 0 hold), ``held`` and ``at_limit`` (the root finder's counts)
        and ``max`` (the upper end)."""
        trained = self.value
        gap, se = self.measure(model)
        sign = self.finder.update(gap, se)
        self.apply()
        state = self.finder.state
        self.last = {f"{self.knob}_trained": trained, self.knob: self.value, "gap": gap, "gap_se": se,
                     "band": self.finder.band * se, "step": state.step, "decision": float(sign),
                     "held": float(state.held), "at_limit": float(state.at_limit), "max": self.finder.hi}
        return dict(self.last)

    def state_dict(self) -> dict[str, Any]:
        return {"finder": self.finder.state_dict(), "last": dict(self.last)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.finder.load_state_dict(state["finder"])
        self.last = {k: float(v) for k, v in state.get("last", {}).items()}
        self.apply()
