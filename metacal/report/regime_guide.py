"""The method guide's branches for the regimes where one temperature may not be enough — noisy labels, a small clean
set, overlapping classes, imbalanced classes — from the regime pages' CSVs (scripts/regime_study.py report; one line
per study × regime × row × metric, with the paired differences against CE + each post-hoc calibrator).

Per branch, the regimes of its kind on its page. In each regime the best post-hoc column is the CE + calibrator row
with the lowest mean of the branch's metric, and the best training-time row the non-CE row (raw or + TS) with the
lowest mean among those resolved below it (the lowest mean of all when none is); a row beats the column when their
paired 95% t-interval over seeds lies below 0, and loses to it when the interval lies above 0.

The verdict, in order: a training-time row that beats the best post-hoc column in every regime of the branch; CE as
trained when it does; else the row (CE as trained included) that beats it in the most regimes among those that lose
to it in none — evidence that taking it instead of the post-hoc column never cost a resolved margin here; else the
post-hoc column, saying where a row did win. Reads CSVs only.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

# (kind of regime, page stem, title, metric and how the guide names it)
BRANCHES = (
    ("noisy", "noisy_labels", "When labels may be noisy (and the held-out labels are as noisy)", "ece",
     "test ECE against clean labels"),
    ("trusted", "noisy_labels", "When labels may be noisy and you have a small clean held-out set", "ece",
     "test ECE against clean labels"),
    ("overlap", "overlap", "When classes overlap (high Bayes error)", "gap", "gap to the true posterior"),
    ("imbalanced", "long_tail", "When classes are imbalanced", "classwise_ece", "test classwise ECE"),
)


RULE = ("*The regime branches below compare every training-time row (raw or + TS, and CE as trained) with the best "
        "post-hoc column of the CE run in each regime, paired over seeds. The verdict names a row that beats that "
        "column by a resolved margin in every regime; else the row that beats it in the most regimes and loses to it "
        "by a resolved margin in none; else the post-hoc column.*")


#: how a verdict names a row whose page label needs a word of explanation
PLAIN = {"CE": "CE as trained (no post-hoc map)",
         "Grid pick": "the grid pick (CE and focal γ = 1…5 trained, the lowest validation ECE kept)"}


@dataclass(frozen=True)
class Cell:
    """One regime of a branch: its best post-hoc column and best training-time row, and their paired Δ."""

    study: str
    regime: str
    reference: str
    reference_mean: float
    row: str
    row_mean: float
    delta: tuple[float, float, float] | None  # (mean, low, high), fractions
    resolved: bool
    n: int
    raw: tuple[float, float, float] | None = None  # CE as trained against the reference: (mean, low, high)
    raw_better: bool = False  # that difference resolved below 0


@dataclass(frozen=True)
class Tally:
    """One row over a branch's regimes against each regime's best post-hoc column: resolved wins and losses."""

    row: str  # its label
    wins: int
    losses: int
    regimes: int


def _float(text: str) -> float:
    return float(text) if text not in ("", None) else math.nan


def read_page(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: write it with python scripts/regime_study.py report {path.stem}")
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def cells(rows: list[dict[str, str]], kind: str, metric: str) -> list[Cell]:
    """The branch's regimes (in CSV order) as :class:`Cell`s."""
    out = []
    regimes = dict.fromkeys((r["study"], r["regime"]) for r in rows if r["kind"] == kind and r["metric"] == metric)
    for study, regime in regimes:
        lines = [r for r in rows if (r["study"], r["regime"], r["metric"]) == (study, regime, metric)]
        refs = [r for r in lines if r["row"].startswith("ce+")]
        others = [r for r in lines if not r["row"].startswith("ce") and math.isfinite(_float(r["mean"]))]
        if not refs or not others:
            continue
        ref = min(refs, key=lambda r: _float(r["mean"]))
        prefix = f"vs_{ref['row']}_"
        wins = [r for r in others if r[prefix + "resolved"] == "1" and _float(r[prefix + "mean"]) < 0]
        best = min(wins or others, key=lambda r: _float(r["mean"]))  # a resolved win before a lower, unresolved mean
        mean, low, high = (_float(best[prefix + k]) for k in ("mean", "low", "high"))
        delta = None if not math.isfinite(mean) else (mean, low, high)
        ce = next((r for r in lines if r["row"] == "ce"), None)
        raw = None if ce is None or ce[prefix + "mean"] == "" else tuple(_float(ce[prefix + k]) for k in
                                                                         ("mean", "low", "high"))
        out.append(Cell(lines[0]["study_title"], lines[0]["regime_label"], ref["row_label"], _float(ref["mean"]),
                        best["row_label"], _float(best["mean"]), delta, best[prefix + "resolved"] == "1" and
                        mean < 0, int(best["n"]), raw, ce is not None and ce[prefix + "resolved"] == "1" and
                        raw is not None and raw[0] < 0))
    return out


