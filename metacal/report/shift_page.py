"""The shift results page of one regime: does calibrating during training beat temperature scaling once the
data moves? Markdown tables, a CSV of every cell and PNG figures, from a sweep whose runs were evaluated with
``python -m metacal.evaluate RUN --shift SUITE [--ood SET]`` (rows: :mod:`metacal.report.shift_rows`).

    python scripts/shift_report.py SWEEP --suite SUITE --out docs/results/NAME.md [--ood SET] [--seeds 0 1 2]
                                   [--methods ce focal2 ...] [--ood-sweep OTHER_SWEEP:SET]
                                   [--sweep-command "python scripts/sweep.py ..."] [--title TITLE]

Every number on the page is computed here from the runs' files; the page starts with the commands that
regenerate it. Exit code 2 on bad input, and then nothing is written.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from metacal.report.aggregate import MethodRow
from metacal.report.discussion import discussion_section
from metacal.report.paired import LEVEL, compare, interval_text
from metacal.run.layout import SWEEP_COMMAND_FILE, find_runs, read_sweep_command
from metacal.writable import page_problem
from metacal.report.shift_figures import sample_figures
from metacal.report.shift_guide import paired_csv
from metacal.report.shift_ood import load_ood_rows, ood_sweep_commands, parse_ood_sweep, trained_classes
from metacal.report.shift_rows import (METRICS, OOD, OOD_METRICS, OOD_SCORES, OVERS, Evaluated, ce_regime, cell,
                                       key, load, method_rows)

PROG = "python scripts/shift_report.py"
DETAIL_SEVERITIES = (0, 3)
DETAIL_METRICS = {"nll": "NLL", "brier": "Brier", "aurc": "AURC %", "augrc": "AUGRC %"}
TABLE_OOD_SCORES = OOD_SCORES[:3]  # msp, max_logit, energy on the page; entropy in the CSV too
REFERENCES = {"ce+ts": "CE + TS", "ce+ts_perturbed": "CE + perturbation TS"}
OVER_TEXT = {"all": "mean over all families", "held_out": "mean over the held-out families"}


@dataclass
class ShiftPage:
    """What was written, with the rows it was computed from (for callers and tests)."""

    markdown: Path
    csv: Path
    figures: dict[str, Path] = field(default_factory=dict)
    rows: list[MethodRow] = field(default_factory=list)
    picks: dict[Any, str] | None = None


def stat_text(stats: tuple[float, float, int], metric: str) -> str:
    """``"12.34 ± 0.56"`` (percent; NLL and Brier as they are, 4 decimals); the mean alone for one seed."""
    mean, std, n = stats
    if n == 0:
        return "—"
    scale, digits = (1.0, 4) if metric in ("nll", "brier") else (100.0, 2)
    text = f"{scale * mean:.{digits}f}"
    return text + (f" ± {scale * std:.{digits}f}" if math.isfinite(std) else "")


def _table(header: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    return lines + ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in body] + [""]


def regime_line(evaluated: Sequence[Evaluated]) -> str:
    """CE's clean test ECE and TS temperature (mean over seeds), and the direction of its miscalibration."""
    regime = ce_regime(evaluated)
    if regime is None:
        return "Regime: no CE runs, so no regime line."
    (ece, ece_sd, n), (t, t_sd, _) = regime
    side = "over-confident (T > 1)" if t > 1 else "under-confident (T < 1)" if t < 1 else "calibrated (T = 1)"
    ece_text = f"{100 * ece:.2f}" + (f" ± {100 * ece_sd:.2f}" if math.isfinite(ece_sd) else "")
    t_text = f"{t:.3f}" + (f" ± {t_sd:.3f}" if math.isfinite(t_sd) else "")
    return (f"Regime: CE's clean test ECE {ece_text}%, its temperature-scaling T = {t_text} (mean over {n} "
            f"seed{'s' * (n != 1)}): CE is {side} on clean data.")


def severity_table(rows: Sequence[MethodRow], over: str, severities: Sequence[int], metric: str = "ece") -> list[str]:
    """One row per method row: the metric at each severity, mean ± std over seeds."""
    body = [[r.label, *(stat_text(cell(r, key(over, s, metric)), metric) for s in severities)] for r in rows]
    return _table(["Method", *(f"severity {s}" for s in severities)], body)


