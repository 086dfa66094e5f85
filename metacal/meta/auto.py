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
from types import SimpleNamespace
from collections.abc import Iterable, Mapping
from typing import Any, Callable, Sequence

import torch
from torch import nn
from torch.utils.data import Dataset

from metacal.distributed import average_over_processes

from .step_context import StepResult
from .learner import PlainStep
from .gap_control import GapControl
from .root_finder import SignRootFinder


#: ``meta.controller``'s keys and defaults (the ``meta`` config section of ``meta.learner: auto``): the band k in
#: standard errors, the step's grow and shrink factors, ``confirm`` (agreeing signs in a row that move the scalar),
#: ``reconfirm`` (after a move, wait for ``confirm`` new agreeing signs), ``probe`` (how many first steps a run of
#: moves may push the scalar without changing the gap before further pushes are withheld; None: never), ``max`` the
#: scalar's upper end (None: the loss's own, 1 for label-smoothing ε, capped at 10 where the loss has none, focal γ), ``updates_per_epoch``,
#: ``sample`` (samples per measurement; None: all) and ``measure_on`` (the held-out splits measured together:
#: meta_val, val or both, and their shifted copies meta_val_shifted, val_shifted). ``meta.lr`` is the first step,
#: ``meta.gamma_net.init_gamma`` the start.
CONTROLLER_DEFAULTS: dict[str, Any] = {"band": 1.0, "grow": 1.2, "shrink": 0.5, "confirm": 2, "reconfirm": False,
                                       "probe": 2.0, "max": None, "updates_per_epoch": 1, "sample": None,
                                       "measure_on": ["meta_val", "val"]}
#: the splits ``meta.controller.measure_on`` may name: the held-out splits, and each perturbed at mixed severities of
#: its dataset's shift suite's fit families (metacal.data.shift_suites.shifted_held_out; docs/conventions.md#shift)
MEASURABLE = ("meta_val", "val", "meta_val_shifted", "val_shifted")


def controller_from_config(meta: Any, loss: nn.Module, loss_name: str) -> tuple[SignRootFinder, dict[str, Any]]:
    """The root finder of the ``meta`` config section for ``loss``'s confidence scalar, and the controller's
    options (:data:`CONTROLLER_DEFAULTS` under ``meta.controller``, ``measure_on`` as a tuple of split names); a
    bad setting is a one-line ValueError naming its config key."""
    knob = getattr(loss, "confidence_knob", None)
    if knob is None or not isinstance(getattr(loss, knob, None), float):
        raise ValueError("meta.learner=auto sets one scalar of the loss that lowers confidence (focal or dual_focal "
                         f"γ, label_smoothing ε); loss '{loss_name}' has none (or a per-class γ)")
    given: Mapping[str, Any] = meta.controller
    unknown = sorted(set(given) - set(CONTROLLER_DEFAULTS))
    if unknown:
        raise ValueError(f"meta.controller has no key(s) {', '.join(unknown)}; valid: {', '.join(CONTROLLER_DEFAULTS)}")
    opts = {**CONTROLLER_DEFAULTS, **given}
    lo, hi = loss.knob_range
    top = float(opts["max"]) if opts["max"] is not None else min(hi, 10.0)
    start = float(meta.gamma_net.get("init_gamma", getattr(loss, knob)))
    checks = [
        (meta.lr > 0, f"meta.lr (the first step of the automatic {knob}) must be > 0; got {meta.lr}"),
        (lo < top <= hi, f"meta.controller.max must be in ({lo}, {hi}] for {knob}; got {top}"),
        (lo <= start <= top, f"meta.gamma_net.init_gamma (the start of {knob}, {start}) must be in "
                             f"[{lo}, meta.controller.max = {top}]"),
        (opts["sample"] is None or (isinstance(opts["sample"], int) and not isinstance(opts["sample"], bool)),
         f"meta.controller.sample must be a whole number of held-out samples or null (all); got {opts['sample']!r}"),
        (measured_splits(opts["measure_on"]) is not None,
         f"meta.controller.measure_on must list some of {', '.join(MEASURABLE)}, each once; "
         f"got {opts['measure_on']!r}"),
    ]
    for ok, message in checks:
        if not ok:
            raise ValueError(message)
    opts["measure_on"] = measured_splits(opts["measure_on"])
    try:
        finder = SignRootFinder(start, float(meta.lr), lo, top, band=float(opts["band"]), grow=float(opts["grow"]),
                                shrink=float(opts["shrink"]), confirm=opts["confirm"],
                                reconfirm=opts["reconfirm"], probe=opts["probe"])
    except ValueError as err:
        raise ValueError(f"meta.controller: {err}") from None
    return finder, opts


def measured_splits(value: Any) -> tuple[str, ...] | None:
    """``meta.controller.measure_on`` as a tuple of split names, or None when it is not some of :data:`MEASURABLE`,
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
        meta_val: the measured dataset: meta-validation, or the splits of ``meta.controller.measure_on`` joined
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

    def epoch_metrics(self) -> dict[str, float]:
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


#: the controller's options that belong to metacal's trainer (when and what it measures), not to a loop of one's own
TRAINER_ONLY = ("updates_per_epoch", "measure_on")
#: config keys → the argument names of :func:`auto_gamma`, in its error messages
_ARGUMENT_NAMES = (("meta.gamma_net.init_gamma", "start"), ("meta.lr", "first_step"), ("meta.controller.", ""),
                   ("meta.controller", "auto_gamma"), ("meta.learner=auto", "auto_gamma"))


def auto_gamma(loss: nn.Module, held_out: Dataset, *, first_step: float = 1.0, start: float | None = None,
               batch_size: int = 512, seed: int = 0, **controller: Any) -> GapControl:
    """The automatic γ for a training loop of one's own: a :class:`GapControl` that owns ``loss``'s confidence
    scalar (focal γ, label-smoothing ε) from now on; call its ``update(model)`` once per epoch.

    ``first_step`` and ``start`` are what ``meta.lr`` and ``meta.gamma_net.init_gamma`` are to the trainer (default
    start: the loss's own value); ``controller`` takes ``meta.controller``'s keys other than ``updates_per_epoch``
    and ``measure_on`` (the loop decides when to call and what ``held_out`` is), with its defaults
    (:data:`CONTROLLER_DEFAULTS`). A bad value is a one-line ValueError naming the argument."""
    given = sorted(set(controller) & set(TRAINER_ONLY))
    if given:
        raise ValueError(f"auto_gamma: {', '.join(given)} belong to metacal's trainer; in your own loop call "
                         "update(model) when you want an update, and pass the data to measure as held_out")
    gamma_net = {} if start is None else {"init_gamma": start}
    meta = SimpleNamespace(lr=first_step, gamma_net=gamma_net, controller=controller)
    try:
        finder, opts = controller_from_config(meta, loss, type(loss).__name__)
        return GapControl(loss, held_out, finder, loss.confidence_knob, sample=opts["sample"],
                          batch_size=batch_size, seed=seed)
    except ValueError as err:
        message = str(err)
        for key, name in _ARGUMENT_NAMES:
            message = message.replace(key, name)
        raise ValueError(message) from None