def tallies(rows: list[dict[str, str]], kind: str, metric: str) -> list[Tally]:
    """Every row other than the CE + calibrator columns (CE as trained included), in CSV order."""
    counts: dict[str, list[int]] = {}
    regimes = dict.fromkeys((r["study"], r["regime"]) for r in rows if r["kind"] == kind and r["metric"] == metric)
    for study, regime in regimes:
        lines = [r for r in rows if (r["study"], r["regime"], r["metric"]) == (study, regime, metric)]
        refs = [r for r in lines if r["row"].startswith("ce+")]
        if not refs:
            continue
        prefix = f"vs_{min(refs, key=lambda r: _float(r['mean']))['row']}_"
        for r in lines:
            if r["row"].startswith("ce+") or not math.isfinite(_float(r[prefix + "mean"])):
                continue
            c = counts.setdefault(r["row_label"], [0, 0, 0])
            resolved, mean = r[prefix + "resolved"] == "1", _float(r[prefix + "mean"])
            c[0] += resolved and mean < 0
            c[1] += resolved and mean > 0
            c[2] += 1
    return [Tally(row, *c) for row, c in counts.items()]


def _pct(x: float) -> str:
    return f"{100 * x:.2f}" if math.isfinite(x) else "–"


def _delta(delta: tuple[float, float, float] | None, resolved: bool) -> str:
    if delta is None:
        return "–"
    mean, low, high = delta
    text = f"{100 * mean:+.2f}" + ("" if math.isnan(low) else f" [{100 * low:+.2f}, {100 * high:+.2f}]")
    return f"**{text}**" if resolved else text


def short_study(study: str) -> str:
    """A study's title without its details: "MNIST-1D MLP (4,000 training samples)" → "MNIST-1D MLP"."""
    return re.split(r" \(|:|, ", study, maxsplit=1)[0]


def verdict(found: list[Cell], compact: bool = False, tally: list[Tally] | None = None) -> str:
    """A training-time row that beats the best post-hoc column everywhere; else CE as trained when it does (the
    post-hoc fit on these held-out labels hurts); else the row of ``tally`` with the most wins and no loss; else the
    post-hoc column, naming where a row won (``compact``: with the studies' short names)."""
    winners = [c for c in found if c.resolved]
    refs = sorted(dict.fromkeys(c.reference for c in found), key=lambda r: -sum(c.reference == r for c in found))
    if winners and len(winners) == len(found) and len({c.row for c in winners}) == 1:
        return (f"Use {winners[0].row}: it beats the best post-hoc column by a resolved margin in every regime "
                "measured here.")
    if all(c.raw_better for c in found):
        return ("Keep CE as trained, with no post-hoc map: fitted on these held-out labels, every post-hoc column "
                "is resolved worse than CE itself in every regime measured here.")
    safe = [t for t in tally or [] if t.wins and not t.losses]
    if safe:
        most = max(t.wins for t in safe)
        best = [t for t in safe if t.wins == most]
        names = " or ".join(PLAIN.get(t.row, t.row) for t in best)
        return (f"Use {names} rather than {' or '.join(refs)}: "
                f"{'it beats' if len(best) == 1 else 'each beats'} the best post-hoc column by a resolved margin in "
                f"{most} of {len(found)} regimes and loses to it by a resolved margin in none.")
    text = f"Use {' or '.join(refs)}" + ("" if compact else " (a post-hoc map of the CE run, fitted on the held-out split)")
    if not winners:
        return text + ": no training-time row beats the best post-hoc column by a resolved margin in any regime."
    where = "; ".join(f"{c.row} in {short_study(c.study) if compact else c.study}, {c.regime}" for c in winners)
    return (text + f" — a training-time row beats it by a resolved margin in {len(winners)} of {len(found)} regimes "
            f"({where}), not in all.")


def branch_markdown(results: Path, link: str, page: str, name: str, compact: bool = False) -> list[str]:
    """Every branch of ``page`` (its CSV under ``results``): the title, the table (full guide) and the verdict."""
    rows = read_page(results / f"{page}.csv")
    lines = []
    for kind, stem, title, metric, what in BRANCHES:
        if stem != page:
            continue
        found = cells(rows, kind, metric)
        if not found:
            continue
        seeds = min(c.n for c in found)
        tally = tallies(rows, kind, metric)
        if compact:  # one paragraph: the README keeps its size
            lines += [f"**{title}** ([{name}]({link}/{page}.md), {what}, {seeds}+ seeds): "
                      f"{verdict(found, True, tally)}", ""]
            continue
        lines += [f"**{title}** — [{name}]({link}/{page}.md), {what} %, {seeds}+ seeds per regime:", ""]
        lines += ["| data | regime | best post-hoc column | its value | CE as trained: Δ | best training-time "
                  "row | its value | Δ (points) [95% CI] |", "|---|---|---|---:|---:|---|---:|---:|"]
        lines += [f"| {c.study} | {c.regime} | {c.reference} | {_pct(c.reference_mean)} | "
                  f"{_delta(c.raw, c.raw_better)} | {c.row} | {_pct(c.row_mean)} | {_delta(c.delta, c.resolved)} |"
                  for c in found]
        lines += ["", verdict(found, tally=tally), ""]
    return lines


def regimes_markdown(results: str | Path, link: str, pages: Mapping[str, str], compact: bool = False) -> list[str]:
    """The branches of every regime page (CSV stem → name) in the spec's order; the full guide states the verdicts'
    rule once, before them."""
    out = []
    for page, name in pages.items():
        out += branch_markdown(Path(results), link, page, name, compact)
    return out if compact or not out else [RULE, ""] + out