def detail_table(rows: Sequence[MethodRow], severities: Sequence[int]) -> list[str]:
    """NLL, Brier, AURC, AUGRC at ``severities`` (held-out mean)."""
    header = ["Method", *(f"{name}, sev. {s}" for name in DETAIL_METRICS.values() for s in severities)]
    body = [[r.label, *(stat_text(cell(r, key("held_out", s, m)), m) for m in DETAIL_METRICS for s in severities)]
            for r in rows]
    return _table(header, body)


def paired_table(rows: Sequence[MethodRow], reference: MethodRow, severities: Sequence[int],
                 over: str = "held_out") -> list[str]:
    """Δ test ECE (points) of every other row against ``reference`` at each severity, with its paired t-interval;
    bold when resolved (the interval excludes 0)."""
    body = []
    for row in rows:
        if row is reference:
            continue
        cells = []
        for s in severities:
            d = compare(row, reference, key(over, s, "ece"))
            cells.append(f"**{interval_text(d)}**" if d.resolved else interval_text(d))
        n = max(compare(row, reference, key(over, s, "ece")).n for s in severities)
        body.append([row.label, str(n), *cells])
    return _table(["Method", "seeds", *(f"Δ ECE, sev. {s}" for s in severities)], body)


def ood_table(rows: Sequence[MethodRow]) -> list[str]:
    """AUROC and FPR95 (%) of msp, max_logit and energy, mean ± std, for the rows that have OOD numbers."""
    header = ["Method", *(f"{score} {name}" for score in TABLE_OOD_SCORES for name in ("AUROC", "FPR95"))]
    body = [[r.label, *(stat_text(cell(r, key(OOD, score, m)), m) for score in TABLE_OOD_SCORES
                        for m in ("auroc", "fpr95"))]
            for r in rows if cell(r, key(OOD, "msp", "auroc"))[2]]
    return _table(header, body)


