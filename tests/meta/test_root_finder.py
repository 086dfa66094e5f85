"""The automatic γ's update rule (metacal/meta/root_finder.py) on synthetic monotone gaps with a known root."""

from __future__ import annotations

import math

import numpy as np
import pytest

from metacal.meta.root_finder import SignRootFinder


def run(finder: SignRootFinder, gap, se: float = 0.01, n: int = 60,
        rng: np.random.Generator | None = None) -> list[float]:
    """γ after each of ``n`` updates on g(γ) (plus N(0, se²) noise when ``rng`` is given)."""
    values = []
    for _ in range(n):
        noise = float(rng.normal(0.0, se)) if rng is not None else 0.0
        finder.update(gap(finder.value) + noise, se)
        values.append(finder.value)
    return values


def linear_gap(root: float, slope: float = 0.04):
    """A decreasing gap: over-confident (g > 0) below the root, under-confident above it."""
    return lambda gamma: slope * (root - gamma)


@pytest.mark.parametrize("confirm", [1, 2], ids=lambda c: f"confirm{c}")
@pytest.mark.parametrize("start", [0.0, 1.0, 2.7, 6.0, 10.0], ids=lambda s: f"start{s}")
def test_converges_to_the_root_from_either_side_and_both_ends(start, confirm):
    root = 2.7
    finder = SignRootFinder(start, step=1.0, lo=0.0, hi=10.0, band=1.0, confirm=confirm)
    values = run(finder, linear_gap(root), se=0.0, n=60 * confirm)  # exact signs: bisection once bracketed
    assert abs(values[-1] - root) < 1e-6
    # a nonlinear monotone gap (focal γ's effect saturates): the same root
    finder = SignRootFinder(start, step=1.0, lo=0.0, hi=10.0, band=1.0, confirm=confirm)
    values = run(finder, lambda g: math.tanh(root - g) * 0.1, se=0.0, n=60 * confirm)
    assert abs(values[-1] - root) < 1e-6


def test_bracketing_halves_the_step_at_every_crossing():
    finder = SignRootFinder(0.0, step=1.0, lo=0.0, hi=10.0, band=0.0, grow=1.2, shrink=0.5)
    gap = linear_gap(2.7)
    signs = [finder.update(gap(finder.value), 0.0) for _ in range(8)]
    # 0 → 1 → 2.2 (the step grows ×1.2 on a repeat) → 3.64 (over the root) → 2.92 (the step halves on the flip)
    assert signs[:4] == [1, 1, 1, -1]
    finder2 = SignRootFinder(0.0, step=1.0, lo=0.0, hi=10.0, band=0.0)
    steps = []
    for _ in range(4):
        finder2.update(gap(finder2.value), 0.0)
        steps.append(finder2.state.step)
    assert steps == pytest.approx([1.0, 1.2, 1.44, 0.72])


def test_confirm_two_moves_on_the_second_agreeing_sign():
    """Hand-derived: start 0, step 1, root 2.7, exact signs. The first sign of each run is held; from the second
    on γ moves, the step growing ×1.2 on a repeat of the last move's sign and halving on its opposite."""
    finder = SignRootFinder(0.0, step=1.0, lo=0.0, hi=10.0, band=0.0, confirm=2)
    gap = linear_gap(2.7)
    moves, values = [], []
    for _ in range(9):
        moves.append(finder.update(gap(finder.value), 0.0))
        values.append(finder.value)
    assert moves == [0, 1, 1, 1, 0, -1, -1, 0, 1]
    # 0 → 0 → 1 → 2.2 → 3.64 → 3.64 → 2.92 (step 0.72) → 2.056 (step 0.864) → 2.056
    # → 2.488 (step 0.432)
    assert values == pytest.approx([0.0, 1.0, 2.2, 3.64, 3.64, 2.92, 2.056, 2.056, 2.488])


def test_reconfirm_waits_for_confirm_new_signs_after_every_move():
    """Hand-derived: the setting of the test above with ``reconfirm``. Every move resets the run of signs, so γ
    moves on every second update at most; the step follows the same grow/shrink rule."""
    finder = SignRootFinder(0.0, step=1.0, lo=0.0, hi=10.0, band=0.0, confirm=2, reconfirm=True)
    gap = linear_gap(2.7)
    moves, values = [], []
    for _ in range(10):
        moves.append(finder.update(gap(finder.value), 0.0))
        values.append(finder.value)
    assert moves == [0, 1, 0, 1, 0, 1, 0, -1, 0, -1]
    # 0 → 1 (step 1) → 2.2 (step 1.2) → 3.64 (step 1.44) → 2.92 (flip: 0.72) → 2.056 (0.864)
    assert values == pytest.approx([0.0, 1.0, 1.0, 2.2, 2.2, 3.64, 3.64, 2.92, 2.92, 2.056])


