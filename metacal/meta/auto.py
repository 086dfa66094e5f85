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
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Callable

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, Subset

from metacal.distributed import average_over_processes

from .step_context import StepResult
from .learner import PlainStep
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


def update_points(steps_per_epoch: int, updates_per_epoch: int) -> frozenset[int]:
    """The in-epoch iteration counts (1-based, the last = steps_per_epoch) after which γ is updated:
    round(j·S/u) for j = 1…u, so the last update falls on the epoch's last step."""
    if updates_per_epoch < 1 or updates_per_epoch > steps_per_epoch:
        raise ValueError(f"updates_per_epoch must be in [1, {steps_per_epoch}] (the steps per epoch), "
                         f"got {updates_per_epoch}")
    return frozenset(round(j * steps_per_epoch / updates_per_epoch) for j in range(1, updates_per_epoch + 1))


class AutoScalar:
    """Plain steps of ``loss`` with its scalar ``knob`` set by a :class:`SignRootFinder` (module docstring).

    Args:
        model / loss / optimizer / backward / head: as :class:`metacal.meta.PlainStep` (``model`` unwrapped
            or DDP; the gap is measured through ``measure_model``, default ``model``).
        meta_val: the measured dataset: meta-validation, or the splits of ``meta.controller.measure_on`` joined
            (this process measures its share of ``sample`` samples).
        finder: the root finder; its value is written into ``loss.<knob>`` now and after every update.
        knob: the name of the loss attribute, e.g. ``"gamma"``.
        steps_per_epoch / updates_per_epoch: γ is updated at :func:`update_points` of every epoch.
        sample: measure on a fixed seeded subsample of at most this many measured samples (None: all of them).
        batch_size: the per-process batch of the measuring forward pass.
        average: in-place mean over processes (the sums then give every rank the same ĝ, s).
    """

    gamma_net = None
    #: called before each update's measurement, the one point of an iteration that reads values to the host (the
    #: trainer checks there that the steps so far stayed finite)
    before_read: Callable[[], None] | None = None

    def __init__(self, model: nn.Module, loss: nn.Module, optimizer: Any, meta_val: Dataset,
                 finder: SignRootFinder, knob: str, *, steps_per_epoch: int, updates_per_epoch: int = 1,
                 sample: int | None = None, batch_size: int = 512, seed: int = 0, rank: int = 0,
                 world_size: int = 1, backward: Callable[[torch.Tensor], Any] | None = None,
                 head: nn.Linear | None = None, measure_model: nn.Module | None = None,
                 average: Callable[[list[torch.Tensor]], None] = average_over_processes) -> None:
        if not isinstance(getattr(loss, knob, None), float):
            raise ValueError(f"the loss has no scalar {knob!r} to set (one number, not per class)")
        n = len(meta_val)
        if n < 2 or (sample is not None and sample < 2):
            raise ValueError(f"the gap needs at least 2 held-out samples; the measured splits have {n}, the sample "
                             f"is {sample}")
        self.points = update_points(steps_per_epoch, updates_per_epoch)
        self.steps_per_epoch = steps_per_epoch
        self.plain = PlainStep(model, loss, optimizer, backward=backward, head=head)
        self.loss, self.knob, self.finder, self.average = loss, knob, finder, average
        self.measure_model = measure_model if measure_model is not None else model
        size = n if sample is None else min(sample, n)
        order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:size].sort().values
        shard = order[rank::world_size].tolist()
        self.loader = DataLoader(Subset(meta_val, shard), batch_size=batch_size, shuffle=False)
        self.kept: list[tuple[torch.Tensor, torch.Tensor]] | None = None  # the sample's batches, once read
        self.iteration = 0
        self.last: dict[str, float] = {}
        self.measure_seconds = 0.0  # time in measure() since the last epoch_metrics() (the controller's cost)
        self._apply()

    def _apply(self) -> None:
        setattr(self.loss, self.knob, float(self.finder.value))

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

    def measure(self) -> tuple[float, float]:
        """ĝ ± s on the measured sample, over every process."""
        device = next(self.measure_model.parameters()).device
        sums = gap_sums(self.measure_model, self.sample_batches(), device)
        self.average([sums])  # a mean of sums: the ratios ĝ and s are those of the global sums
        return gap_estimate(sums)

    def step(self, inputs: torch.Tensor, targets: torch.Tensor) -> StepResult:
        value = self.finder.value
        out = self.plain.step(inputs, targets)
        self.iteration += 1
        if self.knob == "gamma":
            out.gamma = torch.full((targets.shape[0],), value)
        if (self.iteration - 1) % self.steps_per_epoch + 1 in self.points:
            if self.before_read is not None:
                self.before_read()
            started = time.perf_counter()
            gap, se = self.measure()
            seconds = time.perf_counter() - started
            sign = self.finder.update(gap, se)
            self._apply()
            state = self.finder.state
            self.last = {f"{self.knob}_trained": value, self.knob: self.finder.value, "gap": gap, "gap_se": se,
                         "band": self.finder.band * se, "step": state.step, "decision": float(sign),
                         "held": float(state.held), "at_limit": float(state.at_limit), "max": self.finder.hi}
            self.measure_seconds += seconds
            out.control = dict(self.last)
        return out

    def epoch_metrics(self) -> dict[str, float]:
        """The last update's numbers for the epoch's history line: ``auto_gamma_trained`` (the value the
        measured network trained with), ``auto_gamma`` (the value after the update), ``auto_gap`` … ``auto_decision``,
        ``auto_held`` and ``auto_at_limit`` (the root finder's counts of withheld moves so far), ``auto_max`` (the
        upper end), and ``auto_measure_s``: the seconds spent measuring since the previous call (the controller's
        own cost)."""
        report = {f"auto_{k}": v for k, v in self.last.items()}
        report["auto_measure_s"], self.measure_seconds = self.measure_seconds, 0.0
        return report

    def checkpointables(self) -> list[Any]:
        return [self]

    def state_dict(self) -> dict[str, Any]:
        return {"iteration": self.iteration, "finder": self.finder.state_dict(), "last": dict(self.last)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.iteration = int(state["iteration"])
        self.finder.load_state_dict(state["finder"])
        self.last = {k: float(v) for k, v in state.get("last", {}).items()}
        self._apply()
