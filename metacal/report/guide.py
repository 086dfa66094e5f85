"""The method guide from the results pages' CSVs: the pages, their numbers and the full guide
(docs/method_guide.md: every regime, table and paired sentence); the README's compact block is
:mod:`metacal.report.guide_compact`, the files and the command line :mod:`metacal.report.guide_cli`.

Every number comes from ``docs/results/<page>.csv`` (means over seeds; ``ece_ts_nll_mean`` is the test ECE
after temperature scaling fitted by NLL on validation, ``t_nll_mean`` its temperature, ``s_per_epoch_mean``
the training wall time) and ``<page>_paired.csv`` (paired differences over seeds and whether their 95%
t-interval resolves them, :mod:`metacal.report.paired`). A page's regime is CE's: over-confident when
temperature scaling fits CE a T > 1, under-confident when T < 1 (as :func:`metacal.report.claim.regime_sentence`).
Which pages, rows and recommendable methods: a :class:`~metacal.report.guide_spec.GuideSpec` (a YAML file). A
method of its rows gets a row only when a page of the regime has it, so a method a later sweep adds appears
without a change. Reads CSVs only: no torch import.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from metacal.report.guide_spec import GuideSpec
from metacal.report.regime_guide import regimes_markdown
from metacal.report.shift_guide import shift_markdown

COMMAND = "python scripts/method_guide.py --readme README.md"
TS = "ce+ts"  # the pseudo-method "CE + temperature scaling": CE's row, ECE after TS, same error and cost

REGIME_TITLE = {"over": "When CE is over-confident", "under": "When CE is under-confident"}


@dataclass
class Page:
    """One results page: its CSV rows by method and its paired rows by (reference, method, metric)."""

    stem: str
    name: str
    rows: dict[str, dict[str, str]]
    paired: dict[tuple[str, str, str], dict[str, str]] = field(default_factory=dict)

    def value(self, method: str, column: str) -> float:
        """``column`` of ``method``'s row as a float (NaN when absent or empty); CE + TS is CE's row."""
        if method == TS:
            method, column = "ce", ("ece_ts_nll_mean" if column == "ece_mean" else column)
        text = self.rows.get(method, {}).get(column, "")
        return float(text) if text not in ("", None) else math.nan

    def label(self, method: str) -> str:
        """The page's display label of ``method`` (its CSV ``label`` column); "CE + TS" for the pseudo-method."""
        return "CE + TS" if method == TS else self.rows.get(method, {}).get("label") or method

    @property
    def temperature(self) -> float:
        """The temperature TS-NLL fits CE on validation (mean over seeds)."""
        return self.value("ce", "t_nll_mean")

    @property
    def regime(self) -> str | None:
        """``"over"`` when TS fits CE a T > 1, ``"under"`` when T < 1, None when unknown."""
        t = self.temperature
        return None if not math.isfinite(t) or t == 1 else ("over" if t > 1 else "under")

    def diff(self, reference: str, method: str, metric: str) -> tuple[float, bool] | None:
        """(mean paired difference method − reference as a fraction, resolved) or None when not in the CSV."""
        row = self.paired.get((reference, method, metric))
        if row is None or row.get("mean", "") == "":
            return None
        return float(row["mean"]), row.get("resolved") == "1"

    def lowest_other(self) -> str:
        """The method other than CE with the lowest mean test ECE."""
        candidates = [m for m in self.rows if m != "ce" and math.isfinite(self.value(m, "ece_mean"))]
        if not candidates:
            raise ValueError(f"method guide: {self.stem}.csv has no method besides CE with a test ECE")
        return min(candidates, key=lambda m: self.value(m, "ece_mean"))


