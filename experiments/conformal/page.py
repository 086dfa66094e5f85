"""docs/results/conformal_<study>.md: prediction-set size at the target coverage per training method, paired over seeds
against CE with the same score and column, and coverage under shift (experiments/conformal/numbers.py)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

import numpy as np

from metacal.atomic_io import write_text_atomic
from metacal.machine import machine_markdown
from metacal.report.discussion import discussion_section
from metacal.report.paired import PairedDiff, interval_text, paired_diff

from .numbers import RunSets, grid_choice, key
from .study import ALPHAS, GRID, GRID_STEMS, LABELS, METHODS, SCORES, SEVERITIES, SHIFT_ALPHA, Study

Runs = dict[str, dict[int, RunSets]]
COLUMN_LABELS = {"uncalibrated": "", "ts_nll": " + TS"}


def rows(runs: Runs) -> dict[tuple[str, str], dict[int, RunSets]]:
    """(method, column) → seed → run; the grid pick resolved per seed."""
    choice = grid_choice(runs, GRID_STEMS)
    out = {}
    for method in METHODS:
        seeds = {s: runs[choice[s]][s] for s in choice} if method == GRID else runs.get(method, {})
        for column in COLUMN_LABELS:
            if seeds:
                out[method, column] = seeds
    return out


def label(method: str, column: str) -> str:
    return LABELS[method] + COLUMN_LABELS[column]


def values(seeds: dict[int, RunSets], get: Callable[[RunSets], float]) -> dict[int, float]:
    return {s: get(r) for s, r in seeds.items() if math.isfinite(get(r))}


def size_getter(column: str, score: str, alpha: float) -> Callable[[RunSets], float]:
    return lambda r: r.clean[key(column, score, alpha)]["size_mean"]


def versus_ce(table: dict, method: str, column: str, score: str, alpha: float) -> PairedDiff:
    get = size_getter(column, score, alpha)
    return paired_diff(values(table[method, column], get), values(table["ce", column], get))


def mean_sd(vals: dict[int, float], scale: float = 1.0, digits: int = 3) -> str:
    if not vals:
        return "–"
    v = np.array(list(vals.values())) * scale
    return f"{v.mean():.{digits}f}" + (f" ± {v.std(ddof=1):.{digits}f}" if len(v) > 1 else "")


def size_table(table: dict, alpha: float) -> list[str]:
    lines = [f"### Mean set size at α = {alpha:g} (target coverage {1 - alpha:.0%}), mean ± sd over seeds; "
             "coverage % in brackets", "", "| Row | " + " | ".join(s.upper() for s in SCORES) + " |",
             "|---|" + "---:|" * len(SCORES)]
    for (method, column), seeds in table.items():
        cells = []
        for score in SCORES:
            cov = values(seeds, lambda r: r.clean[key(column, score, alpha)]["coverage"])
            cells.append(f"{mean_sd(values(seeds, size_getter(column, score, alpha)))} "
                         f"({100 * float(np.mean(list(cov.values()))):.1f})" if cov else "–")
        lines.append(f"| {label(method, column)} (n={len(seeds)}) | " + " | ".join(cells) + " |")
    return lines + [""]


def paired_table(table: dict, alpha: float) -> list[str]:
    lines = [f"### Set size against CE with the same score and column, α = {alpha:g}: Δ mean size [95% CI]", "",
             "Δ = row − CE (raw rows against CE, + TS rows against CE + TS) on the same seed. Bold: resolved.", "",
             "| Row | " + " | ".join(s.upper() for s in SCORES) + " |", "|---|" + "---:|" * len(SCORES)]
    for (method, column) in table:
        if method == "ce":
            continue
        cells = []
        for score in SCORES:
            d = versus_ce(table, method, column, score, alpha)
            text = interval_text(d, scale=1.0, digits=3)
            cells.append(f"**{text}**" if d.resolved else text)
        lines.append(f"| {label(method, column)} | " + " | ".join(cells) + " |")
    return lines + [""]


def worst_class_table(table: dict, alpha: float) -> list[str]:
    lines = [f"### Worst-class coverage % at α = {alpha:g}, mean over seeds", "",
             "| Row | " + " | ".join(s.upper() for s in SCORES) + " |", "|---|" + "---:|" * len(SCORES)]
    for (method, column), seeds in table.items():
        cells = [mean_sd(values(seeds, lambda r, s=score: r.clean[key(column, s, alpha)]["class_coverage_worst"]),
                         100, 1) for score in SCORES]
        lines.append(f"| {label(method, column)} | " + " | ".join(cells) + " |")
    return lines + [""]


def shift_coverage(seeds: dict[int, RunSets], column: str, score: str, severity: int) -> dict[int, float]:
    return {s: r.shift[key(column, score)][severity]["coverage"] for s, r in seeds.items()
            if key(column, score) in r.shift and severity in r.shift[key(column, score)]}


def shift_table(table: dict, study: Study) -> list[str]:
    lines = [f"### Coverage % under shift ({study.shift}, mean over its held-out families), α = {SHIFT_ALPHA:g}, "
             "mean over seeds", "", f"Target {1 - SHIFT_ALPHA:.0%}; severity 0 is the clean test split.", "",
             "| Row | score | " + " | ".join(f"sev {s}" for s in (0, *SEVERITIES)) + " |",
             "|---|---|" + "---:|" * (1 + len(SEVERITIES))]
    for (method, column), seeds in table.items():
        for score in SCORES:
            cells = [mean_sd(shift_coverage(seeds, column, score, s), 100, 1).split(" ±")[0]
                     for s in (0, *SEVERITIES)]
            if any(c != "–" for c in cells):
                lines.append(f"| {label(method, column)} | {score.upper()} | " + " | ".join(cells) + " |")
    return lines + [""]


def weighted_table(table: dict, study: Study) -> list[str]:
    """CE's sets under shift with and without the likelihood-ratio weights: coverage and mean size per severity."""
    seeds = table.get(("ce", "uncalibrated"), {})
    if not any(key("ts_nll_weighted", s) in r.shift for r in seeds.values() for s in SCORES):
        return []
    lines = [f"### Weighted sets under shift (CE, α = {SHIFT_ALPHA:g}, mean over seeds): coverage % / mean size", "",
             "Weights: a logistic domain classifier on the log-probabilities, validation split against each shifted "
             "cell (Tibshirani et al. 2019; docs/conventions.md#conformal-prediction-sets).", "",
             "| Row | score | " + " | ".join(f"sev {s}" for s in (0, *SEVERITIES)) + " |",
             "|---|---|" + "---:|" * (1 + len(SEVERITIES))]
    for column in COLUMN_LABELS:
        for score in SCORES:
            for variant, name in ((column, ""), (f"{column}_weighted", ", weighted")):
                cells = []
                for sev in (0, *SEVERITIES):
                    cov = shift_coverage(seeds, variant, score, sev)
                    size = {s: r.shift[key(variant, score)][sev]["size_mean"] for s, r in seeds.items()
                            if sev in r.shift.get(key(variant, score), {})}
                    cells.append(f"{100 * np.mean(list(cov.values())):.1f} / {np.mean(list(size.values())):.2f}"
                                 if cov else "–")
                lines.append(f"| {label('ce', column)}{name} | {score.upper()} | " + " | ".join(cells) + " |")
    return lines + [""] + domain_table(seeds)


