"""The results page: read runs → aggregate → Markdown + CSVs (the table; the paired comparisons) + PNG figures
next to each other.

Every number on the page comes from the run directories or from the machine; nothing is typed in.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

import numpy as np

from metacal.report import figures
from metacal.report.aggregate import MethodRow, aggregate, column_keys
from metacal.report.claim import claim_markdown, oracle_per_seed, regime_sentence
from metacal.report.comparisons import paired_csv, paired_markdown
from metacal.report.discussion import discussion_section
from metacal.machine import machine_markdown
from metacal.report.posthoc_columns import check_calibrators, describe
from metacal.run.layout import Run, check_one_dataset, config_get, find_runs, read_sweep_command
from metacal.report.tables import csv_table, markdown_table

BIN_COUNTS = (10, 20, 50, 100, 200, 500, 1000)


@dataclass
class ReportResult:
    """Paths written and the aggregated rows (for callers and tests)."""

    markdown: Path
    csv: Path
    paired_csv: Path | None = None
    figures: dict[str, Path] = field(default_factory=dict)
    rows: list[MethodRow] = field(default_factory=list)


def _complete_by_method(runs: Sequence[Run]) -> dict[str, list[Run]]:
    out: dict[str, list[Run]] = {}
    for r in runs:
        if r.complete:
            out.setdefault(r.method, []).append(r)
    return out


def _reliability_entries(rows: Sequence[MethodRow], by_method: dict[str, list[Run]]):
    """Seed 0's test predictions per method (the lowest seed present if seed 0 is missing, said in the title)."""
    entries = []
    for row in rows:
        runs = [r for r in by_method.get(row.method, []) if r.has_predictions("test")]
        if not runs:
            continue
        run = next((r for r in runs if r.seed == 0), min(runs, key=lambda r: (r.seed is None, r.seed or 0)))
        pred = run.predictions("test")
        error = float((pred.probs.argmax(dim=1) != pred.labels).double().mean()) * 100
        entries.append((f"{row.label} (seed {run.seed}, error {error:.2f}%)", pred.probs.numpy(), pred.labels.numpy()))
    return entries


def _bins_curves(rows: Sequence[MethodRow], by_method: dict[str, list[Run]]):
    """Per method: ECE and MCE vs number of bins, mean ± std over the seeds with test predictions."""
    from metacal.metrics import ece_vs_bins

    curves = {}
    for row in rows:
        per_run = []
        for run in by_method.get(row.method, []):
            if run.has_predictions("test"):
                pred = run.predictions("test")
                per_run.append(ece_vs_bins(pred.probs, pred.labels, BIN_COUNTS))
        if not per_run:
            continue
        bins = np.asarray(per_run[0]["bins"], dtype=np.float64)
        curves[row.label] = {}
        for key in ("ece", "mce"):
            values = np.asarray([r[key] for r in per_run])
            std = values.std(axis=0, ddof=1) if len(per_run) > 1 else np.full(len(bins), np.nan)
            curves[row.label][key] = (bins, values.mean(axis=0), std)
    return curves


def _figures(stem: str, out_dir: Path, rows, runs, num_bins: int) -> tuple[dict[str, Path], list[str]]:
    """Draw every figure that has data; return the paths and a note for each one skipped."""
    by_method = _complete_by_method(runs)
    made: dict[str, Path] = {}
    notes: list[str] = []
    entries = _reliability_entries(rows, by_method)
    if entries:
        made["reliability"] = figures.plot_reliability_grid(entries, out_dir / f"{stem}_reliability.png", num_bins)
    else:
        notes.append("reliability diagrams: no run has predictions/test.npz")
    curves = _bins_curves(rows, by_method)
    if curves:
        made["bins"] = figures.plot_vs_bins(curves, out_dir / f"{stem}_ece_mce_vs_bins.png")
    else:
        notes.append("ECE/MCE vs bins: no run has predictions/test.npz")
    points = {r.label: (r.stats["error"][0], r.stats["error"][1], r.stats["ece"][0], r.stats["ece"][1])
              for r in rows if r.stats["error"][2] and r.stats["ece"][2]}
    if points:
        made["pareto"] = figures.plot_pareto(points, out_dir / f"{stem}_error_vs_ece.png")
    ece_series, g_mean, g_std = {}, {}, {}
    for row in rows:
        method_runs = by_method.get(row.method, [])
        if (s := figures.epoch_series(method_runs, "test", "ece")) is not None:
            ece_series[row.label] = s
        if (s := figures.epoch_series(method_runs, "test", "gamma_mean")) is not None:
            g_mean[row.label] = s
        if (s := figures.epoch_series(method_runs, "test", "gamma_std")) is not None:
            g_std[row.label] = s
    if ece_series:
        made["ece_epochs"] = figures.plot_epoch_curves(ece_series, out_dir / f"{stem}_test_ece_per_epoch.png",
                                                       "test ECE (%)")
    else:
        notes.append("test ECE per epoch: no history.json with test ECE")
    if g_mean or g_std:
        made["gamma"] = figures.plot_gamma(g_mean, g_std, out_dir / f"{stem}_gamma_per_epoch.png")
    else:
        notes.append("γ per epoch: no γ-Net run (no test gamma_mean/gamma_std in history.json)")
    return made, notes


