"""One regime page (docs/results/<page>.md, its CSV and figure) from the study's runs: the regime of every sweep, the
headline metric of every row per regime, paired differences against the best post-hoc reference, the other
metrics, the epochs kept, the noise probe, and the generated answer to "does a training-time method beat the best
post-hoc column by a resolved margin?"."""

from __future__ import annotations

import csv
import io
import math
from datetime import datetime, timezone
from pathlib import Path

from tqdm.auto import tqdm

from metacal.machine import machine_markdown
from metacal.run.layout import read_sweep_command
from metacal.writable import page_problem

from .numbers import StudyNumbers, collect, count_runs
from .regime_tables import answer_lines, epoch_table, metric_table, paired_table, probe_table, regime_table
from .rows import Variant, compare, mean, values, variants
from .study import Page, Study, page, page_studies

METRIC_NAMES = {"ece": "ECE against the clean test labels", "error": "error (clean test labels)",
                "ece_noisy": "ECE against test labels noised like the training labels",
                "classwise_ece": "classwise ECE", "gap": "true-posterior gap E|p̂_ŷ − p*_ŷ|",
                "tv": "total variation to the true posterior E ½Σ|p̂ − p*|"}


def write_page(name: str, out: Path, cache: Path | None = None) -> Path:
    """Collect the runs of the page's studies (through ``cache``, a folder of experiments/regimes/numbers_cache.py
    entries, when given) and write ``out`` with its CSV and figure beside it."""
    spec = page(name)
    problem = page_problem(out)
    if problem:
        raise ValueError(problem)
    studies = page_studies(name)
    total = sum(count_runs(s) for s in studies)
    if total == 0:
        raise FileNotFoundError(f"no runs of page {name} under runs/regimes/; run python scripts/regime_study.py "
                                f"sweep --studies {' '.join(s.name for s in studies)} first")
    calibrators = tuple(dict.fromkeys(("ts_nll", *spec.references)))
    with tqdm(total=total, desc=f"reading {name} runs", leave=False) as bar:
        numbers = {s.name: collect(s, calibrators, bar, cache) for s in studies}
    from .figure import draw

    figure = out.with_name(f"{out.stem}.png")
    draw(spec, studies, numbers, figure)
    out.with_suffix(".csv").write_text(page_csv(spec, studies, numbers))
    out.write_text("\n".join(page_lines(spec, studies, numbers, out)) + "\n")
    return out


def page_lines(spec: Page, studies: list[Study], numbers: dict[str, StudyNumbers], out: Path) -> list[str]:
    lines = [f"# {spec.title}", "", "Regenerate this page (numbers, CSV and figure) with:", "", "```",
             f"python scripts/regime_study.py report {spec.name}", "```", "",
             f"Generated {datetime.now(timezone.utc).isoformat(timespec='seconds')} on:", "", machine_markdown(), "",
             "The runs were produced by `python scripts/regime_study.py sweep --studies "
             f"{' '.join(s.name for s in studies)}`, that is, one sweep per regime:", "", "```"]
    for s in studies:
        for regime in s.regimes:
            command = read_sweep_command(s.out(regime))
            if command:
                lines.append(command)
    lines += ["```", "", "## The answer", "",
              f"Headline metric: {METRIC_NAMES[spec.headline]}. Per regime, the best post-hoc reference is the CE + "
              f"calibrator row ({', '.join(Variant('ce', c).label for c in spec.references)}) with the lowest mean; "
              "a training-time row (any method other than CE, raw or + TS) beats it when the paired 95% t-interval "
              "over seeds of its difference lies below 0.", ""]
    for s in studies:
        lines += answer_lines(s, numbers[s.name], spec)
    lines += [f"![{spec.headline} per regime]({out.stem}.png)", "",
              f"Same numbers as fractions, with the paired comparisons against every reference: [{out.stem}.csv]"
              f"({out.stem}.csv).", ""]
    for s in studies:
        lines += study_lines(spec, s, numbers[s.name])
    discussion = Path("docs/results/discussion") / f"{spec.name}.md"
    if discussion.is_file():
        lines += ["## Discussion", "", discussion.read_text().strip(), ""]
    return lines