def domain_table(seeds: dict[int, RunSets]) -> list[str]:
    """Per held-out family and severity (CE's runs, mean over seeds): how well the domain classifier tells the shifted
    inputs from the validation inputs (AUROC), and the share of shifted inputs whose weighted quantile is +∞."""
    families = sorted({k.split("|", 1)[1] for r in seeds.values() for k in r.shift if k.startswith("weights|")})
    if not families:
        return []
    lines = ["Domain classifier per held-out family (CE, mean over seeds): AUROC of shifted against validation "
             "inputs / % of shifted inputs whose weighted quantile is +∞ (every label in the set).", "",
             "| Family | " + " | ".join(f"sev {s}" for s in SEVERITIES) + " |", "|---|" + "---:|" * len(SEVERITIES)]
    for family in families:
        cells = []
        for sev in SEVERITIES:
            got = [r.shift[key("weights", family)][sev] for r in seeds.values()
                   if sev in r.shift.get(key("weights", family), {})]
            cells.append(f"{np.mean([g['auroc'] for g in got]):.2f} / {100 * np.mean([g['infinite'] for g in got]):.0f}"
                         if got else "–")
        lines.append(f"| {family} | " + " | ".join(cells) + " |")
    return lines + [""]


def weighted_answer(table: dict) -> list[str]:
    """At the highest severity, CE + TS: the weighted sets' coverage minus the unweighted, paired over seeds."""
    top, seeds = max(SEVERITIES), table.get(("ce", "ts_nll"), {})
    gains = {score: paired_diff(shift_coverage(seeds, "ts_nll_weighted", score, top),
                                shift_coverage(seeds, "ts_nll", score, top)) for score in SCORES}
    gains = {s: d for s, d in gains.items() if d.n}
    if not gains:
        return []
    return [f"- Weighted sets (Tibshirani et al. 2019, the ratio from a domain classifier) on CE + TS at severity "
            f"{top}: coverage gain over the unweighted sets, points, "
            + "; ".join(f"{s.upper()} {_marked(d, 100.0, 1)}" for s, d in gains.items()) + "."]