def _config_values(runs: Sequence[Run], keys: dict[str, str]) -> str:
    """``"data: fashion_mnist; model: resnet18; epochs: 30"`` — the distinct values of dotted config keys."""
    parts = []
    for name, dotted in keys.items():
        values = sorted({str(v) for r in runs if (v := config_get(r.config, dotted)) is not None})
        if values:
            parts.append(f"{name}: {', '.join(values)}")
    return "; ".join(parts)


# what the page states about the schedule, from the runs' resolved configs
def schedule_phrase(runs) -> str:
    """``"30-epoch schedule"`` (``"6-epoch schedule of at most 100 steps per epoch"``) from the runs' configs,
    what the verdict is stated next to."""
    epochs = sorted({int(v) for r in runs if (v := config_get(r.config, "schedule.epochs")) is not None})
    caps = sorted({int(v) for r in runs if (v := config_get(r.config, "run.max_steps_per_epoch"))})
    text = "/".join(map(str, epochs)) + "-epoch schedule" if epochs else "unknown schedule"
    return text + (f" of at most {'/'.join(map(str, caps))} steps per epoch (shortened)" if caps else "")


SETUP_KEYS = {"data": "data.name", "model": "model.name", "epochs": "schedule.epochs",
              "lr milestones": "schedule.milestones", "iterations per epoch (cap)": "run.max_steps_per_epoch",
              "batch": "data.batch_size", "selection by validation": "eval.select_by"}

FIGURE_CAPTIONS = {
    "reliability": "Reliability diagrams on the test set (seed 0 of each method; Wang & Golebiowski 2024, Fig. 2)",
    "bins": "Test ECE (left) and MCE (right) against the number of equal-width bins, 10…1000 "
            "(Wang & Golebiowski 2024, Fig. 5)",
    "pareto": "Test error against test ECE, mean ± std over seeds, with the Pareto front "
              "(Wang & Golebiowski 2024, Fig. 10)",
    "ece_epochs": "Test ECE per epoch, mean ± std over seeds (Wang & Golebiowski 2024, Fig. 3a–b)",
    "gamma": "Mean and std of the per-sample γ on the test set per epoch, γ-Net runs (Wang & Golebiowski 2024, Fig. 3c–d)",
}


SPARSE_TEST_NOTE = ("Some runs evaluated the test set only at epochs where validation improved "
                    "(`eval.test_every_epoch: false`): each point is the mean over the seeds evaluated at that "
                    "epoch, and a method's line ends at its last evaluated epoch.")


def sparse_test_epochs(runs: Sequence[Run]) -> bool:
    """Whether some run skipped the test set on some epoch (its history record has ``test: null``)."""
    return any(rec.get("test") is None for run in runs for rec in run.history)


def _missing_notes(rows: Sequence[MethodRow]) -> list[str]:
    """Missing seeds, unfinished runs, runs without predictions and calibrators that refused a run."""
    notes = []
    for row in rows:
        if row.missing_seeds:
            word = "seed" if len(row.missing_seeds) == 1 else "seeds"
            notes.append(f"{row.label}: {word} {', '.join(map(str, row.missing_seeds))} missing")
        if row.incomplete:
            notes.append(f"{row.label}: run directories without metrics.json (unfinished or failed): "
                         + ", ".join(row.incomplete))
    from_saved = [row.label for row in rows if any(v.get("from_predictions") == 0.0 for v in row.per_run.values())]
    if from_saved:
        notes.append("no predictions/test.npz, numbers read from metrics.json and no post-hoc columns: "
                     + ", ".join(from_saved))
    lines = ["Missing or incomplete runs:", ""] + [f"- {n}" for n in notes] + [""] if notes else []
    refused = [f"{row.label} {note}" for row in rows for note in row.notes]
    if refused:
        lines += ["Post-hoc calibrators that refused a run (its \"ECE after …\" is NaN, left out of the mean and "
                  "marked `(n=k)`):", ""] + [f"- {n}" for n in refused] + [""]
    return lines


