"""The tables of a regime page (experiments/regimes/page.py): the regime line, a metric per row and regime, the paired
differences against the best reference, the epochs kept, the noise probe, and the generated answer."""

from __future__ import annotations

import math
from typing import Sequence

from metacal.report.paired import interval_text

from .numbers import StudyNumbers
from .rows import GRID, METHOD_LABELS, Variant, best_reference, compare, grid_choice, mean, values, variants
from .study import Page, Regime, Study


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join(["---"] + ["---:"] * (len(headers) - 1)) + "|"]
    out += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return out + [""]


def pct(x: float, digits: int = 2) -> str:
    return f"{100 * x:.{digits}f}" if math.isfinite(x) else "–"


def mean_sd(vals: dict[int, float]) -> str:
    if not vals:
        return "–"
    m = mean(vals)
    if len(vals) < 2:
        return f"{pct(m)} (n=1)"
    sd = math.sqrt(sum((x - m) ** 2 for x in vals.values()) / (len(vals) - 1))
    return f"{pct(m)} ± {pct(sd)}" + ("" if len(vals) >= 5 else f" (n={len(vals)})")


def direction(over: float) -> str:
    """Mean confidence − accuracy (a fraction) as the page states it: its sign in words and its size in points."""
    if not math.isfinite(over):
        return "–"
    return f"{'over-confident' if over > 0 else 'under-confident' if over < 0 else 'exact'} ({pct(over)})"


def _facts(numbers: StudyNumbers, regime: Regime, key) -> list[float]:
    return [v for runs in numbers[regime.name].values() for r in runs.values() if (v := key(r)) is not None]


def regime_table(study: Study, numbers: StudyNumbers, regimes: list[Regime]) -> list[str]:
    """Per regime: runs, held-out labels, realised noise, CE's error, T, what the data looks like, and CE's direction
    on the clean test set raw and after that T (TS fitted on held-out labels that are noisy or imbalanced can leave
    the clean, balanced test set mis-calibrated in either direction)."""
    rows = []
    for regime in regimes:
        stems = numbers[regime.name]
        ce = stems.get("ce", {})
        noise = [r.record.get("label_noise", {}).get("realised", {}) for r in ce.values()]
        train = [n["train"] for n in noise if "train" in n]
        val = [n["val"] for n in noise if "val" in n]
        temps = [r.temperature for r in ce.values() if math.isfinite(r.temperature)]
        over = mean(values(stems, Variant("ce"), "overconfidence"))
        over_ts = mean(values(stems, Variant("ce", "ts_nll"), "overconfidence"))
        held = "clean" if not train else (f"{regime.trusted} clean" if regime.trusted else "noisy")
        sizes = next((r.record.get("sizes", {}) for r in ce.values()), {})
        counts = next((r.record.get("class_counts", {}).get("train") for r in ce.values()), None)
        shape = f"{sizes.get('train', '?')} train, {sizes.get('val', 0) + sizes.get('meta_val', 0)} held out"
        if counts and "imbalance" in next(iter(ce.values())).record:
            shape += f"; classes {max(counts)} … {min(counts)}"
        bayes = [b for r in ce.values() if (b := r.variants["raw"].get("bayes_error")) is not None]
        if bayes:
            shape += f"; Bayes error {pct(sum(bayes) / len(bayes), 1)}%"
        rows.append([regime.label, shape, held, pct(sum(train) / len(train), 1) if train else "0",
                     pct(sum(val) / len(val), 1) if val else ("0" if not train else "–"),
                     mean_sd(values(stems, Variant("ce"), "error")),
                     f"{sum(temps) / len(temps):.3f} [{min(temps):.3f}, {max(temps):.3f}]" if temps else "–",
                     direction(over), direction(over_ts), str(sum(len(v) for v in stems.values()))])
    headers = ["Regime", "Data", "Held-out labels", "Train noise (%)", "Val noise (%)", "CE error (%)",
               "CE's T (mean [min, max])", "CE raw on clean test (conf − acc, points)",
               "CE + TS on clean test (conf − acc, points)", "Runs"]
    return table(headers, rows) + [
        "T: temperature scaling fitted by NLL on the run's own validation split (the labels it has); CE + TS is CE "
        "after that T, scored on the clean test labels. Noise: the "
        "realised share of flipped labels (metrics.json data.label_noise), mean over CE's seeds.", ""]


def metric_table(numbers: StudyNumbers, regimes: list[Regime], rows: list[Variant], metric: str) -> list[str]:
    body = [[v.label] + [mean_sd(values(numbers[r.name], v, metric)) for r in regimes] for v in rows]
    body = [b for b in body if any(c != "–" for c in b[1:])]
    return table(["Row", *(r.label for r in regimes)], body)