def test_reconfirm_overshoots_less_when_the_gap_lags():
    """A gap that answers γ only ``lag`` updates late (the network needs time at a new γ): g_t = 0.04·(2.7 − γ_{t−lag}).
    Without ``reconfirm`` the old sign keeps moving γ with a growing step; with it γ waits, and overshoots less."""
    def overshoot(reconfirm: bool, lag: int = 3) -> float:
        finder = SignRootFinder(0.0, step=0.5, lo=0.0, hi=10.0, band=0.0, confirm=2, reconfirm=reconfirm)
        history = [finder.value] * lag
        for _ in range(40):
            finder.update(0.04 * (2.7 - history[-lag]), 0.0)
            history.append(finder.value)
        return max(history) - 2.7

    assert overshoot(False) > 2 * overshoot(True) > 0


def test_confirm_two_ignores_a_one_update_swing():
    """Signs that alternate (a gap swinging with the network's state, not with γ) move neither γ nor the step;
    a hold inside the band breaks a run of signs."""
    finder = SignRootFinder(1.0, step=1.0, lo=0.0, hi=10.0, band=1.0, confirm=2)
    for gap in (0.05, -0.05, 0.05, 0.0, 0.05, -0.05):
        assert finder.update(gap, 0.01) == 0
    assert finder.value == 1.0 and finder.state.step == 1.0
    assert finder.update(-0.05, 0.01) == -1 and finder.value == 0.0
    # the same swing with confirm = 1: γ moves at every sign and the step halves at every flip
    finder = SignRootFinder(1.0, step=1.0, lo=0.0, hi=10.0, band=1.0)
    for gap in (0.05, -0.05, 0.05):
        finder.update(gap, 0.01)
    assert finder.value == 1.75 and finder.state.step == 0.25  # 1 → 2 → 1.5 → 1.75


def test_holds_inside_the_noise_band():
    """A gap within ±k·SE moves nothing: neither γ nor the step."""
    finder = SignRootFinder(1.5, step=0.5, lo=0.0, hi=10.0, band=1.0)
    for gap in (0.009, -0.009, 0.0, 0.01, -0.01):  # |gap| ≤ 1·SE = 0.01
        assert finder.update(gap, 0.01) == 0
    assert finder.value == 1.5 and finder.state.step == 0.5 and finder.state.updates == 5
    assert finder.update(0.0101, 0.01) == 1 and finder.value == 2.0


@pytest.mark.parametrize("confirm", [1, 2], ids=lambda c: f"confirm{c}")
def test_noisy_gap_settles_near_the_root(confirm):
    """With noise of one SE the decisions are sometimes wrong, but γ ends near the root on every seed."""
    root = 2.7
    for seed in range(20):
        finder = SignRootFinder(1.0, step=1.0, lo=0.0, hi=10.0, band=1.0, confirm=confirm)
        values = run(finder, linear_gap(root, slope=0.04), se=0.01, n=40, rng=np.random.default_rng(seed))
        assert abs(np.mean(values[-10:]) - root) < 0.5, seed


def test_clipped_to_the_range():
    finder = SignRootFinder(9.5, step=1.0, lo=0.0, hi=10.0, band=0.0)
    run(finder, lambda g: 1.0, se=0.0, n=5)  # always over-confident: γ goes to its upper end and stays
    assert finder.value == 10.0
    finder = SignRootFinder(0.5, step=1.0, lo=0.0, hi=10.0, band=0.0)
    run(finder, lambda g: -1.0, se=0.0, n=5)
    assert finder.value == 0.0


@pytest.mark.parametrize("n_before", [1, 5])
def test_state_round_trip_continues_the_same_sequence(n_before):
    gap = linear_gap(3.3)
    a = SignRootFinder(1.0, step=1.0, hi=10.0, confirm=2)
    run(a, gap, se=0.001, n=n_before)  # after 1 update: in the middle of a run of signs
    b = SignRootFinder(7.0, step=0.1, hi=10.0, confirm=2)
    b.load_state_dict(a.state_dict())
    assert run(a, gap, se=0.001, n=10) == run(b, gap, se=0.001, n=10)


