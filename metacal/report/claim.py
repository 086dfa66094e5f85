"""Wang & Golebiowski 2024's central claim, checked on an aggregated results table, and the direction of each method's
miscalibration — the generated part of a results page's discussion.

Claim (Wang & Golebiowski 2024, §1/§5): FLγ-SECE reaches the lowest ECE among the training-time methods while its error
stays within 0.5 points of CE's. Checked on paired differences over seeds (:mod:`metacal.report.paired`): each
part is met or not on the mean difference over the shared seeds, and resolved or not by its 95% t-interval; every
number is read from the rows, the checkpoint of every run having been chosen on validation data
(``eval.select_by``).
"""

from __future__ import annotations

import math
from typing import Sequence

from metacal.report.aggregate import MethodRow
from metacal.report.labels import method_label
from metacal.report.paired import PairedDiff, compare, interval_text, judge, verdict_phrase

ERROR_MARGIN = 0.005  # "within 0.5 points of CE" (fractions)
ORACLE_ERROR_MARGIN = 0.01  # fixed-γ bar: the calibration gain may cost at most 1 point of error over CE
# the meta-learned γ methods held to that bar: the paper's one-step FLγ-SECE and the trajectory-level variant
META_GAMMA = ("flgamma_sece", "flgamma_sece_trajectory")


def fixed_gamma_rows(rows: Sequence[MethodRow]) -> list[MethodRow]:
    """The rows of focal loss at one fixed γ > 0 and no learner, in row order: the fixed-γ bar. Read from each
    row's method record (metacal/run/method.py), so any run's name or γ (2.5, a user's own config) counts."""
    return [r for r in rows if r.spec is not None and (r.spec.fixed_gamma or 0.0) > 0]


def find_row(rows: Sequence[MethodRow], method: str) -> MethodRow | None:
    """The row of a config stem, accepting the stem's aliases through its display label."""
    label = method_label(method)
    return next((r for r in rows if r.method == method or r.label == label), None)


def _pct(stats: tuple[float, float, int]) -> str:
    mean, std, n = stats
    if not math.isfinite(mean):
        return "n/a"
    return f"{100 * mean:.2f} ± {100 * std:.2f}%" if n > 1 and math.isfinite(std) else f"{100 * mean:.2f}%"


def check_claim(rows: Sequence[MethodRow], method: str = "flgamma_sece", baseline: str = "ce",
                margin: float = ERROR_MARGIN) -> dict[str, object] | None:
    """Numbers behind the claim. Descriptive, from means: ECE rank of ``method`` among all rows, the lowest-ECE
    method, the rows with a lower mean ECE (``better``). Judged on paired differences over seeds:
    ``ece_checks`` (ECE of ``method`` − ECE of each other row ≤ 0), ``error_check`` (error − ``baseline``'s
    error ≤ ``margin``), their verdicts ``lowest``/``within`` and the combined ``verdict``; ``lowest_ece``,
    ``error_within`` and ``supported`` are those verdicts' ``met``. None when a row is missing."""
    target, base = find_row(rows, method), find_row(rows, baseline)
    ranked = sorted((r for r in rows if math.isfinite(r.stats["ece"][0])), key=lambda r: r.stats["ece"][0])
    if target is None or base is None or target not in ranked or not math.isfinite(base.stats["error"][0]):
        return None
    rank = ranked.index(target) + 1
    ece_checks = {r.label: compare(target, r, "ece") for r in ranked if r is not target}
    error_check = compare(target, base, "error", null=margin)
    lowest, within = judge(ece_checks), judge({f"error vs {base.label}": error_check})
    verdict = judge({**ece_checks, f"error vs {base.label}": error_check})
    return {"target": target, "baseline": base, "best": ranked[0], "rank": rank, "n_methods": len(ranked),
            "better": ranked[: rank - 1], "ece_checks": ece_checks, "error_check": error_check,
            "lowest": lowest, "within": within, "verdict": verdict, "lowest_ece": lowest.met,
            "error_within": within.met, "supported": verdict.met}