def paired_table(numbers: StudyNumbers, regimes: list[Regime], rows: list[Variant], spec: Page,
                 metric: str | None = None) -> list[str]:
    """Each row minus the best reference on ``metric`` (the page's headline by default), paired over seeds."""
    metric = metric or spec.headline
    refs = {r.name: best_reference(numbers[r.name], spec.references, metric) for r in regimes}
    headers = ["Row"] + [f"{r.label} (vs {refs[r.name].label if refs[r.name] else '–'})" for r in regimes]
    body = []
    for v in rows:
        cells = []
        for r in regimes:
            ref = refs[r.name]
            if ref is None or v == ref:
                cells.append("ref" if v == ref else "–")
                continue
            d = compare(numbers[r.name], v, ref, metric)
            text = interval_text(d)
            cells.append(f"**{text}**" if d.n > 1 and d.resolved else text)
        if any(c not in ("–",) for c in cells):
            body.append([v.label, *cells])
    return table(headers, body)


def epoch_table(numbers: StudyNumbers, regimes: list[Regime]) -> list[str]:
    body = []
    for stem in METHOD_LABELS:
        cells = []
        for r in regimes:
            stems = numbers[r.name]
            if stem == GRID:
                choice = grid_choice(stems)
                epochs = [stems[s][seed].epoch for seed, s in choice.items()]
            else:
                epochs = [run.epoch for run in stems.get(stem, {}).values()]
            cells.append(f"{sum(epochs) / len(epochs):.1f} [{min(epochs)}, {max(epochs)}]" if epochs else "–")
        body.append([METHOD_LABELS[stem], *cells])
    return table(["Method", *(r.label for r in regimes)], body)


def probe_table(numbers: StudyNumbers, regimes: list[Regime]) -> list[str]:
    """AUROC of flipped vs clean training labels at the selected epoch (metrics.json noise_detection)."""
    noisy = [r for r in regimes if any(run.noise_detection for runs in numbers[r.name].values()
                                       for run in runs.values())]
    if not noisy:
        return []
    body = []
    for stem, key, what in (("ce", "auroc_ce_loss", "CE: per-sample CE loss"),
                            ("flgamma_sece", "auroc_ce_loss", "FLγ-SECE: per-sample CE loss"),
                            ("flgamma_sece", "auroc_gamma", "FLγ-SECE: γ-Net's γ"),
                            ("flgamma_sece", "auroc_focal_weight", "FLγ-SECE: focal weight (1 − p̂_y)^γ")):
        cells = []
        for r in noisy:
            vals = {s: run.noise_detection[key] for s, run in numbers[r.name].get(stem, {}).items()
                    if key in run.noise_detection}
            cells.append(f"{mean(vals):.3f}" if vals else "–")
        body.append([what, *cells])
    return ["### Does a per-sample signal find the flipped labels? AUROC over the training set, mean over seeds", "",
            "Flipped = positive; 0.5: no information; below 0.5: the signal is lower on flipped samples. Measured at "
            "the selected epoch on the training split with the labels it carries (metacal/train/regime.py).", ""] + \
        table(["Signal", *(r.label for r in noisy)], body)


def answer_lines(study: Study, numbers: StudyNumbers, spec: Page) -> list[str]:
    """Per regime: the best reference, the training-time rows resolved better (Δ [CI]), and the best training-time
    row's Δ when none is."""
    lines = [f"**{study.title}**", ""]
    for regime in study.regimes:
        stems = numbers.get(regime.name)
        ref = None if not stems else best_reference(stems, spec.references, spec.headline)
        if ref is None:
            lines.append(f"- {regime.label}: no runs yet.")
            continue
        diffs = [(v, compare(stems, v, ref, spec.headline)) for v in variants(spec.references)
                 if v.trains_differently]
        diffs = [(v, d) for v, d in diffs if d.n > 0]
        better = [(v, d) for v, d in diffs if d.n > 1 and d.resolved and d.mean < 0]
        worse = sum(1 for _, d in diffs if d.n > 1 and d.resolved and d.mean > 0)
        ref_text = f"{ref.label} {pct(mean(values(stems, ref, spec.headline)))}%"
        worse_text = {0: "No training-time row is", 1: "1 training-time row is"}.get(
            worse, f"{worse} training-time rows are") + " resolved worse."
        n = min((d.n for _, d in diffs), default=0)
        raw = compare(stems, Variant("ce"), ref, spec.headline)
        raw_text = (f" CE as trained, with no post-hoc map: {interval_text(raw)} points"
                    + (" (resolved)." if raw.n > 1 and raw.resolved else ".")) if raw.n else ""
        if better:
            better.sort(key=lambda item: item[1].mean)
            listed = "; ".join(f"{v.label} {interval_text(d)}" for v, d in better)
            lines.append(f"- {regime.label} (best reference {ref_text}; {n}+ seeds): **yes** — {listed} points. "
                         f"{worse_text}{raw_text}")
        else:
            v, d = min(diffs, key=lambda item: item[1].mean) if diffs else (None, None)
            best = f"; the closest, {v.label}, {interval_text(d)} points" if v is not None else ""
            lines.append(f"- {regime.label} (best reference {ref_text}; {n}+ seeds): **no**{best}. "
                         f"{worse_text}{raw_text}")
    return lines + [""]