@pytest.mark.parametrize("kwargs, message", [
    ({"step": -1.0}, "first step must be a finite number > 0"),
    ({"step": 0.0}, "first step must be a finite number > 0"),
    ({"value": 5.0, "hi": 4.0}, "outside the range"),
    ({"band": -1.0}, "noise band must be >= 0"),
    ({"grow": 0.9}, "grow must be >= 1"),
    ({"shrink": 1.0}, "shrink must be in (0, 1)"),
    ({"confirm": 0}, "confirm must be a whole number >= 1"),
    ({"confirm": 1.5}, "confirm must be a whole number >= 1"),
    ({"reconfirm": "yes"}, "reconfirm must be true or false"),
    ({"probe": 0.0}, "probe must be a number > 0 or null"),
    ({"probe": True}, "probe must be a number > 0 or null"),
    ({"unit": -1.0}, "the knob's unit must be a finite number >= 0"),
])
def test_bad_settings_are_refused(kwargs, message):
    args = {"value": 1.0, "step": 1.0, "lo": 0.0, "hi": 10.0, **kwargs}
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        SignRootFinder(**args)


def test_non_finite_gap_is_refused_without_moving():
    finder = SignRootFinder(1.0, step=1.0)
    with pytest.raises(ValueError, match="finite"):
        finder.update(float("nan"), 0.01)
    assert finder.value == 1.0 and finder.state.updates == 0


@pytest.mark.parametrize("confirm, expected", [(1, 2 * 0.158655), (2, 2 * 0.158655 ** 2)])
def test_pure_noise_moves_gamma_at_the_gaussian_rate(confirm, expected):
    """A gap of mean 0 measured with N(0, s²) noise and band k = 1: every update moves γ with probability
    P(|Z| > 1) = 2·Φ(−1) ≈ 0.317 when each sign moves it, and 2·Φ(−1)² ≈ 0.050 when two agreeing signs in a row
    are needed (the module docstring's figures)."""
    rng = np.random.default_rng(0)
    finder = SignRootFinder(5.0, step=1e-9, lo=0.0, hi=10.0, band=1.0, confirm=confirm)
    n = 50_000
    moved = sum(abs(finder.update(float(rng.normal(0.0, 1.0)), 1.0)) for _ in range(n))
    assert moved / n == pytest.approx(expected, abs=0.01)


def test_a_gap_that_gamma_no_longer_moves_is_held_not_pushed_to_the_end():
    """The failure ``probe`` removes: a gap that sits 2 SE above 0 whatever γ does (a network that has fitted its
    training samples, or after the learning rate dropped). Without it, every repeat raises γ with a step growing
    ×1.2, to the upper end; with probe = 2 first steps, hand-derived (confirm 1, step 1): 1 → 2 (the run's reference:
    γ 1, gap 0.02) → 3.2 (moved 1 < 2: still probing) → held at 3.2 (moved 2.2 ≥ 2, the gap unchanged), σ frozen."""
    plain = SignRootFinder(1.0, step=1.0, hi=10.0, band=1.0)
    run(plain, lambda g: 0.02, se=0.01, n=12)
    assert plain.value == 10.0 and plain.state.at_limit == 6  # 1, 2, 3.2, 4.64, 6.37, 8.44, 10, then 6 asks
    finder = SignRootFinder(1.0, step=1.0, hi=10.0, band=1.0, probe=2.0)
    moves = [finder.update(0.02, 0.01) for _ in range(12)]
    assert moves == [1, 1] + [0] * 10
    assert finder.value == pytest.approx(3.2) and finder.state.step == pytest.approx(1.2)
    assert finder.state.held == 10 and finder.state.at_limit == 0


def test_a_small_first_step_probes_as_far_as_the_knob_unit():
    """With σ₀ = 1/3 the probe counts the knob's unit (γ: 1), not the first step: it withholds only after γ has
    moved 2·max(1/3, 1) = 2, hand-derived (confirm 1, grow 1.2): 1 → 1 + (1/3)(1 + 1.2 + 1.2² + 1.2³ + 1.2⁴)
    = 3.4805 in five moves (moved 2.48 ≥ 2), then held. Counting first steps alone (unit 0) it held after 0.73
    of γ, at 1.7333: a change the gap does not resolve from its noise."""
    finder = SignRootFinder(1.0, step=1 / 3, hi=10.0, band=1.0, probe=2.0, unit=1.0)
    moves = [finder.update(0.02, 0.01) for _ in range(10)]
    assert moves == [1] * 5 + [0] * 5
    assert finder.value == pytest.approx(1 + (1 + 1.2 + 1.44 + 1.728 + 2.0736) / 3)
    assert finder.state.held == 5
    steps_only = SignRootFinder(1.0, step=1 / 3, hi=10.0, band=1.0, probe=2.0)
    assert [steps_only.update(0.02, 0.01) for _ in range(4)] == [1, 1, 0, 0]
    assert steps_only.value == pytest.approx(1 + (1 + 1.2) / 3)