def _read(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def load_pages(results: str | Path, pages: Mapping[str, str]) -> list[Page]:
    """The pages' CSVs under ``results``; a missing CSV is a FileNotFoundError naming it."""
    out = []
    for stem, name in pages.items():
        table, paired = Path(results) / f"{stem}.csv", Path(results) / f"{stem}_paired.csv"
        for path in (table, paired):
            if not path.is_file():
                raise FileNotFoundError(f"method guide: no results CSV {path} (regenerate the page with "
                                        "scripts/report.py)")
        rows = {r["method"]: r for r in _read(table)}
        if "ce" not in rows:
            raise ValueError(f"method guide: {table} has no CE row")
        out.append(Page(stem, name, rows, {(r["reference"], r["method"], r["metric"]): r for r in _read(paired)}))
    return out


def _pct(x: float) -> str:
    return f"{100 * x:.2f}" if math.isfinite(x) else "–"


def _delta(d: tuple[float, bool] | None, what: str = "") -> str:
    """``"ECE -11.14 points, resolved"`` from a paired difference (a fraction) and its resolution."""
    if d is None:
        return f"{what}n/a"
    return f"{what}{100 * d[0]:+.2f} points, {'resolved' if d[1] else 'unresolved'}"


def _join(items: Sequence[str], word: str = "and") -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" {word} " + items[-1]


def table_rows(regime: str, pages: Sequence[Page], methods: Mapping[str, Sequence[str]]) -> list[str]:
    """The regime's methods in table order: those configured that a page has, plus each page's lowest-ECE
    method after CE + TS."""
    wanted = list(methods.get(regime, ("ce", TS)))
    extra = [m for m in dict.fromkeys(p.lowest_other() for p in pages) if m not in wanted]
    at = wanted.index(TS) + 1 if TS in wanted else len(wanted)
    wanted[at:at] = extra
    return [m for m in wanted if m == TS or any(m in p.rows for p in pages)]


def table_markdown(methods: Sequence[str], pages: Sequence[Page]) -> list[str]:
    """Method | per page: test ECE %, test error %, s/epoch (× CE)."""
    head, rule = ["method"], ["---"]
    for p in pages:
        head += [f"{p.name}: test ECE %", "error %", "s/epoch (× CE)"]
        rule += ["---:"] * 3
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(rule) + "|"]
    for m in methods:
        cells = [next(p.label(m) for p in pages if m == TS or m in p.rows)]
        for p in pages:
            if m != TS and m not in p.rows:
                cells += ["–"] * 3
                continue
            s, s_ce = p.value(m, "s_per_epoch_mean"), p.value("ce", "s_per_epoch_mean")
            cost = f"{s:.2f} ({s / s_ce:.2f}×)" if math.isfinite(s) and s_ce > 0 else "–"
            cells += [_pct(p.value(m, "ece_mean")), _pct(p.value(m, "error_mean")), cost]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _on(page: Page) -> str:
    return f"on {page.name}"


def verdict(regime: str, pages: Sequence[Page], recommend: Mapping[str, Sequence[str]]) -> str:
    """What to use in ``regime``, by the paired differences against CE (one sentence)."""

    def lower(p: Page, m: str) -> bool:
        d = p.diff("ce", m, "ece")
        return d is not None and d[0] < 0 and d[1]

    every = "both pages" if len(pages) == 2 else "every page"
    if regime == "over":
        good = [m for m in recommend.get(regime, ()) if all(lower(p, m) for p in pages)]
        text = ("Use CE + temperature scaling fitted on validation data (it keeps CE's predicted classes: CE's "
                "error and cost)")
        if good:
            text += (f" or, at training time, {_join([pages[0].label(m) for m in good], 'or')}: each lowers test "
                     f"ECE against CE by a resolved margin on {every}.")
        else:
            text += "."
    else:
        beaters = sorted({p.label(m) for p in pages for (_, m, _) in p.paired if lower(p, m)})
        text = ("Use plain CE: no other method lowers its test ECE by a resolved margin." if not beaters else
                f"Use plain CE or {_join(beaters, 'or')}, which lower its test ECE by a resolved margin on some page.")
    return text


def use_sentence(regime: str, pages: Sequence[Page], recommend: Mapping[str, Sequence[str]]) -> str:
    """What to use, then the lowest-ECE method other than CE of each page against CE (paired)."""
    text = verdict(regime, pages, recommend)
    best = [f"{p.label(m)} {_on(p)} (vs CE: {_delta(p.diff('ce', m, 'ece'), 'ECE ')}; "
            f"{_delta(p.diff('ce', m, 'error'), 'error ')})" for p in pages for m in [p.lowest_other()]]
    return text + f" Lowest test ECE of any other training-time method: {_join(best)}."


