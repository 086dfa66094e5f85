"""The automatic γ against the γ grid a user would otherwise run, seed by seed, from a sweep's run directories.

Per seed, the grid pick is the fixed-γ run (CE = γ 0, focal γ = 1…5) with the lowest VALIDATION ECE at its
selected epoch; the automatic γ's test ECE and error are compared with the pick's (paired over seeds, 95%
t-interval), and so are the first automatic method + temperature scaling, CE + temperature scaling, AdaFocal
and dual focal where the sweep has them. A last table sets the γ the automatic run trained its selected network
with beside the root a fixed γ would have: the γ at which the grid's validation gap mean(confidence −
1[correct]) crosses 0, interpolated between grid points (predictions/val.npz of each grid run). Cost is not
compared here: a sweep shares the machine, so its wall times are not comparable; scripts/bench_auto.py
measures it side by side.

    python scripts/auto_vs_grid.py runs/sweep_m1o [--auto auto_gamma "lr x3=runs/m1o_lr3/auto_gamma"] [--out FILE]

``--auto`` takes method stems of the sweep, or LABEL=DIR for runs elsewhere (DIR holds seed<S>/ run folders).
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from pathlib import Path
from typing import Iterable

from metacal.metrics import overconfidence
from metacal.report.discussion import discussion_text
from metacal.report.labels import method_label
from metacal.run.layout import Run, RunPaths, read_json, read_run, read_sweep_command
from metacal.report.paired import interval_text, paired_diff, resolved_text
from metacal.writable import page_problem

OTHERS = ("adafocal", "dual_focal")


def finished(folder: Path) -> dict[int, Run]:
    """seed → the finished run of ``folder``/seed<S> (metacal.run_layout reads it)."""
    runs = (read_run(path) for path in sorted(folder.glob("seed*")) if path.is_dir())
    return {run.seed: run for run in runs if run.finished and run.metrics and run.seed is not None}


def grid_gammas(sweep: Path) -> dict[str, float]:
    """Folder → γ of the sweep's fixed-γ focal runs (CE: γ 0), in γ order. Read from each run's method record
    (metacal/method.py), so a folder of any name, at any γ, joins the grid."""
    found = {}
    for folder in sorted(p for p in sweep.iterdir() if p.is_dir()) if sweep.is_dir() else []:
        spec = next((run.spec for run in finished(folder).values() if run.spec is not None), None)
        if spec is not None and spec.fixed_gamma is not None:
            found[folder.name] = spec.fixed_gamma
    return dict(sorted(found.items(), key=lambda item: item[1]))


def gap_root(gaps: dict[float, float]) -> float:
    """The γ at which a gap that falls as γ rises crosses 0: linear between the two grid points around its first
    sign change from > 0 to ≤ 0; the grid's first γ when the gap is ≤ 0 there already, ``inf`` when it never
    crosses (the root lies beyond the grid)."""
    points = sorted(gaps.items())
    if points[0][1] <= 0:
        return points[0][0]
    for (g0, d0), (g1, d1) in zip(points, points[1:]):
        if d1 <= 0:
            return g0 + (g1 - g0) * d0 / (d0 - d1)
    return math.inf


def load(folder: Path, gaps: bool = False) -> dict[int, dict]:
    """seed → {val_ece, ece, error, ece_ts, t, gamma, moves, reversals, z, measured_gap, val_gap, test_gap} of
    each finished run in ``folder``/seed<S>. For an automatic run: the updates that raised or lowered the scalar (history's
    ``auto_decision``; a lower at the range's end counts), those opposite in direction to the previous move (the
    root was crossed, or the gap swung), and the selected network's gap in SE (``auto.gap_selected`` /
    ``auto.gap_se_selected``) and that gap itself (``measured_gap``); 0, 0 and None for any other run. ``val_gap``
    and ``test_gap`` (read only when ``gaps`` is asked for): the over-confidence mean(confidence) − accuracy of the
    selected network's validation and test predictions (None without predictions/<split>.npz)."""
    out = {}
    for seed, run in finished(folder).items():
        m, auto = run.metrics, run.metrics.get("auto") or {}
        moved = [d for d in (h["train"].get("auto_decision", 0.0) for h in run.history or []) if d]
        se = auto.get("gap_se_selected")
        out[seed] = {"val_ece": m["val"]["ece"], "ece": m["test"]["ece"], "error": m["test"]["error"],
                     "ece_ts": m["test_after_ts"]["ece"], "t": m["test_after_ts"]["temperature"],
                     "gamma": auto.get("selected"), "moves": len(moved),
                     "reversals": sum(a != b for a, b in zip(moved, moved[1:])),
                     "z": auto["gap_selected"] / se if se else None, "val_gap": None, "test_gap": None,
                     "measured_gap": auto.get("gap_selected"), "at_limit": auto.get("at_limit"),
                     "held": auto.get("held")}
        for split in ("val", "test") if gaps else ():
            if run.has_predictions(split):
                predictions = run.predictions(split)
                out[seed][f"{split}_gap"] = float(overconfidence(predictions.probs, predictions.labels))
    return out