@pytest.mark.parametrize("step", [1.0, 3.0])
def test_a_first_step_of_a_unit_or_more_probes_as_before(step):
    """A first step of at least the unit: max(σ₀, u) = σ₀, every decision as without the unit."""
    gaps = [0.02] * 6 + [0.05] * 4 + [-0.01] * 3 + [0.02] * 5
    with_unit = SignRootFinder(1.0, step=step, hi=30.0, band=1.0, probe=2.0, unit=1.0)
    without = SignRootFinder(1.0, step=step, hi=30.0, band=1.0, probe=2.0)
    assert [with_unit.update(g, 0.01) for g in gaps] == [without.update(g, 0.01) for g in gaps]
    assert with_unit.state_dict() == without.state_dict()


def test_a_gap_that_changes_renews_the_probe():
    """Held at 3.2 as above; then the gap changes by more than band·√(s² + s_r²) = 0.01414 (here it grows: the
    network drifted), which renews the reference at γ = 3.2: pushing resumes, for another two first steps."""
    finder = SignRootFinder(1.0, step=1.0, hi=10.0, band=1.0, probe=2.0)
    for _ in range(4):
        finder.update(0.02, 0.01)
    assert finder.value == pytest.approx(3.2) and finder.state.held == 2
    assert finder.update(0.035, 0.01) == 1  # 0.035 − 0.02 = 0.015 > 0.01414
    assert finder.value == pytest.approx(3.2 + 1.44)  # the step grew on the repeat, 1.2 → 1.44
    assert (finder.state.ref_value, finder.state.ref_gap) == (pytest.approx(3.2), 0.035)
    assert finder.update(0.035, 0.01) == 1 and finder.value == pytest.approx(3.2 + 1.44 + 1.728)  # moved 1.44 < 2
    assert finder.update(0.035, 0.01) == 0 and finder.state.held == 3  # moved 3.17 ≥ 2: held again
    # a change inside the threshold renews nothing
    assert finder.update(0.035 + 0.014, 0.01) == 0 and finder.state.ref_gap == 0.035 and finder.state.held == 4


def test_probe_does_not_slow_a_gap_that_answers():
    """Where γ moves the gap (the linear and saturating gaps above, exact and noisy), the probe never withholds a
    move that the plain rule would make differently enough to matter: the same root."""
    root = 2.7
    for confirm in (1, 2):
        finder = SignRootFinder(0.0, step=1.0, hi=10.0, band=1.0, confirm=confirm, probe=2.0)
        assert abs(run(finder, linear_gap(root), se=0.0, n=60 * confirm)[-1] - root) < 1e-6
        assert finder.state.held == 0
    for seed in range(20):
        finder = SignRootFinder(1.0, step=1.0, hi=10.0, band=1.0, confirm=2, probe=2.0)
        values = run(finder, linear_gap(root, slope=0.04), se=0.01, n=40, rng=np.random.default_rng(seed))
        assert abs(np.mean(values[-10:]) - root) < 0.5, seed


def test_at_the_upper_end_a_repeated_raise_changes_nothing_and_is_counted():
    finder = SignRootFinder(9.5, step=1.0, hi=10.0, band=0.0)
    moves = [finder.update(1.0, 0.0) for _ in range(5)]
    assert moves == [1, 0, 0, 0, 0] and finder.value == 10.0
    assert finder.state.step == 1.0 and finder.state.at_limit == 4  # no step growth at the end
    assert finder.update(-1.0, 0.0) == -1 and finder.value == 9.5  # the way down: the step halves once, from 1


def test_state_saved_before_probe_loads():
    finder = SignRootFinder(1.0, step=1.0, hi=10.0, probe=2.0)
    finder.load_state_dict({"value": 2.0, "step": 0.5, "last_sign": 1, "updates": 3, "streak": 1})
    assert finder.state.ref_gap is None and finder.state.held == 0 and finder.state.at_limit == 0
    assert finder.update(0.05, 0.01) == 1 and finder.value == 2.6  # a run with no reference starts probing here
    assert finder.state.ref_value == 2.0


@pytest.mark.parametrize("n_before", [1, 6])
def test_state_round_trip_keeps_the_probe(n_before):
    a = SignRootFinder(1.0, step=1.0, hi=10.0, probe=2.0)
    for _ in range(n_before):
        a.update(0.02, 0.01)
    b = SignRootFinder(1.0, step=1.0, hi=10.0, probe=2.0)
    b.load_state_dict(a.state_dict())
    gaps = [0.02, 0.04, 0.04, 0.04, -0.01, 0.0]
    assert [a.update(g, 0.01) for g in gaps] == [b.update(g, 0.01) for g in gaps]
    assert a.state == b.state