def _paired_text(d: PairedDiff, what: str = "Δ") -> str:
    """``"paired Δ +0.19 [-0.10, +0.48] points over 5 shared seeds"``."""
    seeds = f"{d.n} shared seed" + ("s" if d.n != 1 else "")
    return f"paired {what} {interval_text(d)} points over {seeds}"


def claim_markdown(rows: Sequence[MethodRow], select_by: str = "error", schedule: str | None = None,
                   per_seed: bool = True, regime: bool = True) -> list[str]:
    """The "claim under test" section: each part with its paired result, the verdict, the fixed-γ bar, then the
    direction table. ``per_seed=False`` leaves out the fixed-γ bar's per-seed rows (:func:`oracle_per_seed`),
    ``regime=False`` the regime line (a page that states them elsewhere)."""
    lines = ["## The claim under test", "",
             f"Wang & Golebiowski 2024: {method_label('flgamma_sece')} reaches the lowest ECE among training-time "
             f"methods with error within {100 * ERROR_MARGIN:.1f} points of {method_label('ce')}. Each run's checkpoint is its best "
             f"validation-{select_by} epoch; no choice used test labels. Means ± std over seeds, and each part judged "
             "on the paired differences over seeds (Δ = FLγ-SECE − the other method, same seed; met or not on the "
             "mean Δ, resolved when the 95% t-interval lies on that side of the bar; see Paired comparisons):", ""]
    result = check_claim(rows)
    if result is None:
        return lines + ["Not checkable: the table lacks the FLγ-SECE or the CE row (or their numbers).", ""]
    t, b, best = result["target"], result["baseline"], result["best"]
    lowest = result["lowest"]
    lines += [
        f"- Error: {t.label} {_pct(t.stats['error'])} vs {b.label} {_pct(b.stats['error'])}; "
        f"{_paired_text(result['error_check'])}, bar +{100 * ERROR_MARGIN:.1f}: "
        f"{verdict_phrase(result['within'], 'within', 'NOT within')}.",
        f"- ECE: {t.label} {_pct(t.stats['ece'])}, rank {result['rank']} of {result['n_methods']} methods; "
        f"lowest: {best.label} {_pct(best.stats['ece'])}.",
    ]
    if result["better"]:
        lines.append("- Lower mean ECE than FLγ-SECE: "
                     + ", ".join(f"{r.label} ({100 * r.stats['ece'][0]:.2f}%)" for r in result["better"]) + ".")
    if result["ece_checks"]:
        deciding = result["ece_checks"].get(lowest.binding)
        lines.append(f"- Lowest ECE, paired against each of the {len(result['ece_checks'])} other methods: "
                     f"{verdict_phrase(lowest)}"
                     + (f"; deciding comparison: vs {lowest.binding}, {_paired_text(deciding)}" if deciding else "")
                     + ".")
    lines += ["", f"**Verdict on this data ({basis(rows, schedule)}): "
                  f"{verdict_phrase(result['verdict'], 'supported', 'not supported')}.**", ""]
    lines += oracle_markdown(rows, per_seed=per_seed, regime=regime)
    lines += direction_markdown(rows)
    return lines


def basis(rows: Sequence[MethodRow], schedule: str | None = None) -> str:
    """What a verdict rests on: seeds per method (and the schedule), how it is judged, with a warning when that is
    too little."""
    counts = sorted({r.num_runs for r in rows if r.num_runs})
    seeds = None
    if counts:
        seeds = (f"{counts[0]}–{counts[-1]} seeds" if len(counts) > 1
                 else f"{counts[0]} seed" + ("s" if counts[0] > 1 else "")) + " per method"
    text = ", ".join(filter(None, [seeds, schedule])) or "seeds and schedule unknown"
    text += "; paired by seed, 95% t-intervals"
    if counts and counts[0] < 2:
        text += "; a single seed: no spread, not a result"
    if schedule and "shortened" in schedule:
        text += "; shortened schedule: a smoke test of the pipeline more than a result"
    return text