def _provenance(root: Path, runs: Sequence[Run], rows: Sequence[MethodRow], command: str | None) -> list[str]:
    """How the page was made: the command that regenerates it, the machine, the runs and the sweep's command."""
    n_complete = sum(r.complete for r in runs)
    lines = ["## How this page was made", "", "Regenerate this page (numbers, CSV and figures) with:", "", "```",
             command or "(command not recorded)", "```", "",
             f"Generated {datetime.now(timezone.utc).isoformat(timespec='seconds')} on:", "",
             machine_markdown().rstrip(), "",
             f"Runs: `{root}` — {len(rows)} methods, {n_complete} complete runs of {len(runs)} run directories."]
    if (sweep_cmd := read_sweep_command(root)) is not None:
        lines += ["", "The runs were produced by:", "", "```", sweep_cmd, "```"]
    return lines + [""]


def build_report(
    root: str | Path,
    out: str | Path,
    title: str | None = None,
    num_bins: int = 15,
    hb_bins: int = 15,
    command: str | None = None,
    expected_seeds: Sequence[int] | None = None,
    discussion: str | Path | None = None,
    calibrators: Sequence[str] | None = None,
) -> ReportResult:
    """Write ``out`` (Markdown), ``out`` with .csv, and ``<stem>_*.png`` next to it, from the runs under ``root``.

    ``discussion``: a Markdown file of interpretation written by people, appended as the "Discussion" section.
    ``calibrators``: registry names of the "ECE after …" columns (default all; ``()`` for none).
    """
    if num_bins < 1:
        raise ValueError(f"--bins must be a positive integer, got {num_bins}")
    calibrators = check_calibrators(calibrators)
    root, out = Path(root), Path(out)
    if out.suffix.lower() != ".md":
        raise ValueError(f"--out must name a Markdown file ending in .md, got {out}")
    runs = find_runs(root)
    if not runs:
        raise ValueError(f"no run directories under {root} (expected <config-stem>/seed<S>/ with metrics.json)")
    check_one_dataset(runs, root)
    if not any(r.complete for r in runs):
        raise ValueError(f"none of the {len(runs)} run directories under {root} has metrics.json with test metrics")
    rows = aggregate(runs, num_bins=num_bins, hb_bins=hb_bins, expected_seeds=expected_seeds,
                     calibrators=calibrators)
    keys = column_keys(calibrators)
    out.parent.mkdir(parents=True, exist_ok=True)
    csv_path = out.with_suffix(".csv")
    csv_path.write_text(csv_table(rows, keys), encoding="utf-8")
    paired_path = out.with_name(f"{out.stem}_paired.csv")
    paired_path.write_text(paired_csv(rows), encoding="utf-8")
    made, fig_notes = _figures(out.stem, out.parent, rows, runs, num_bins)

    title = title or f"Results: {root.name}"
    setup = _config_values(runs, SETUP_KEYS)
    # the answer first: the regime, the summary table, the verdicts; then the details, the provenance and,
    # last, the per-seed rows
    lines = [f"# {title}", "", f"**{regime_sentence(rows)}**", ""]
    lines += [f"From the runs' config.yaml: {setup}.", ""] if setup else []
    lines += ["## Test metrics, mean ± std over seeds", "", markdown_table(rows, keys=keys).rstrip(), ""]
    lines += [
        f"Error, ECE, MCE, ACE, classwise ECE in %, NLL in nats; equal-width ECE/MCE/classwise ECE and equal-mass "
        f"ACE with {num_bins} bins, on the test set of the checkpoint each run saved (best validation epoch). "
        "± is the sample standard deviation over seeds (none shown for a single run). "
        + describe(calibrators, hb_bins)
        + " s/epoch: mean of the trainer's per-epoch wall-clock `time_s` (history.json), measured "
        "on the machine that trained the run. `(n=k)`: that column has only k runs.",
        "",
        f"Same numbers as fractions: [{csv_path.name}]({csv_path.name}).",
        "",
    ]
    lines += _missing_notes(rows)
    select_by = ", ".join(sorted({str(v) for r in runs if (v := config_get(r.config, "eval.select_by"))})) or "error"
    lines += claim_markdown(rows, select_by, schedule_phrase(runs), per_seed=False, regime=False)
    lines += paired_markdown(rows, paired_path.name)
    if discussion is not None:
        lines += discussion_section(discussion, out)
    lines += ["## Figures", ""]
    for key, path in made.items():
        rel = os.path.relpath(path, out.parent)
        lines += [f"### {FIGURE_CAPTIONS[key]}", "", f"![{FIGURE_CAPTIONS[key]}]({rel})", ""]
        if key == "ece_epochs" and sparse_test_epochs(runs):
            lines += [SPARSE_TEST_NOTE, ""]
    if fig_notes:
        lines += ["Not drawn:", ""] + [f"- {n}" for n in fig_notes] + [""]
    lines += _provenance(root, runs, rows, command)
    per_seed = oracle_per_seed(rows)
    if per_seed:
        lines += ["## Per seed", "", *per_seed]
    out.write_text("\n".join(lines), encoding="utf-8")
    return ReportResult(markdown=out, csv=csv_path, paired_csv=paired_path, figures=made, rows=rows)