def gamma_sentence(pages: Sequence[Page], method: str = "flgamma_sece") -> str | None:
    """``method`` against the better (lower mean test ECE) of CE and the page's fixed-γ reference, and its cost."""
    parts, costs = [], []
    for p in pages:
        if method not in p.rows:
            continue
        refs = {r for (r, m, _) in p.paired if m == method and r in p.rows}  # CE or a fixed γ, not CE + TS
        ref = min(refs, key=lambda r: p.value(r, "ece_mean")) if refs else None
        if ref is None:
            continue
        parts.append(f"{_pct(p.value(method, 'ece_mean'))}% vs {p.label(ref)}'s {_pct(p.value(ref, 'ece_mean'))}% "
                     f"{_on(p)} ({_delta(p.diff(ref, method, 'ece'), 'Δ ')})")
        costs.append(f"{p.value(method, 's_per_epoch_mean') / p.value('ce', 's_per_epoch_mean'):.2f}×")
    if not parts:
        return None
    label = pages[0].label(method) if method in pages[0].rows else method
    return (f"{label}, the paper's method, against the better of CE and fixed focal γ on each page: test ECE "
            f"{_join(parts)}, at {_join(costs)} CE's s/epoch.")


def regime_markdown(regime: str, pages: Sequence[Page], link: str, spec: GuideSpec) -> list[str]:
    """One regime: the line naming it (CE's TS temperature per page, with seeds), the table, two sentences."""
    sign = ">" if regime == "over" else "<"
    temps = _join([f"T = {p.temperature:.2f} on [{p.name}]({link}/{p.stem}.md) ({p.rows['ce'].get('n_runs', '?')} "
                   "seeds)" for p in pages])
    lines = [f"**{REGIME_TITLE[regime]}** — temperature scaling fits CE a T {sign} 1 on validation: {temps}.", ""]
    gamma = gamma_sentence(pages)
    text = use_sentence(regime, pages, spec.recommend) + (f" {gamma}" if gamma else "")
    return lines + table_markdown(table_rows(regime, pages, spec.rows), pages) + ["", text, ""]


def guide_markdown(results: str | Path, spec: GuideSpec, link: str | None = None, command: str = COMMAND) -> str:
    """The section's body (between the markers): both regimes from the CSVs under ``results``, then the shift
    block (:mod:`metacal.report.shift_guide`); links to the pages as ``<link>/<stem>.md`` (default: ``results``
    as given)."""
    loaded = load_pages(results, spec.pages)
    link = (link if link is not None else Path(results).as_posix()).rstrip("/")
    performance = (Path(link).parent / "performance.md").as_posix()
    lines = [f"*Generated from the results pages' CSVs ([{link}/]({link}/)); do not edit by hand. "
             f"Regenerate: `{command}`.*", "",
             "Train CE first (a `ce.yaml` config): the trainer's last lines give the temperature T that "
             "temperature scaling fits on validation — T > 1: CE is over-confident, T < 1: under-confident. "
             "The γ-Net meta-learner (FLγ-SECE, FLγ-DECE and the trajectory variant) is metacal's reproduction "
             "of Wang & Golebiowski 2024 (configs/quickstart_flgamma_sece.yaml), not what these results recommend; "
             "its rows show where it loses. Test ECE and error: means over seeds; Δ: paired difference over "
             "the same seeds, resolved when its 95% t-interval excludes 0. s/epoch: wall time during the "
             "sweeps on a shared 2-core CPU with other work running, so even losses as cheap as CE can show "
             f"ratios far from 1 (controlled per-step costs: [{performance}]({performance})).", ""]
    unknown = [f"{p.stem}.csv" for p in loaded if p.regime is None]
    if unknown:
        raise ValueError(f"method guide: no TS temperature of CE (t_nll_mean) in {', '.join(unknown)}")
    for regime in ("over", "under"):
        group = [p for p in loaded if p.regime == regime]
        if group:
            lines += regime_markdown(regime, group, link, spec)
    lines += shift_markdown(results, link, spec.shift_pages)
    lines += regimes_markdown(results, link, spec.regime_pages)
    return "\n".join(lines).rstrip("\n") + "\n"
