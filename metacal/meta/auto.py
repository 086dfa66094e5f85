"""Automatic γ: one scalar of the inner loss set during training by root-finding on calibration.

Calibration is treated as a root to find, not a loss to minimise. The backbone trains with plain steps of
its loss (focal loss at one global γ; or another loss whose named scalar lowers confidence as it rises,
:attr:`metacal.losses.base.Loss.confidence_knob`). At ``updates_per_epoch`` fixed points of every epoch,
one forward pass in eval mode over the held-out splits of ``measure_on`` (default: meta-validation and
validation together; or a fixed seeded subsample of them) measures the signed calibration gap

    ĝ = mean_i (max_c p_ic − 1[argmax_c p_ic = y_i]),   s = std_i(·)/√n

(positive: over-confident), summed over processes so that every rank holds the same ĝ, s and γ. The scalar
then moves by the sign rule of :class:`metacal.meta.root_finder.SignRootFinder`: raise it when ĝ > k·s,
lower it when ĝ < −k·s, hold it inside the band, and move only once the same sign has been seen ``confirm``
times in a row (default 2: a one-epoch swing of the gap moves nothing); the step halves on a sign flip and
grows slowly on repeats.

No backward pass touches the held-out data, so a run costs a plain run plus those forward passes
(scripts/bench_auto.py measures both side by side). Why not the γ-Net's hypergradient: on a 128-sample meta
batch its one-step sign is a coin flip, and without that noise its greedy objective keeps raising γ
(docs/ablations/meta_signal.md, docs/ablations/meta_horizon.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields
from collections.abc import Iterable, Mapping
from typing import Any, Callable, List, Optional, Sequence

import torch
from torch import nn
from torch.utils.data import Dataset

from metacal.distributed import average_over_processes

from .step_context import StepResult
from .plain_step import PlainStep
from .gap_control import GapControl
from .root_finder import SignRootFinder


@dataclass
class AutoSettings:
    """The config section ``auto`` (``learner: auto``), and the options of :func:`auto_gamma`; every default is here.

    ``start``: the scalar's first value (None: the loss's own, e.g. ``loss.params.gamma``); ``first_step``: its
    first move; ``band``: k, the band ±k·s in standard errors inside which it holds; ``grow`` / ``shrink``: the
    step's factor on a repeated sign / on a sign flip; ``confirm``: agreeing signs in a row that move it;
    ``reconfirm``: after a move, wait for ``confirm`` new agreeing signs; ``probe``: how many first steps, and at
    least how many of the knob's units (focal γ 1, ε 0.05), a run of moves may push it without changing the gap
    before further pushes are withheld (None: never); ``max``: its upper end (None: the loss's own, 1 for
    label-smoothing ε, capped at 10 where the loss has none, focal γ);
    ``updates_per_epoch``; ``sample``: held-out samples per measurement (None: all); ``measure_on``: the held-out
    splits measured together, some of :data:`MEASURABLE`.
    """

    start: Optional[float] = None
    first_step: float = 1.0
    band: float = 1.0
    grow: float = 1.2
    shrink: float = 0.5
    confirm: int = 2
    reconfirm: bool = False
    probe: Optional[float] = 2.0
    max: Optional[float] = None
    updates_per_epoch: int = 1
    sample: Optional[int] = None
    measure_on: List[str] = field(default_factory=lambda: ["meta_val", "val"])


#: the splits ``auto.measure_on`` may name: the held-out splits, and each perturbed at mixed severities of
#: its dataset's shift suite's fit families (metacal.data.shift_suites.shifted_held_out; docs/conventions.md#shift)
MEASURABLE = ("meta_val", "val", "meta_val_shifted", "val_shifted")


def build_finder(settings: AutoSettings, loss: nn.Module,
                 loss_name: str) -> tuple[SignRootFinder, tuple[str, ...]]:
    """The root finder the ``auto`` section gives ``loss``'s confidence scalar, and ``measure_on`` as a tuple of
    split names; a bad setting is a one-line ValueError naming its config key."""
    knob = getattr(loss, "confidence_knob", None)
    if knob is None or not isinstance(getattr(loss, knob, None), float):
        raise ValueError("learner auto sets one scalar of the loss that lowers confidence (focal or dual_focal "
                         f"γ, label_smoothing ε); loss '{loss_name}' has none (or a per-class γ)")
    s = settings
    lo, hi = loss.knob_range
    top = float(s.max) if s.max is not None else min(hi, 10.0)
    start = float(s.start) if s.start is not None else float(getattr(loss, knob))
    checks = [
        (s.first_step > 0, f"auto.first_step (the first step of the automatic {knob}) must be > 0; got {s.first_step}"),
        (lo < top <= hi, f"auto.max must be in ({lo}, {hi}] for {knob}; got {top}"),
        (lo <= start <= top, f"auto.start (the start of {knob}, {start}) must be in [{lo}, auto.max = {top}]"),
        (s.sample is None or (isinstance(s.sample, int) and not isinstance(s.sample, bool)),
         f"auto.sample must be a whole number of held-out samples or null (all); got {s.sample!r}"),
        (measured_splits(s.measure_on) is not None,
         f"auto.measure_on must list some of {', '.join(MEASURABLE)}, each once; got {s.measure_on!r}"),
    ]
    for ok, message in checks:
        if not ok:
            raise ValueError(message)
    try:
        finder = SignRootFinder(start, float(s.first_step), lo, top, band=float(s.band), grow=float(s.grow),
                                shrink=float(s.shrink), confirm=s.confirm, reconfirm=s.reconfirm, probe=s.probe,
                                unit=float(getattr(loss, "knob_unit", 0.0)))
    except ValueError as err:
        raise ValueError(f"auto: {err}") from None
    return finder, measured_splits(s.measure_on)


def measured_splits(value: Any) -> tuple[str, ...] | None:
    """``auto.measure_on`` as a tuple of split names, or None when it is not some of :data:`MEASURABLE`,
    each once."""
    names = (value,) if isinstance(value, str) else tuple(value) if isinstance(value, Iterable) else ()
    ok = 0 < len(names) == len(set(names)) and all(isinstance(n, str) and n in MEASURABLE for n in names)
    return names if ok else None


def update_points(steps_per_epoch: int, updates_per_epoch: int) -> frozenset[int]:
    """The in-epoch iteration counts (1-based, the last = steps_per_epoch) after which γ is updated:
    round(j·S/u) for j = 1…u, so the last update falls on the epoch's last step."""
    if updates_per_epoch < 1 or updates_per_epoch > steps_per_epoch:
        raise ValueError(f"updates_per_epoch must be in [1, {steps_per_epoch}] (the steps per epoch), "
                         f"got {updates_per_epoch}")
    return frozenset(round(j * steps_per_epoch / updates_per_epoch) for j in range(1, updates_per_epoch + 1))


