"""A sign-based root finder for one scalar: the update rule of the automatic γ (:mod:`metacal.meta.auto`).

The target is the root of a noisy, monotone function: the signed calibration gap g(γ) of the network on
held-out data, which falls as the confidence-lowering scalar γ rises (focal γ, label-smoothing ε). Each
update gets one estimate ĝ with its standard error s and moves γ by a step σ:

    sign  = +1 if ĝ > k·s  (over-confident: raise γ)
            −1 if ĝ < −k·s (under-confident: lower γ)
             0 otherwise   (inside the noise band: hold γ and σ)
    move only when the last ``confirm`` signs agree (all +1 or all −1); otherwise hold γ and σ
    σ    ← σ·grow  if sign equals the last sign that moved γ   (Rprop's slow growth on repeats)
    σ    ← σ·shrink if sign is its opposite                     (a flip: the root was crossed, bisect)
    γ    ← clip(γ + sign·σ, lo, hi)

Rprop is Riedmiller & Braun (1993); on a still root with exact signs the iterates bracket it and σ halves
at every crossing, so |γ − γ*| falls like bisection's 2^−n once the root is bracketed. The band keeps noise
from moving γ: with k = 1, an estimate whose mean is 0 moves γ in about 32% of the updates (Gaussian two-sided
tail at 1 SE), and each such move is followed by a flip that halves σ; with ``confirm`` = 2 (independent
estimates) it moves γ only when two in a row fall on the same side, in about 2·0.16² ≈ 5% of the updates.

``confirm`` = 2 asks the sign to be seen twice in a row before γ moves. The standard error only covers the
sampling noise of the measured split; the network's own state also moves the gap from one measurement to the
next (at a high learning rate an epoch can swing it by several points and back), and a move on such a swing
both puts γ where no later measurement wanted it and, at the flip back, halves σ. Requiring two agreeing signs
costs one update of lag where the sign is real.

``reconfirm`` (off by default) also asks for ``confirm`` new agreeing signs after every move, instead of moving
at every further agreeing sign. A move of γ shows in the gap only after the network has trained at the new γ
for a while; meanwhile the old sign persists, and without ``reconfirm`` every update moves γ again with a
growing step, past the root (γ overshoots while the gap lags).

``probe`` (a multiple of the first step and of the knob's unit; the trainer's default 2, off here when None)
stops pushing a knob that no longer acts. Where the network has fitted its training samples, or its learning
rate has dropped, the gap can sit outside the band while γ barely changes it (the focal weight (1 − p)^γ on
fitted samples is already near 0); the sign alone then pushes γ to its upper end with an ever larger step. The
rule: a run of moves in one direction starts from a reference (the γ before it and the gap ĝ_r ± s_r that
triggered it); once γ has moved ``probe``·max(σ₀, u) away from that γ and the gap has not changed by more than
k·√(s² + s_r²) (either way), a further move the same way is withheld and σ does not grow. The unit u is the
smallest change of the knob that is expected to show in the gap (focal γ: 1, label-smoothing ε: 0.05;
:attr:`metacal.losses.base.Loss.knob_unit`): with a small first step, ``probe`` first steps alone would be a
change the gap does not resolve from its noise (measured: with σ₀ = 1/3 the probe held γ after 2/3 of γ, with
the gap still +2 SE, and the selected network stayed over-confident; docs/results/discussion/auto_gamma.md). A
gap that changes by more than that, for any reason, renews the reference, so the knob may be pushed again; a
sign flip starts a new run. The upper end is also a hold: at γ = hi a repeated "raise" leaves γ and σ as they
are, and :attr:`RootFinderState.at_limit` records that the gap wanted more.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class RootFinderState:
    value: float  # γ now
    step: float  # σ now
    last_sign: int = 0  # the sign of the last update that moved γ (0: none yet)
    updates: int = 0  # estimates seen
    streak: int = 0  # signed: +n after n "raise" decisions in a row, −n after n "lower" ones, 0 after a hold
    ref_value: float | None = None  # ``probe``: γ before the current run of moves, and the gap ± SE that began it
    ref_gap: float | None = None
    ref_se: float | None = None
    held: int = 0  # updates whose move was withheld because the pushes had not shown in the gap (``probe``)
    at_limit: int = 0  # updates that asked to raise γ beyond its upper end


class SignRootFinder:
    """Finds γ with g(γ) = 0 for a decreasing g from noisy estimates (module docstring for the rule).

    Args:
        value: the starting γ, in [lo, hi].
        step: the first step σ₀ > 0.
        lo / hi: γ's range (hi may be ``inf``).
        band: k ≥ 0, the half-width of the hold band in standard errors.
        grow: σ factor on a repeated sign (≥ 1); shrink: σ factor on a flip, in (0, 1).
        confirm: how many agreeing signs in a row move γ (≥ 1; 1: every sign outside the band moves it).
        reconfirm: after a move, wait for ``confirm`` new agreeing signs before the next one.
        probe: withhold further moves one way once γ has moved ``probe``·max(first step, ``unit``) without
            changing the gap beyond band·SE (module docstring); None: never.
        unit: the knob's unit u ≥ 0 in the probe's distance (0: the first step alone).
    """

    def __init__(self, value: float, step: float, lo: float = 0.0, hi: float = math.inf, band: float = 1.0,
                 grow: float = 1.2, shrink: float = 0.5, confirm: int = 1, reconfirm: bool = False,
                 probe: float | None = None, unit: float = 0.0) -> None:
        checks = [
            (step > 0 and math.isfinite(step), f"the first step must be a finite number > 0, got {step}"),
            (lo < hi, f"the range must have lo < hi, got [{lo}, {hi}]"),
            (lo <= value <= hi, f"the start {value} lies outside the range [{lo}, {hi}]"),
            (band >= 0, f"the noise band must be >= 0 standard errors, got {band}"),
            (grow >= 1, f"grow must be >= 1, got {grow}"),
            (0 < shrink < 1, f"shrink must be in (0, 1), got {shrink}"),
            (isinstance(confirm, int) and not isinstance(confirm, bool) and confirm >= 1,
             f"confirm must be a whole number >= 1, got {confirm!r}"),
            (isinstance(reconfirm, bool), f"reconfirm must be true or false, got {reconfirm!r}"),
            (probe is None or (isinstance(probe, (int, float)) and not isinstance(probe, bool) and probe > 0
                               and math.isfinite(probe)), f"probe must be a number > 0 or null (off), got {probe!r}"),
            (unit >= 0 and math.isfinite(unit), f"the knob's unit must be a finite number >= 0, got {unit}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
        self.lo, self.hi, self.band = float(lo), float(hi), float(band)
        self.grow, self.shrink, self.confirm, self.reconfirm = float(grow), float(shrink), confirm, reconfirm
        self.first_step, self.probe = float(step), None if probe is None else float(probe)
        self.unit = float(unit)
        self.state = RootFinderState(value=float(value), step=float(step))

    @property
    def value(self) -> float:
        return self.state.value

    def decide(self, gap: float, se: float) -> int:
        """+1 (raise γ), −1 (lower γ) or 0 (hold): the sign of ``gap`` outside ± band·se."""
        if gap > self.band * se:
            return 1
        if gap < -self.band * se:
            return -1
        return 0

    def update(self, gap: float, se: float) -> int:
        """One estimate ĝ ± s of the gap at the current γ; moves γ when the last ``confirm`` decisions agree and
        returns the move: +1 (raised), −1 (lowered) or 0 (held)."""
        if not (math.isfinite(gap) and math.isfinite(se) and se >= 0):
            raise ValueError(f"the gap estimate must be finite with a standard error >= 0, got {gap} ± {se}")
        s = self.state
        sign = self.decide(gap, se)
        s.updates += 1
        s.streak = s.streak + sign if sign * s.streak > 0 else sign
        if sign == 0 or abs(s.streak) < self.confirm:
            return 0
        if sign == s.last_sign and self._withheld(sign, gap, se):
            return 0
        if s.last_sign != sign or s.ref_value is None:  # a new run of moves: its reference
            s.ref_value, s.ref_gap, s.ref_se = s.value, gap, se
        if s.last_sign == sign:
            s.step *= self.grow
        elif s.last_sign == -sign:
            s.step *= self.shrink
        s.last_sign = sign
        s.value = min(self.hi, max(self.lo, s.value + sign * s.step))
        if self.reconfirm:
            s.streak = 0  # the next move needs ``confirm`` signs measured after this one
        return sign

    def _withheld(self, sign: int, gap: float, se: float) -> bool:
        """Whether a repeated move ``sign`` is withheld: γ at its upper end (``at_limit``), or, with ``probe``, γ
        moved probe·max(σ₀, u) from the run's reference without the gap changing beyond band·√(s² + s_r²) (``held``).
        A gap that did change renews the reference at the current γ."""
        s = self.state
        if sign > 0 and s.value >= self.hi:
            s.at_limit += 1
            return True
        if self.probe is None or s.ref_gap is None or s.ref_se is None or s.ref_value is None:
            return False
        if abs(gap - s.ref_gap) > self.band * math.hypot(se, s.ref_se):
            s.ref_value, s.ref_gap, s.ref_se = s.value, gap, se
            return False
        if abs(s.value - s.ref_value) >= self.probe * max(self.first_step, self.unit):
            s.held += 1
            return True
        return False

    def state_dict(self) -> dict[str, Any]:
        return asdict(self.state)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        optional = lambda key: None if state.get(key) is None else float(state[key])  # noqa: E731
        # runs saved before ``confirm`` have no streak, before ``probe`` no reference and counts
        self.state = RootFinderState(value=float(state["value"]), step=float(state["step"]),
                                     last_sign=int(state["last_sign"]), updates=int(state["updates"]),
                                     streak=int(state.get("streak", 0)), ref_value=optional("ref_value"),
                                     ref_gap=optional("ref_gap"), ref_se=optional("ref_se"),
                                     held=int(state.get("held", 0)), at_limit=int(state.get("at_limit", 0)))