#: the moves table's columns after the method: (load() key, scale, format); the gaps in points
MOVES_COLUMNS = (("moves", 1.0, ".1f"), ("reversals", 1.0, ".1f"), ("z", 1.0, "+.2f"), ("measured_gap", 100.0, "+.2f"),
                 ("val_gap", 100.0, "+.2f"), ("test_gap", 100.0, "+.2f"))


def mean_text(values: list[float | None], scale: float = 1.0, form: str = "+.2f") -> str:
    """scale × the mean of the values that are not None, formatted; "–" when there are none."""
    known = [v for v in values if v is not None]
    return format(scale * sum(known) / len(known), form) if known else "–"


def trajectories(folder: Path) -> dict[int, tuple[list[dict], int]]:
    """seed → (history's train rows, selected epoch) of each finished run in ``folder``/seed<S>."""
    return {seed: ([h["train"] for h in run.history], run.metrics["epoch"])
            for seed, run in finished(folder).items() if run.history}


def figure(auto: Path, adafocal: Path, path: Path, title: str) -> None:
    """γ per epoch of the automatic γ (the value each epoch trained with; ● the selected epoch), its measured
    gap with the ±k·SE hold band, and AdaFocal's per-bin γ (min–max band and mean) per epoch, seed by seed; the
    AdaFocal panel only where the sweep has AdaFocal runs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    adafocal_runs = {seed: (rows, selected) for seed, (rows, selected) in sorted(trajectories(adafocal).items())
                     if "adafocal_gamma_mean" in rows[0]}
    panels = 3 if adafocal_runs else 2
    fig, axes = plt.subplots(1, panels, figsize=(5 * panels, 4))
    for seed, (rows, selected) in sorted(trajectories(auto).items()):
        if "auto_gamma_trained" not in rows[0]:  # not a focal automatic γ
            continue
        epochs = range(1, len(rows) + 1)
        line, = axes[0].plot(epochs, [r["auto_gamma_trained"] for r in rows], label=f"seed {seed}")
        axes[0].plot([selected], [rows[selected - 1]["auto_gamma_trained"]], "o", color=line.get_color())
        gap = [100 * r["auto_gap"] for r in rows]
        band = [100 * r["auto_band"] for r in rows]
        axes[1].plot(epochs, gap, color=line.get_color())
        axes[1].fill_between(epochs, [-b for b in band], band, color=line.get_color(), alpha=0.08)
    for seed, (rows, selected) in adafocal_runs.items():
        epochs = range(1, len(rows) + 1)
        line, = axes[2].plot(epochs, [r["adafocal_gamma_mean"] for r in rows], label=f"seed {seed}")
        axes[2].fill_between(epochs, [r["adafocal_gamma_min"] for r in rows], [r["adafocal_gamma_max"] for r in rows],
                             color=line.get_color(), alpha=0.1)
    axes[0].set(title="automatic γ (● selected epoch)", xlabel="epoch", ylabel="γ")
    axes[1].set(title="its measured gap, % (shaded: ±k·SE hold band)", xlabel="epoch",
                ylabel="confidence − accuracy")
    axes[1].axhline(0, color="k", lw=0.5)
    if adafocal_runs:
        axes[2].set(title="AdaFocal: per-bin γ (mean; shaded min–max)", xlabel="epoch", ylabel="γ")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def root_table(grid: dict[str, dict[int, dict]], gammas: dict[str, float], seeds: list[int], pick: dict[int, str],
               auto: tuple[str, dict[int, dict]]) -> list[str]:
    """Per seed: the grid pick's γ, the fixed-γ root of the validation gap (:func:`gap_root`) and the γ the first
    automatic method trained its selected network with; a mean row (the roots' mean over the seeds whose root lies
    inside the grid). Empty when the grid has CE alone or a grid run lacks val predictions."""
    gaps = {s: {gammas[name]: runs[s]["val_gap"] for name, runs in grid.items()} for s in seeds}
    if len(grid) < 2 or any(g is None for per_seed in gaps.values() for g in per_seed.values()):
        return []
    label, runs = auto
    roots = {s: gap_root(gaps[s]) for s in seeds}
    top = max(gammas[name] for name in grid)
    shown = lambda x: "–" if x is None else f"> {top:g}" if math.isinf(x) else f"{x:.2f}"  # noqa: E731
    lines = ["", f"Where the grid's own root lies: per seed, the γ at which the fixed-γ runs' validation gap "
             f"mean(confidence − 1[correct]) crosses 0 (interpolated between grid points), beside the grid pick and "
             f"the γ {label} trained its selected network with (the mean row's root: over the seeds whose root lies "
             f"inside the grid):", "",
             f"| seed | grid pick γ | fixed-γ root | {label}: γ at selection |", "|---:|---:|---:|---:|"]
    for s in seeds:
        lines.append(f"| {s} | {gammas[pick[s]]:g} | {shown(roots[s])} | {shown(runs.get(s, {}).get('gamma'))} |")
    finite = [r for r in roots.values() if math.isfinite(r)]
    autos = [runs[s]["gamma"] for s in seeds if s in runs and runs[s].get("gamma") is not None]
    mean = lambda xs: f"{sum(xs) / len(xs):.2f}" if xs else "–"  # noqa: E731
    lines.append(f"| mean | {mean([gammas[pick[s]] for s in seeds])} | {mean(finite)} | {mean(autos)} |")
    return lines


def trained_on(folders: Iterable[Path]) -> str:
    """The line naming the devices, CPU models (where recorded) and CPU kernel paths the runs under ``folders``
    trained on (their runtime.json): the same seed trains to slightly different numbers on another path, and
    on another CPU vendor even on the same path (README, Quickstart)."""
    paths: set[str] = set()
    for folder in folders:
        for run in Path(folder).glob("**/seed*/"):
            for session in (read_json(RunPaths(run).runtime) or {}).get("sessions", []):
                kernels, cpu = session.get("cpu_kernels"), session.get("cpu")
                where = f"{session.get('device', '?')}, {cpu}" if cpu else session.get("device", "?")
                paths.add(f"{where}, CPU kernels {kernels}" if kernels else f"{where}, CPU kernels not recorded")
    if not paths:
        return "Trained on: not recorded (no runtime.json)."
    return ("Trained on: " + "; ".join(sorted(paths)) + " (the runs' runtime.json; another kernel path trains the "
            "same seed to slightly different numbers).")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("sweep", type=Path)
    p.add_argument("--auto", nargs="+", default=["auto_gamma"], help="the automatic-γ method stems to compare")
    p.add_argument("--out", type=Path, help="also write the markdown here")
    p.add_argument("--title", default=None, help="the page's heading (with --out)")
    p.add_argument("--discussion", type=Path, help="a markdown file appended under the tables (with --out; its "
                                                 "relative links are rebased from its folder onto the page's)")
    p.add_argument("--adafocal", type=Path,
                   help="AdaFocal runs whose history holds its per-bin γ (default: the sweep's)")
    args = p.parse_args(argv)
    if args.out is not None and (problem := page_problem(args.out)):
        print(f"auto_vs_grid: error: --out {problem}", file=sys.stderr)
        return 2
    gammas = grid_gammas(args.sweep)
    grid = {name: runs for name in gammas if (runs := load(args.sweep / name, gaps=True))}
    ce_name = next((name for name in grid if gammas[name] == 0), None)
    seeds = sorted(set.intersection(*(set(r) for r in grid.values()))) if ce_name is not None else []
    if not seeds:
        print(f"auto_vs_grid: error: {args.sweep} has no finished CE run (a folder of seed<S>/ runs whose config trains loss ce with no learner)", file=sys.stderr)
        return 2
    pick = {s: min(grid, key=lambda name: grid[name][s]["val_ece"]) for s in seeds}
    autos = [a.split("=", 1) if "=" in a else (method_label(a), str(args.sweep / a)) for a in args.auto]
    picked = {s: grid[pick[s]][s] for s in seeds}
    ce = grid[ce_name]
    temperatures = [ce[s]["t"] for s in seeds]
    regime = ("over-confident" if min(temperatures) > 1 else "under-confident" if max(temperatures) < 1
              else "over-confident on some seeds, under-confident on others")
    lines = [f"Sweep: `{args.sweep}`; seeds {', '.join(map(str, seeds))}. Regime: CE is {regime} (the temperature "
             "TS fits on validation, per seed: " + ", ".join(f"{t:.2f}" for t in temperatures)
             + "; > 1: over-confident).",
             "", "Runs made by:", ""]
    folders = [args.sweep] + [Path(folder).parent for _, folder in autos if Path(folder).parent != args.sweep]
    for folder in dict.fromkeys(folders):
        made = read_sweep_command(folder)
        lines.append(f"- `{made}`" if made is not None else f"- `{folder}` (no sweep_command.txt)")
    lines += ["", trained_on(dict.fromkeys(folders)), "",
             "Per seed, the grid pick is the γ ∈ {" + ", ".join(f"{gammas[n]:g}" for n in grid) + "} (0: CE) with the "
             "lowest validation ECE: " + ", ".join(f"seed {s}: γ = {gammas[pick[s]]:g}" for s in seeds) + ".", "",
             "| method | seed | γ | test ECE % | test error % |", "|---|---:|---:|---:|---:|"]
    rows = [("grid pick", picked)] + [(label, load(Path(folder), gaps=True)) for label, folder in autos]
    with_ts = lambda runs: {s: {**r, "ece": r["ece_ts"]} for s, r in runs.items()}  # noqa: E731
    rows += [(f"{rows[1][0]} + TS", with_ts(rows[1][1])), ("CE + TS", with_ts(ce))]
    rows += [(method_label(o), load(args.sweep / o)) for o in OTHERS]
    for name, runs in rows:
        for s in seeds:
            if s not in runs:
                continue
            r = runs[s]
            gamma = gammas[pick[s]] if name == "grid pick" else r.get("gamma")
            gamma_text = f"{gamma:.2f}" if isinstance(gamma, float) else "–"
            lines.append(f"| {name} | {s} | {gamma_text} | {100 * r['ece']:.2f} | {100 * r['error']:.2f} |")
    lines += ["", "Paired over seeds, method − grid pick (points; 95% t-interval):", "",
              "| method | Δ test ECE | worst seed | Δ test error |", "|---|---|---:|---|"]
    for name, runs in rows[1:]:
        shared = [s for s in seeds if s in runs]
        if len(shared) < 2:
            continue
        d_ece = paired_diff({s: runs[s]["ece"] for s in shared}, {s: picked[s]["ece"] for s in shared})
        d_err = paired_diff({s: runs[s]["error"] for s in shared}, {s: picked[s]["error"] for s in shared})
        lines.append(f"| {name} | {interval_text(d_ece)} ({resolved_text(d_ece)}) | {100 * max(d_ece.diffs):+.2f} | "
                     f"{interval_text(d_err)} ({resolved_text(d_err)}) |")
    lines += ["", "How each automatic run moved its scalar, mean over seeds: updates that raised or lowered it "
              "(moves), moves in the direction opposite to the previous move (reversals), the gap the controller "
              "measured on the selected network in standard errors (0: calibrated on the measured sample; beyond ±1: "
              "outside the band), and that network's gap mean(confidence) − accuracy in points on the measured sample "
              "(meta-val + val, or the splits auto.measure_on names), on validation and on test "
              "(where the seeds share one data split, as in metacal's sweeps, a measured sample whose gap differs from "
              "the test set's pulls the scalar the same way on every seed); the updates whose move the probe withheld "
              "because pushing had stopped changing the gap (held), and the seeds whose scalar reached its upper end "
              "(metrics.json auto.at_limit; – for runs made before it was recorded):",
              "", "| method | moves | reversals | gap at selection / SE | gap: measured | val | test | held | "
              "seeds at the clip |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, runs in rows[1:1 + len(autos)]:
        if not runs:
            continue
        cells = [mean_text([r[key] for r in runs.values()], scale, form) for key, scale, form in MOVES_COLUMNS]
        cells.append(mean_text([r["held"] for r in runs.values()], 1.0, ".1f"))
        known = [r["at_limit"] for r in runs.values() if r["at_limit"] is not None]
        cells.append(f"{sum(known)} of {len(known)}" if known else "–")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += root_table(grid, gammas, seeds, pick, rows[1])
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        given = sys.argv[1:] if argv is None else argv
        args.out.parent.mkdir(parents=True, exist_ok=True)
        picture = args.out.with_name(args.out.stem + "_gamma.png")
        figure(Path(autos[0][1]), args.adafocal or args.sweep / "adafocal", picture, args.title or str(args.sweep))
        text += f"\n![γ per epoch]({picture.name})\n"
        head = f"# {args.title}\n\n" if args.title else ""
        tail = "\n" + discussion_text(args.discussion, args.out) if args.discussion else ""
        args.out.write_text(f"{head}Generated by `{shlex.join(['python', 'scripts/auto_vs_grid.py', *given])}`.\n\n"
                            + text + tail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