def cells_csv(rows: Sequence[MethodRow], severities: Sequence[int], ood: str | None) -> str:
    """One line per (method row, over, severity, metric) with at least one seed: mean, std (ddof 1; empty for
    one seed), n — fractions, NLL in nats; OOD cells have over ``ood_<set>``, no severity, metric ``score.metric``."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["method", "label", "over", "severity", "metric", "mean", "std", "n"])
    cells = [(over, s, m, key(over, s, m)) for over in OVERS for s in severities for m in METRICS]
    if ood is not None:
        cells += [(f"ood_{ood}", "", f"{score}.{m}", key(OOD, score, m)) for score in OOD_SCORES for m in OOD_METRICS]
    for row in rows:
        for over, severity, metric, name in cells:
            mean, std, n = cell(row, name)
            if n:
                writer.writerow([row.method, row.label, over, severity, metric, repr(mean),
                                 repr(std) if math.isfinite(std) else "", n])
    return buf.getvalue()


def _figures(rows: Sequence[MethodRow], severities: Sequence[int], out: Path) -> dict[str, Path]:
    from metacal.report.shift_figures import plot_vs_severity

    made = {}
    for metric, name in (("ece", "test ECE (%)"), ("aurc", "AURC (%)")):
        series = {}
        for row in rows:
            stats = [cell(row, key("held_out", s, metric)) for s in severities]
            if all(n for _, _, n in stats):
                series[row.label] = (np.asarray(severities, dtype=float), np.array([m for m, _, _ in stats]),
                                     np.array([sd for _, sd, _ in stats]))
        if series:
            path = out.with_name(f"{out.stem}_{metric}_vs_severity.png")
            made[metric] = plot_vs_severity(series, path, f"{name}, held-out mean")
    return made


def commands(root: Path, suite: str, ood: str | None, sweep_command: str | None, command: str | None,
             extra: Sequence[str] = ()) -> list[str]:
    """The block of commands that regenerate the page: sweep, evaluate loop, ``extra`` (a second OOD sweep's), this
    report."""
    if sweep_command is None:
        sweep_command = read_sweep_command(root)
    loop = (f'for r in {shlex.quote(str(root))}/*/seed*; do python -m metacal.evaluate "$r" --shift '
            f"{shlex.quote(suite)}{' --ood ' + shlex.quote(ood) if ood else ''}; done")
    return ["Regenerate this page (numbers, CSV, figures): train the sweep, evaluate every run on the shift suite, "
            "then write the page:", "", "```", sweep_command or "# sweep command not recorded (--sweep-command)",
            loop, *extra, command or "# report command not recorded", "```", ""]


def build_shift_page(root: str | Path, suite: str, out: str | Path, ood: str | None = None,
                     seeds: Sequence[int] | None = None, sweep_command: str | None = None,
                     command: str | None = None, title: str | None = None,
                     discussion: str | Path | None = None, ood_sweep: str | None = None,
                     methods: Sequence[str] | None = None) -> ShiftPage:
    """Check every input, then write ``out`` (Markdown), ``out`` with .csv, ``<stem>_paired.csv``
    (:func:`metacal.report.shift_guide.paired_csv`, read by the method guide) and ``<stem>_*_vs_severity.png``;
    ``discussion`` (a Markdown file: the authors' reading of the numbers) is appended as the page's Discussion;
    ``ood_sweep`` (``SWEEP:SET``) adds the OOD table of another sweep's runs (:mod:`metacal.report.shift_ood`);
    ``methods`` (the sweep's method directories) reports those only, and the page names the ones left out."""
    root, out = Path(root), Path(out)
    if out.suffix.lower() != ".md":
        raise ValueError(f"--out must name a Markdown file ending in .md, got {out}")
    if discussion is not None and not Path(discussion).is_file():
        raise FileNotFoundError(f"--discussion file not found: {discussion}")
    evaluated = load(root, suite, ood, seeds, methods)
    other, other_set = parse_ood_sweep(ood_sweep) if ood_sweep else (None, None)
    other_rows = load_ood_rows(other, other_set, seeds, methods) if other else None
    left_out = sorted({r.method for r in find_runs(root)} - {e.run.method for e in evaluated}) if methods else []
    rows, picks = method_rows(evaluated)
    shift = evaluated[0].shift
    severities = [int(s) for s in shift["severities"]]
    held, fit = shift["held_out_families"], shift["fit_families"]
    out.parent.mkdir(parents=True, exist_ok=True)
    csv_path = out.with_suffix(".csv")
    csv_path.write_text(cells_csv(rows, severities, ood), encoding="utf-8")
    paired_path = out.with_name(f"{out.stem}_paired.csv")
    paired_path.write_text(paired_csv(rows, severities), encoding="utf-8")
    made = _figures(rows, severities, out)
    picked = None if picks is None else {seed: next((r.method for r in rows if r.label == label), None)
                                         for seed, label in picks.items()}
    samples_made = sample_figures(evaluated, suite, picked, out)

    lines = [f"# {title or f'Under shift: {root.name} ({suite})'}", "", *commands(
        root, suite, ood, sweep_command, command, ood_sweep_commands(other, other_set) if other else ())]
    lines += [f"**{regime_line(evaluated)}**", "",
              f"Suite `{suite}`: {len(shift['families'])} families × severities {severities[1:]} (0 = the clean test "
              f"set). Perturbation TS was fitted on validation perturbed by {', '.join(fit) or 'none'}; held out: "
              f"{', '.join(held) or 'none'}. Runs: `{root}`, {len(evaluated)} runs. Each row: mean ± sample std over "
              "seeds, in % (NLL in nats, Brier as a sum over classes); every family mean is computed here from the "
              f"per-family cells of each run's shift/{suite}.json. Raw = the network's softmax; + TS = temperature "
              "scaling fitted by NLL on clean validation; CE + perturbation TS and CE + ensemble TS as in "
              "metacal/shift/evaluate.py.", ""]
    if left_out:
        lines += [f"Not on this page (`--methods`): {', '.join(left_out)}, whose runs are in `{root}` but were left "
                  "out of the report.", ""]
    if picks is not None:
        lines += ["Grid pick: per seed, the run with the lowest validation ECE among CE and the fixed-γ focal "
                  "runs, raw — " + "; ".join(f"seed {s}: {label}" for s, label in picks.items()) + ".", ""]
    else:
        lines += ["No grid pick: it needs CE and at least two fixed-γ focal methods with validation ECE.", ""]
    for over in OVERS:
        lines += [f"## Test ECE against severity, {OVER_TEXT[over]}", "", *severity_table(rows, over, severities)]
    detail = [s for s in DETAIL_SEVERITIES if s in severities]
    lines += ["## NLL, Brier, AURC, AUGRC (held-out mean)", "", *detail_table(rows, detail)]
    for s in DETAIL_SEVERITIES:
        lines += [] if s in severities else [f"Severity {s} was not evaluated.", ""]
    lines += ["## Paired Δ test ECE over seeds (held-out mean)", "",
              f"Δ = row − reference on the same seed, in points, mean and its {100 * LEVEL:g}% paired t-interval "
              "(metacal/report/paired.py); **bold**: resolved, the interval excludes 0. Negative: lower ECE than "
              "the reference.", ""]
    for method, label in REFERENCES.items():
        reference = next((r for r in rows if r.method == method), None)
        lines += [f"### Against {label}", ""]
        lines += paired_table(rows, reference, severities) if reference else [f"No {label} row in these runs.", ""]
    if ood is not None:
        lines += [f"## OOD detection: {ood} against the clean test set, in %", "", *ood_table(rows),
                  "The OOD files hold the raw and + TS columns only.", ""]
    if other_rows is not None:
        other_csv = out.with_name(f"{out.stem}_ood_{other_set}.csv")
        other_csv.write_text(cells_csv(other_rows, [], other_set), encoding="utf-8")
        lines += [f"## OOD detection: {other_set}, runs trained on classes {trained_classes(other)}, in %", "",
                  f"Runs: `{other}`, the same methods and seeds trained on those classes only; OOD = the test images "
                  f"of the other classes. Cells: [{other_csv.name}]({other_csv.name}).", "", *ood_table(other_rows)]
    lines += ["## Figures", ""]
    for metric, path in made.items():
        caption = f"{'Test ECE' if metric == 'ece' else 'AURC'} against severity, held-out mean, mean ± std over seeds"
        lines += [f"![{caption}]({os.path.relpath(path, out.parent)})", ""]
    if samples_made:
        lines += [f"![Risk–coverage, clean and at severity 3, each method raw, seeds pooled]"
                  f"({os.path.relpath(samples_made['risk_coverage'], out.parent)})", "",
                  "Temperature scaling keeps the order of the confidences, so a calibrated column has its raw "
                  "method's curve.", ""]
        if "reliability_sev3" in samples_made:
            lines += [f"![Reliability at severity 3, held-out families and seeds pooled]"
                      f"({os.path.relpath(samples_made['reliability_sev3'], out.parent)})", ""]
    else:
        lines += ["Not drawn: risk–coverage curves and reliability diagrams under shift need the per-sample files "
                  f"that `python -m metacal.evaluate RUN --shift {suite}` writes (shift/{suite}_samples.npz); "
                  "some runs were evaluated before they existed.", ""]
    lines += [f"Every cell as fractions: [{csv_path.name}]({csv_path.name}); every paired difference against the "
              f"two references, ECE and error: [{paired_path.name}]({paired_path.name}).", ""]
    if discussion is not None:
        lines += discussion_section(discussion, out)
    out.write_text("\n".join(lines), encoding="utf-8")
    return ShiftPage(markdown=out, csv=csv_path, figures={**made, **samples_made}, rows=rows, picks=picks)


def parse_args(argv: list[str], prog: str = PROG) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    ap.add_argument("root", metavar="SWEEP", help="a sweep's --out: <method>/seed<S>/ evaluated with --shift SUITE")
    ap.add_argument("--suite", required=True, help="the shift suite the runs were evaluated on")
    ap.add_argument("--out", required=True, help="Markdown file to write (the CSV and PNGs go next to it)")
    ap.add_argument("--ood", default=None, metavar="SET", help="add the OOD table from shift/ood_<SET>.json")
    ap.add_argument("--ood-sweep", default=None, metavar="SWEEP:SET", help="add the OOD table of another sweep's runs "
                    "(e.g. trained on some classes, evaluated with --ood held_out_classes)")
    ap.add_argument("--seeds", type=int, nargs="+", default=None, help="seeds to report (default: all found)")
    ap.add_argument("--methods", nargs="+", default=None, metavar="METHOD",
                    help="the sweep's method directories to report (default: all found)")
    ap.add_argument("--sweep-command", default=None, help="the command that trained the sweep, printed on the page "
                    f"(default: SWEEP/{SWEEP_COMMAND_FILE} when present)")
    ap.add_argument("--title", default=None, help="page title")
    ap.add_argument("--discussion", default=None, metavar="MD", help="Markdown file appended as the page's Discussion")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    """CLI: write the page; one line and exit code 2 on bad input."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv, prog)
    import matplotlib

    matplotlib.use("Agg")
    command = shlex.join([*shlex.split(prog), *argv])
    try:
        if problem := page_problem(args.out):
            raise ValueError(f"--out {problem}")
        page = build_shift_page(args.root, args.suite, args.out, args.ood, args.seeds, args.sweep_command,
                                command, args.title, args.discussion, args.ood_sweep, args.methods)
    except (ValueError, FileNotFoundError) as exc:
        print(f"shift report: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(f"wrote {page.markdown}, {page.csv} and {len(page.figures)} figures")
    return 0


if __name__ == "__main__":
    sys.exit(main(prog="python -m metacal.report.shift_page"))