def best_ce(table: dict, score: str, alpha: float) -> str:
    """CE's column (raw or + TS) with the smaller mean set size for ``score`` at ``alpha``."""
    return min(COLUMN_LABELS, key=lambda c: float(np.mean(list(values(table["ce", c], size_getter(c, score, alpha))
                                                                 .values()))))


def answer(table: dict, study: Study) -> list[str]:
    """Per α and score: the rows with resolved smaller (and larger) sets than CE's better column; what TS does to
    CE's sets; the score that loses most coverage at the highest severity for CE + TS."""
    if ("ce", "uncalibrated") not in table:
        return [f"**{study.title}**: no runs yet.", ""]
    lines = [f"**{study.title}**", "",
             "Each row against CE's smaller sets of the two columns (CE or CE + TS, whichever has the smaller mean "
             "size for that score and α), paired over seeds:", ""]
    n = min(len(s) for s in table.values())
    for alpha in ALPHAS:
        for score in SCORES:
            ref = best_ce(table, score, alpha)
            ref_vals = values(table["ce", ref], size_getter(ref, score, alpha))
            smaller, larger = [], []
            for (method, column), seeds in table.items():
                if method == "ce":
                    continue
                d = paired_diff(values(seeds, size_getter(column, score, alpha)), ref_vals)
                if d.resolved:
                    (smaller if d.mean < 0 else larger).append(f"{label(method, column)} {interval_text(d, 1.0, 3)}")
            found = "; ".join(smaller) if smaller else "none"
            lines.append(f"- α = {alpha:g}, {score.upper()}, against {label('ce', ref)} ({n}+ seeds): resolved "
                         f"smaller sets: {found}; resolved larger: {len(larger)} rows.")
    for alpha in ALPHAS:  # what TS does to CE's sets (Xi et al., TMLR 2025: TS enlarges adaptive sets)
        ts = {score: paired_diff(values(table["ce", "ts_nll"], size_getter("ts_nll", score, alpha)),
                                 values(table["ce", "uncalibrated"], size_getter("uncalibrated", score, alpha)))
              for score in SCORES}
        lines.append(f"- TS on CE's sets, α = {alpha:g}: Δ mean size (CE + TS − CE) "
                     + "; ".join(f"{s.upper()} {_marked(d)}" for s, d in ts.items()) + ".")
    top = max(SEVERITIES)
    cover = {score: shift_coverage(table["ce", "ts_nll"], "ts_nll", score, top) for score in SCORES}
    cover = {s: v for s, v in cover.items() if v}
    if cover:
        means = {s: float(np.mean(list(v.values()))) for s, v in cover.items()}
        worst, best = min(means, key=means.get), max(means, key=means.get)
        d = paired_diff(cover[worst], cover[best])
        lines.append(f"- Under shift (CE + TS, α = {SHIFT_ALPHA:g}, severity {top}, held-out families): coverage "
                     + ", ".join(f"{s.upper()} {100 * c:.1f}%" for s, c in means.items())
                     + f"; {worst.upper()} − {best.upper()} {interval_text(d)} points"
                     + (" (resolved)." if d.resolved else " (not resolved: the scores lose coverage alike)."))
    return lines + weighted_answer(table) + [""]


def _marked(d: PairedDiff, scale: float = 1.0, digits: int = 3) -> str:
    text = interval_text(d, scale=scale, digits=digits)
    return f"**{text}**" if d.resolved else text


def grid_gamma(stem: str) -> str:
    """The focal γ of a grid run: ``focal`` → 1, ``focal3`` → 3."""
    return stem.removeprefix("focal") or "1"


def grid_label(stem: str) -> str:
    return "CE" if stem == "ce" else f"focal γ = {grid_gamma(stem)}"