class AutoScalar:
    """Plain steps of ``loss`` with its scalar ``knob`` set by a :class:`GapControl` at :func:`update_points`.

    Args:
        model / loss / optimizer / backward / head: as :class:`metacal.meta.PlainStep` (``model`` unwrapped
            or DDP; the gap is measured through ``measure_model``, default ``model``).
        meta_val: the measured dataset: meta-validation, or the splits of ``auto.measure_on`` joined
            (this process measures its share of ``sample`` samples).
        finder: the root finder; its value is written into ``loss.<knob>`` now and after every update.
        knob: the name of the loss attribute, e.g. ``"gamma"``.
        steps_per_epoch / updates_per_epoch: γ is updated at :func:`update_points` of every epoch.
        sample / batch_size / seed / rank / world_size / average: as :class:`GapControl`.
        measured_on: the names of the splits ``meta_val`` joins, for metrics.json.
    """

    def __init__(self, model: nn.Module, loss: nn.Module, optimizer: Any, meta_val: Dataset,
                 finder: SignRootFinder, knob: str, *, steps_per_epoch: int, updates_per_epoch: int = 1,
                 sample: int | None = None, batch_size: int = 512, seed: int = 0, rank: int = 0,
                 world_size: int = 1, backward: Callable[[torch.Tensor], Any] | None = None,
                 head: nn.Linear | None = None, measure_model: nn.Module | None = None,
                 average: Callable[[list[torch.Tensor]], None] = average_over_processes,
                 measured_on: Sequence[str] = ()) -> None:
        self.measured_on = tuple(measured_on)  # the split names the measured dataset joins (metrics.json says them)
        self.control = GapControl(loss, meta_val, finder, knob, sample=sample, batch_size=batch_size, seed=seed,
                                  rank=rank, world_size=world_size, average=average)
        self.points = update_points(steps_per_epoch, updates_per_epoch)
        self.steps_per_epoch = steps_per_epoch
        self.plain = PlainStep(model, loss, optimizer, backward=backward, head=head)
        self.measure_model = measure_model if measure_model is not None else model
        self.iteration = 0
        #: called before each update's measurement, the one point of an iteration that reads values to the host
        self.before_read: Callable[[], None] | None = None
        self.measure_seconds = 0.0  # time in the updates since the last epoch_metrics() (the controller's cost)

    def step(self, inputs: torch.Tensor, targets: torch.Tensor) -> StepResult:
        value = self.control.value
        out = self.plain.step(inputs, targets)
        self.iteration += 1
        if self.control.knob == "gamma":
            out.gamma = torch.full((targets.shape[0],), value)
        if (self.iteration - 1) % self.steps_per_epoch + 1 in self.points:
            if self.before_read is not None:
                self.before_read()
            started = time.perf_counter()
            out.control = self.control.update(self.measure_model)
            self.measure_seconds += time.perf_counter() - started
        return out

    def epoch_metrics(self, diagnostics: Mapping[str, torch.Tensor] | None = None) -> dict[str, float]:
        """The last update's numbers for the epoch's history line: ``auto_gamma_trained`` (the value the
        measured network trained with), ``auto_gamma`` (the value after the update), ``auto_gap`` … ``auto_decision``,
        ``auto_held`` and ``auto_at_limit`` (the root finder's counts of withheld moves so far), ``auto_max`` (the
        upper end), and ``auto_measure_s``: the seconds spent measuring since the previous call (the controller's
        own cost)."""
        report = {f"auto_{k}": v for k, v in self.control.last.items()}
        report["auto_measure_s"], self.measure_seconds = self.measure_seconds, 0.0
        return report

    def checkpointables(self) -> list[Any]:
        return [self]

    def per_sample_gamma(self) -> nn.Module | None:
        return None  # one γ for every sample, in the history's auto_gamma

    def set_read_check(self, check: Callable[[], None]) -> None:
        self.before_read = check

    def summary(self, history: list[dict[str, Any]], selected_epoch: int) -> dict[str, Any]:
        """metrics.json's ``"auto"`` (:func:`scalar_summary`); {} before the first update."""
        auto = scalar_summary(history, selected_epoch, self.control.knob, self.measured_on)
        return {} if auto is None else {"auto": auto}

    def state_dict(self) -> dict[str, Any]:
        return {"iteration": self.iteration, **self.control.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.iteration = int(state["iteration"])
        self.control.load_state_dict(state)


def scalar_summary(history: list[dict[str, Any]], selected: int, knob: str,
                   measured_on: Sequence[str] = ()) -> dict[str, Any] | None:
    """The automatic scalar in metrics.json, from the history lines :meth:`AutoScalar.epoch_metrics` wrote (None
    without one): the knob's name; the value the selected epoch's network trained with, and the gap ĝ ± s measured
    on it; the value after the last update; ``limit`` (its upper end), ``at_limit`` (whether it reached it) and
    ``limit_epoch`` (the first epoch there); ``held`` (moves withheld because pushing had stopped changing the gap,
    metacal/meta/root_finder.py); ``measured_on``, the splits measured."""
    rows = [h["train"] for h in history if any(k.startswith("auto_") for k in h["train"])]
    if not rows:
        return None
    at = next((h["train"] for h in history if h["epoch"] == selected), rows[-1])
    limit = rows[-1].get("auto_max")
    reached = [h["epoch"] for h in history if limit is not None and h["train"].get(f"auto_{knob}", -1.0) >= limit]
    return {"knob": knob, "selected": at.get(f"auto_{knob}_trained"), "final": rows[-1][f"auto_{knob}"],
            "gap_selected": at.get("auto_gap"), "gap_se_selected": at.get("auto_gap_se"),
            "measure_s": sum(r.get("auto_measure_s", 0.0) for r in rows),
            "limit": limit, "at_limit": bool(reached), "limit_epoch": reached[0] if reached else None,
            "held": int(rows[-1].get("auto_held", 0)), "measured_on": list(measured_on)}


#: the options of :class:`AutoSettings` that belong to metacal's trainer (when and what it measures), not to a loop of
#: one's own
TRAINER_ONLY = ("updates_per_epoch", "measure_on")


def auto_gamma(loss: nn.Module, held_out: Dataset, *, batch_size: int = 512, seed: int = 0,
               **settings: Any) -> GapControl:
    """The automatic γ for a training loop of one's own: a :class:`GapControl` that owns ``loss``'s confidence
    scalar (focal γ, label-smoothing ε) from now on; call its ``update(model)`` once per epoch.

    ``settings`` are the ``auto`` section's keys (:class:`AutoSettings`, with its defaults: ``start``, ``first_step``,
    ``band``, ``sample`` …) other than ``updates_per_epoch`` and ``measure_on`` (the loop decides when to call and
    what ``held_out`` is). A bad value is a one-line ValueError naming the argument."""
    valid = [f.name for f in fields(AutoSettings) if f.name not in TRAINER_ONLY]
    if given := sorted(set(settings) & set(TRAINER_ONLY)):
        raise ValueError(f"auto_gamma: {', '.join(given)} belong to metacal's trainer; in your own loop call "
                         "update(model) when you want an update, and pass the data to measure as held_out")
    if unknown := sorted(set(settings) - set(valid)):
        raise ValueError(f"auto_gamma has no option(s) {', '.join(unknown)}; valid: {', '.join(valid)}")
    try:
        finder, _ = build_finder(AutoSettings(**settings), loss, type(loss).__name__)
    except ValueError as err:
        message = str(err).replace("learner auto", "auto_gamma").replace("auto: ", "auto_gamma: ")
        raise ValueError(message.replace("auto.", "")) from None
    return GapControl(loss, held_out, finder, loss.confidence_knob, sample=settings.get("sample"),
                      batch_size=batch_size, seed=seed)