def study_lines(spec: Page, study: Study, numbers: StudyNumbers) -> list[str]:
    regimes = [r for r in study.regimes if r.name in numbers]
    lines = [f"## {study.title}", "", f"Config: `{study.base}` with each regime's `--set` (above).", ""]
    if not regimes:
        return lines + ["No finished runs yet.", ""]
    lines += ["### Regime", ""]
    lines += regime_table(study, numbers, regimes)
    rows = variants(spec.references)
    lines += [f"### {METRIC_NAMES[spec.headline][0].upper() + METRIC_NAMES[spec.headline][1:]} (%), mean ± sd over "
              "seeds", ""]
    lines += metric_table(numbers, regimes, rows, spec.headline)
    lines += [f"### Paired against the best post-hoc reference: Δ {spec.headline} (points) [95% CI]", "",
              "Per regime the reference is the CE + calibrator row with the lowest mean (named in the header); "
              "Δ = row − reference on the same seed (same split, noise draw, initial weights and batch order). "
              "Bold: resolved (the interval excludes 0).", ""]
    lines += paired_table(numbers, regimes, rows, spec)
    for metric in spec.metrics:
        if metric == spec.headline or not any(metric in r.variants["raw"] for st in numbers.values()
                                               for runs in st.values() for r in runs.values()):
            continue
        lines += [f"### {METRIC_NAMES[metric][0].upper() + METRIC_NAMES[metric][1:]} (%), mean ± sd", ""]
        lines += metric_table(numbers, regimes, rows, metric)
        if metric in spec.paired:
            lines += [f"### Paired against the best post-hoc reference on {METRIC_NAMES[metric]}: Δ {metric} (points) "
                      "[95% CI]", "", "As above, with the reference chosen on this metric.", ""]
            lines += paired_table(numbers, regimes, rows, spec, metric)
    lines += ["### Epoch kept (selected by validation error on the run's own validation labels), mean over seeds",
              ""]
    lines += epoch_table(numbers, regimes)
    lines += probe_table(numbers, regimes)
    return lines


def page_csv(spec: Page, studies: list[Study], numbers: dict[str, StudyNumbers]) -> str:
    """study (and title), regime (label, kind), row (label), metric, n, mean, sd; then for each reference (CE + a
    calibrator): the paired Δ mean, low, high, p, resolved — what the method guide reads
    (metacal/report/regime_guide.py)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    refs = [Variant("ce", c) for c in spec.references]
    header = ["study", "study_title", "regime", "regime_label", "kind", "row", "row_label", "metric", "n", "mean",
              "sd"]
    for ref in refs:
        header += [f"vs_{ref.key}_{k}" for k in ("mean", "low", "high", "p", "resolved")]
    writer.writerow(header)
    num = lambda x: repr(float(x)) if math.isfinite(x) else ""  # noqa: E731
    for s in studies:
        for regime in s.regimes:
            stems = numbers[s.name].get(regime.name)
            if not stems:
                continue
            for v in variants(spec.references):
                for metric in spec.metrics:
                    vals = values(stems, v, metric)
                    if not vals:
                        continue
                    m = mean(vals)
                    sd = math.sqrt(sum((x - m) ** 2 for x in vals.values()) / (len(vals) - 1)) if len(vals) > 1 \
                        else math.nan
                    row = [s.name, s.title, regime.name, regime.label, regime.kind, v.key, v.label, metric, len(vals),
                           num(m), num(sd)]
                    for ref in refs:
                        d = compare(stems, v, ref, metric)
                        low, high = d.interval if d.n > 1 else (math.nan, math.nan)
                        row += [num(d.mean) if d.n else "", num(low), num(high), num(d.p_value) if d.n > 1 else "",
                                int(d.resolved) if d.n > 1 else ""]
                    writer.writerow(row)
    return buf.getvalue()

