"""Conformity scores of split conformal prediction: lower = the label conforms better; a set holds every label whose
score is at most the calibrated quantile.

Order: each row's classes sorted by probability, descending, ties broken by the lower class index (a stable sort of
−p); ρ(y) ∈ {1, …, K} is y's rank there and C(y) = Σ_{j: ρ(j) < ρ(y)} p_j the mass ranked above y.

- ``thr`` (THR / LAC; Sadinle, Lei & Wasserman 2019): s(x, y) = 1 − p_y.
- ``aps`` (adaptive prediction sets; Romano, Sesia & Candès, NeurIPS 2020): s = C(y) + U·p_y, U ~ U[0, 1] drawn
  once per input (randomised), or s = C(y) + p_y (non-randomised, ``randomized=False``).
- ``raps`` (regularised APS; Angelopoulos, Bates, Malik & Jordan, ICLR 2021, eq. 3): the APS score plus
  λ·(ρ(y) − k_reg)⁺.

Along the order every APS and RAPS score grows with the rank (C(y) + U p_y ≤ C(y) + p_y ≤ the next label's score), so
their sets are prefixes of the sorted classes; THR's are the labels above a probability threshold.
"""

from __future__ import annotations

from typing import Callable

import torch

from metacal.registry import Registry

#: score name → builder(randomized, k_reg, lam) of a function (probs N×K, u N) → scores N×K
SCORES: Registry[Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = Registry("conformal score",
                                                                                   listing="metacal.conformal")


def ranks_and_mass_above(probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(ρ, C): each label's 1-based rank in its row's descending order (ties: lower index first) and the
    probability mass ranked above it."""
    order = torch.sort(-probs, dim=1, stable=True).indices
    sorted_p = probs.gather(1, order)
    above_sorted = sorted_p.cumsum(dim=1) - sorted_p
    rank = torch.empty_like(order)
    positions = torch.arange(1, probs.shape[1] + 1, device=probs.device).expand_as(order)
    rank.scatter_(1, order, positions)
    above = torch.empty_like(probs).scatter_(1, order, above_sorted)
    return rank, above


@SCORES.register("thr")
def thr(randomized: bool = True, k_reg: int = 0, lam: float = 0.0) -> Callable[[torch.Tensor, torch.Tensor],
                                                                              torch.Tensor]:
    """1 − p_y (``randomized``, ``k_reg``, ``lam`` do not apply)."""
    return lambda probs, u: 1.0 - probs


@SCORES.register("aps")
def aps(randomized: bool = True, k_reg: int = 0, lam: float = 0.0) -> Callable[[torch.Tensor, torch.Tensor],
                                                                              torch.Tensor]:
    """C(y) + U·p_y (randomised) or C(y) + p_y."""
    return raps(randomized, 0, 0.0)


@SCORES.register("raps")
def raps(randomized: bool = True, k_reg: int = 1, lam: float = 0.01) -> Callable[[torch.Tensor, torch.Tensor],
                                                                                torch.Tensor]:
    """C(y) + U·p_y + λ·(ρ(y) − k_reg)⁺ (U = 1 when not ``randomized``); defaults k_reg = 1, λ = 0.01."""

    def score(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        rank, above = ranks_and_mass_above(probs)
        share = u.unsqueeze(1) if randomized else torch.ones_like(u).unsqueeze(1)
        penalty = lam * (rank - k_reg).clamp_min(0).to(probs.dtype) if lam else 0.0
        return above + share * probs + penalty

    return score


def available() -> list[str]:
    return SCORES.available()