def grid_lines(runs: Runs) -> list[str]:
    """Which runs the grid pick chose among (those of the grid that were trained: :func:`rows`), and its choice per
    seed."""
    choice = grid_choice(runs, GRID_STEMS)
    if not choice:
        return []
    grid = [s for s in GRID_STEMS if s in runs]
    picked = "; ".join(f"seed {seed}: {grid_label(stem)}" for seed, stem in sorted(choice.items()))
    return [f"Grid pick: per seed, the run with the lowest validation ECE among CE and focal γ = "
            f"{', '.join(grid_gamma(s) for s in grid if s != 'ce')} ({picked}).", ""]


def study_lines(study: Study, runs: Runs) -> list[str]:
    lines = [f"## {study.title}", ""]
    table = rows(runs)
    if not table:
        return lines + ["No finished runs yet; train them with:", "", "```", study.sweep_command(), "```", ""]
    ce = runs.get("ce", {})
    temps = values(ce, lambda r: r.temperature)
    errors = values(ce, lambda r: r.error)
    lines += [f"Regime: CE's TS temperature {mean_sd(temps, 1, 2)} (> 1: over-confident), test error "
              f"{mean_sd(errors, 100, 2)}%, over {len(ce)} seeds. Runs: `{study.runs}/<method>/seed<S>` "
              f"(config `{study.base}`).", "", *grid_lines(runs)]
    for alpha in ALPHAS:
        lines += size_table(table, alpha) + paired_table(table, alpha)
    lines += worst_class_table(table, SHIFT_ALPHA)
    lines += shift_table(table, study)
    lines += weighted_table(table, study)
    return lines


def page_lines(study: Study, runs: Runs, figure: str | None, page: Path | None = None) -> list[str]:
    lines = [f"# Prediction sets: {study.title}", "", "Regenerate this page (numbers, CSV and figure) with:", "",
             "```", f"python scripts/conformal_report.py report {study.name}", "```", "", machine_markdown(), "",
             ("The runs are the regime study's clean-label sweep of this config" if study.runs.parts[:2] ==
              ("runs", "regimes") else "The runs are this page's own sweep of this config")
             + "; train any that are missing with:",
             "", "```", study.sweep_command(), "```", "",
             "Split conformal sets (metacal.conformal; docs/conventions.md#conformal-prediction-sets): the quantile "
             "is fitted on each run's validation predictions, through the raw softmax or through the temperature "
             "fitted on the same predictions, and the sets are measured on the clean test split and on the held-out "
             "families of the shift suite. Every row meets its coverage target on clean data by construction, so "
             "smaller mean size at the same α is the better model. Randomised APS and RAPS (RAPS k_reg = 1, "
             "λ = 0.01).", "", "## The answer", "", *answer(rows(runs), study)]
    if figure:
        lines += [f"![coverage under shift and set size]({figure})", ""]
    lines += [f"Same numbers per seed: [conformal_{study.name}.csv](conformal_{study.name}.csv).", ""]
    lines += study_lines(study, runs)
    discussion = Path("docs/results/discussion") / f"conformal_{study.name}.md"
    if discussion.is_file():  # its links are written from its own folder: rebased onto the page's
        lines += discussion_section(discussion, page or Path("docs/results") / f"conformal_{study.name}.md")
    return lines


def page_csv(runs: Runs) -> str:
    out = ["method,column,score,alpha,seed,coverage,size_mean,class_coverage_worst,size_stratified_worst"]
    for (method, column), seeds in rows(runs).items():
        for seed, run in sorted(seeds.items()):
            for score in SCORES:
                for alpha in ALPHAS:
                    m = run.clean[key(column, score, alpha)]
                    out.append(f"{method},{column},{score},{alpha:g},{seed},{m['coverage']:.6f},{m['size_mean']:.6f},"
                               f"{m['class_coverage_worst']:.6f},{m['size_stratified_worst']:.6f}")
    return "\n".join(out) + "\n"


def write_page(study: Study, runs: Runs, out: Path) -> Path:
    from .figure import write_figure

    out.mkdir(parents=True, exist_ok=True)
    stem = f"conformal_{study.name}"
    figure = write_figure(rows(runs), out / f"{stem}.png") if rows(runs) else None
    write_text_atomic(out / f"{stem}.csv", page_csv(runs))
    path = out / f"{stem}.md"
    write_text_atomic(path, "\n".join(page_lines(study, runs, figure and f"{stem}.png", path)).rstrip() + "\n")
    return path