def regime_sentence(rows: Sequence[MethodRow], baseline: str = "ce") -> str:
    """Which failure the baseline shows on this data: over-confident when TS-NLL fits T > 1."""
    base = find_row(rows, baseline)
    t = base.stats.get("t_nll", (math.nan, 0, 0))[0] if base is not None else math.nan
    if not math.isfinite(t):
        return "Regime: unknown (no temperature fitted for the CE runs)."
    direction = "OVER-confident" if t > 1 else "UNDER-confident"
    return (f"Regime: {base.label} is {direction} on this data (temperature fitted by TS-NLL on validation "
            f"T = {t:.3f}; ECE {_pct(base.stats['ece'])}).")


def best_fixed_gamma(rows: Sequence[MethodRow]) -> MethodRow | None:
    """The fixed-γ focal row (:func:`fixed_gamma_rows`) with the lowest mean VALIDATION ECE — never chosen on test
    numbers."""
    fixed = [r for r in fixed_gamma_rows(rows) if math.isfinite(r.stats.get("ece_val", (math.nan,))[0])]
    return min(fixed, key=lambda r: r.stats["ece_val"][0]) if fixed else None


def check_oracle(rows: Sequence[MethodRow], method: str = "flgamma_sece", baseline: str = "ce") -> dict | None:
    """The fixed-γ bar (a meta-learned γ must beat the γ a grid finds), on paired differences over seeds:
    ``method``'s test ECE ≤ that of the fixed-γ focal row chosen by lowest mean VALIDATION ECE, ECE ≤ 0.5 × the
    baseline's (Δ = ECE − 0.5 · ECE_baseline per seed), test error ≤ the baseline's + 1 point. ``checks`` holds the three PairedDiffs, ``verdict`` their judgement;
    ``ece_vs_fixed``/``ece_vs_half_ce``/``error_vs_ce`` and ``met`` are met-on-the-mean. None when a row is missing."""
    target, base, best = find_row(rows, method), find_row(rows, baseline), best_fixed_gamma(rows)
    if target is None or base is None or best is None:
        return None
    checks = {"ece_vs_fixed": compare(target, best, "ece"),
              "ece_vs_half_ce": compare(target, base, "ece", ref_scale=0.5),
              "error_vs_ce": compare(target, base, "error", null=ORACLE_ERROR_MARGIN)}
    verdict = judge(checks)
    return {"target": target, "baseline": base, "fixed": best, "checks": checks, "verdict": verdict,
            **{k: c.met for k, c in checks.items()}, "met": verdict.met}


def _oracle_results(rows: Sequence[MethodRow]) -> list[dict]:
    return [r for r in (check_oracle(rows, m) for m in META_GAMMA) if r is not None]


def oracle_per_seed(rows: Sequence[MethodRow]) -> list[str]:
    """The fixed-γ bar's per-seed rows (:func:`per_seed_markdown`); [] when the bar is not checkable."""
    results = _oracle_results(rows)
    return per_seed_markdown(results[0]["fixed"], [r["target"] for r in results]) if results else []


