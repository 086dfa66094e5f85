"""The rows of a regime page: each method raw and after temperature scaling, CE after each post-hoc calibrator (the
references), the per-seed grid pick; their per-seed values and paired differences against the references.

Grid pick (as on the other results pages, metacal/report/comparisons.py): on each seed, the run with the lowest
validation ECE at its selected epoch among CE (γ = 0) and the fixed-γ focal runs — chosen on the run's own
validation labels, so on noisy labels when the held-out set is noisy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from metacal.report.paired import PairedDiff, paired_diff

from .numbers import RunNumbers

GRID = "grid"
#: the methods of the pages, in order, with their labels
METHOD_LABELS = {"ce": "CE", GRID: "Grid pick", "auto_gamma": "Auto γ", "flgamma_sece": "FLγ-SECE", "mixup": "Mixup",
                 "dual_focal": "Dual focal", "ls_005": "LS-0.05"}
CALIBRATOR_LABELS = {"raw": "", "ts_nll": " + TS", "ets": " + ETS", "vector": " + VS", "dirichlet": " + Dir"}


@dataclass(frozen=True)
class Variant:
    stem: str  # a sweep folder (method), or GRID
    calibrator: str = "raw"  # raw or a metacal.posthoc registry name

    @property
    def label(self) -> str:
        return METHOD_LABELS.get(self.stem, self.stem) + CALIBRATOR_LABELS.get(self.calibrator, f" + {self.calibrator}")

    @property
    def key(self) -> str:
        return self.stem if self.calibrator == "raw" else f"{self.stem}+{self.calibrator}"

    @property
    def is_reference(self) -> bool:
        """CE after a post-hoc calibrator: what a user gets without a training-time method."""
        return self.stem == "ce" and self.calibrator != "raw"

    @property
    def trains_differently(self) -> bool:
        """A training-time method (not CE itself, raw or post-hoc)."""
        return self.stem != "ce"


def variants(references: tuple[str, ...]) -> list[Variant]:
    """CE, CE + each reference calibrator, then every other method raw and + TS."""
    out = [Variant("ce"), *(Variant("ce", c) for c in references)]
    for stem in METHOD_LABELS:
        if stem != "ce":
            out += [Variant(stem), Variant(stem, "ts_nll")]
    return out


def grid_choice(stems: dict[str, dict[int, RunNumbers]]) -> dict[int, str]:
    """seed → the grid's run with the lowest validation ECE (only seeds where CE and ≥ 2 fixed-γ runs all exist)."""
    grid = [s for s, runs in stems.items() if any(r.fixed_gamma is not None for r in runs.values())]
    if "ce" not in grid or len(grid) < 3:
        return {}
    seeds = set.intersection(*(set(stems[s]) for s in grid))
    return {seed: min(grid, key=lambda s: (stems[s][seed].ece_val, s)) for seed in sorted(seeds)}


def run_of(stems: dict[str, dict[int, RunNumbers]], stem: str, seed: int, choice: dict[int, str]) -> RunNumbers | None:
    if stem == GRID:
        stem = choice.get(seed, "")
    return stems.get(stem, {}).get(seed)


def values(stems: dict[str, dict[int, RunNumbers]], v: Variant, metric: str,
           choice: dict[int, str] | None = None) -> dict[int, float]:
    """seed → the variant's ``metric`` (only seeds where it exists and is finite)."""
    choice = grid_choice(stems) if choice is None and v.stem == GRID else (choice or {})
    seeds = sorted(choice) if v.stem == GRID else sorted(stems.get(v.stem, {}))
    out = {}
    for seed in seeds:
        run = run_of(stems, v.stem, seed, choice)
        value = None if run is None else run.variants.get(v.calibrator, {}).get(metric)
        if value is not None and math.isfinite(value):
            out[seed] = value
    return out


def mean(values_: dict[int, float]) -> float:
    return sum(values_.values()) / len(values_) if values_ else math.nan


def best_reference(stems: dict[str, dict[int, RunNumbers]], references: tuple[str, ...], metric: str) -> Variant | None:
    """The CE + calibrator with the lowest mean ``metric`` in this regime (None without any)."""
    found = [(mean(values(stems, Variant("ce", c), metric)), Variant("ce", c)) for c in references]
    found = [(m, v) for m, v in found if math.isfinite(m)]
    return min(found, key=lambda item: item[0])[1] if found else None


def compare(stems: dict[str, dict[int, RunNumbers]], v: Variant, ref: Variant, metric: str) -> PairedDiff:
    """Paired over seeds: v − ref (fractions)."""
    choice = grid_choice(stems)
    return paired_diff(values(stems, v, metric, choice), values(stems, ref, metric, choice))