def oracle_markdown(rows: Sequence[MethodRow], per_seed: bool = True, regime: bool = True) -> list[str]:
    """The regime, then FLγ-SECE (and each meta-learned γ variant present) against the best fixed γ chosen on
    validation (the bar of ``check_oracle``), each part judged on paired differences over seeds, then its
    per-seed rows (``per_seed``)."""
    lines = [regime_sentence(rows), ""] if regime else []
    results = _oracle_results(rows)
    if not results:
        return lines
    f = results[0]["fixed"]
    lines += ["### Against the best fixed γ", "",
              f"Fixed-γ focal rows here: {', '.join(r.label for r in fixed_gamma_rows(rows))}; chosen on "
              f"mean validation ECE: {f.label} (val ECE {100 * f.stats['ece_val'][0]:.2f}%). Each part: met or not "
              "on the mean paired Δ over seeds, resolved when its 95% t-interval lies on that side of the bar.", ""]
    for result in results:
        t, b, c = result["target"], result["baseline"], result["checks"]
        part = lambda key: verdict_phrase(judge({key: c[key]}))  # noqa: E731
        lines += [f"{t.label}:", "",
                  f"- test ECE {_pct(t.stats['ece'])} ≤ {f.label}'s {_pct(f.stats['ece'])}: "
                  f"{_paired_text(c['ece_vs_fixed'])}: {part('ece_vs_fixed')}",
                  f"- test ECE ≤ 0.5 × {b.label}'s ({100 * 0.5 * b.stats['ece'][0]:.2f}%): "
                  f"{_paired_text(c['ece_vs_half_ce'], f'Δ(ECE − 0.5 × {b.label} ECE)')}: {part('ece_vs_half_ce')}",
                  f"- test error {_pct(t.stats['error'])} ≤ {b.label}'s + {100 * ORACLE_ERROR_MARGIN:.0f} point "
                  f"({100 * (b.stats['error'][0] + ORACLE_ERROR_MARGIN):.2f}%): {_paired_text(c['error_vs_ce'])}, "
                  f"bar +{100 * ORACLE_ERROR_MARGIN:.1f}: {part('error_vs_ce')}",
                  "", f"**Bar for {t.label}: {verdict_phrase(result['verdict'])}** (paired by seed, 95% t-intervals; "
                  f"per seed {'below' if per_seed else 'at the end of the page'}).", ""]
    return lines + (per_seed_markdown(f, [r["target"] for r in results]) if per_seed else [])


def per_seed_markdown(fixed: MethodRow, targets: Sequence[MethodRow]) -> list[str]:
    """Test ECE / error per seed of the chosen fixed γ and each meta-learned γ, and on how many shared seeds
    each has an ECE at most the fixed γ's (a paired view of the same comparison: same seed, same split)."""
    rows = [fixed, *targets]
    seeds = sorted({s for r in rows for s in r.per_run}, key=str)
    cell = lambda r, s: (f"{100 * r.per_run[s]['ece']:.2f} / {100 * r.per_run[s]['error']:.2f}"  # noqa: E731
                         if s in r.per_run else "–")
    lines = ["Test ECE / test error (%) per seed:", "", "| seed | " + " | ".join(r.label for r in rows) + " |",
             "|---|" + "---:|" * len(rows)]
    lines += [f"| {s} | " + " | ".join(cell(r, s) for r in rows) + " |" for s in seeds]
    lines.append("")
    for t in targets:
        shared = [s for s in seeds if s in t.per_run and s in fixed.per_run]
        wins = sum(t.per_run[s]["ece"] <= fixed.per_run[s]["ece"] for s in shared)
        lines.append(f"- {t.label}: test ECE ≤ {fixed.label}'s on {wins} of {len(shared)} seeds.")
    return lines + [""]


def direction_markdown(rows: Sequence[MethodRow]) -> list[str]:
    """Per method: ECE, mean confidence − accuracy (the sign ECE hides) and the temperature TS-NLL fits
    (T > 1: the logits were over-confident; T < 1: under-confident)."""
    lines = ["### Direction of the miscalibration", "",
             "| Method | ECE (%) | confidence − accuracy (points) | direction | T fitted by TS-NLL |",
             "|---|---:|---:|---|---:|"]
    for r in rows:
        over, _, n = r.stats.get("overconfidence", (math.nan, math.nan, 0))
        temp = r.stats.get("t_nll", (math.nan, math.nan, 0))[0]
        if n == 0 or not math.isfinite(over):
            continue
        direction = "over-confident" if over > 0 else "under-confident"
        t_cell = f"{temp:.3f}" if math.isfinite(temp) else "n/a"
        lines.append(f"| {r.label} | {100 * r.stats['ece'][0]:.2f} | {100 * over:+.2f} | {direction} | {t_cell} |")
    lines += ["", "Means over seeds, test set. ECE is |confidence − accuracy| per bin and so cannot tell the two "
              "failure modes apart; these columns can.", ""]
    return lines
