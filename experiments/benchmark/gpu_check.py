"""scripts/gpu_check.py: one command that checks a CUDA machine end to end and records what it measured.

In order (each a subprocess with its own time limit; about 4 minutes on one H100):

1. scripts/bench_meta_step.py, scripts/bench_epoch.py, the kernel count per step
   (:mod:`experiments.benchmark.kernels`), the FLOPs per step (:mod:`experiments.benchmark.flops`), eager against
   CUDA-graph replay (:mod:`experiments.benchmark.cuda_graphs`) and replayed training against eager training
   (:mod:`experiments.benchmark.graph_equivalence`), alone on the machine (their numbers are timings);
2. every method family for one short epoch (``run.max_steps_per_epoch``) in fp32 and bf16: CE, focal, AdaFocal,
   dual focal, FLγ-SECE (``jvp`` and ``higher``), FLγ-DECE, auto γ — the ResNet regime's configs —, CE,
   FLγ-SECE (both backends) and auto γ with ``run.cuda_graphs``, and the CE run under ``accelerate launch
   --num_processes 1``; these are pass/fail checks, run ``--jobs`` at a time;
3. SIGTERM during a run (exit 75, a checkpoint of the current step), then ``--resume`` (exit 0).

docs/performance_gpu.md gets the device's name (``torch.cuda.get_device_name``), each check's exit code and
seconds, the benchmarks' tables and the GPU targets (:func:`targets`). It is rewritten after every check, so a
check cut short still leaves the ones before it on the page. Without CUDA it says so in one line and exits 0
(CI does not run it); ``--dry-run`` prints the commands and loads every training config with its overrides
(tests/test_gpu_check.py).
"""

from __future__ import annotations

import argparse
import datetime
import json
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REGIME = "configs/fashion_mnist_resnet_overconfident"
#: (name, config stem, extra overrides) of the method families
FAMILIES = (("ce", "ce", ()), ("focal", "focal", ()), ("adafocal", "adafocal", ()), ("dual_focal", "dual_focal", ()),
            ("flgamma_sece_jvp", "flgamma_sece", ("meta.backend=jvp",)),
            ("flgamma_sece_higher", "flgamma_sece", ("meta.backend=higher",)),
            ("flgamma_dece", "flgamma_dece", ()), ("auto_gamma", "auto_gamma", ()))
PRECISIONS = ("no", "bf16")
SHORT = ("schedule.epochs=1", "schedule.milestones=[]", "run.max_steps_per_epoch=30", "logging.progress_bar=false")
EXIT_PREEMPTED = 75
#: the checks whose last output line is a JSON result that the page renders
BENCHMARKS = ("bench_meta_step", "bench_epoch", "kernels", "flops", "cuda_graphs", "graph_equivalence")
#: the families also trained with their iterations replayed from CUDA graphs (fp32: graphs refuse mixed precision)
GRAPHED = ("ce", "flgamma_sece_jvp", "flgamma_sece_higher", "auto_gamma")


@dataclass
class Check:
    """One command and what it must exit with; ``sigterm_after``: send SIGTERM after this many seconds."""

    name: str
    argv: list[str]
    expect: int = 0
    timeout: float = 120.0
    sigterm_after: float | None = None
    config: str | None = None  # the training config and overrides (for --dry-run's loading)
    overrides: list[str] = field(default_factory=list)
    parallel: bool = False  # a pass/fail check that may share the machine with others


def train_argv(config: str, run_dir: Path, overrides: list[str], resume: bool = False) -> list[str]:
    argv = ["scripts/train.py", "--config", config, "--run-dir", str(run_dir), "--overwrite"]
    if resume:
        argv = ["scripts/train.py", "--run-dir", str(run_dir), "--resume"]
    return argv + (["--set", *overrides] if overrides else [])


def checks(out: Path) -> list[Check]:
    """Every check, in order; run directories under ``out``."""
    python = sys.executable
    found = [Check("bench_meta_step", [python, "scripts/bench_meta_step.py", "--reps", "15", "--no-write", "--json"],
                   timeout=150.0),
             Check("bench_epoch", [python, "scripts/bench_epoch.py", "--steps", "100", "--graphs", "--no-write",
                                   "--json"], timeout=360.0),
             Check("kernels", [python, "-m", "experiments.benchmark.kernels", "--steps", "5", "--json"], timeout=180.0),
             Check("flops", [python, "-m", "experiments.benchmark.flops", "--no-write", "--json"], timeout=120.0),
             Check("cuda_graphs", [python, "-m", "experiments.benchmark.cuda_graphs", "--reps", "30", "--json"],
                   timeout=120.0),
             Check("graph_equivalence", [python, "-m", "experiments.benchmark.graph_equivalence", "--json"],
                   timeout=120.0)]
    for name, stem, extra in FAMILIES:
        for precision in PRECISIONS:
            config, sets = f"{REGIME}/{stem}.yaml", [*SHORT, f"run.mixed_precision={precision}", *extra]
            found.append(Check(f"{name} {precision}", [python, *train_argv(config, out / f"{name}-{precision}", sets)],
                               config=config, overrides=sets, parallel=True))
        if name in GRAPHED:
            config, sets = f"{REGIME}/{stem}.yaml", [*SHORT, "run.cuda_graphs=true", *extra]
            found.append(Check(f"{name} CUDA graphs", [python, *train_argv(config, out / f"{name}-graphs", sets)],
                               config=config, overrides=sets, parallel=True))
    config = f"{REGIME}/ce.yaml"
    found.append(Check("accelerate launch --num_processes 1", [
        python, "-m", "accelerate.commands.launch", "--num_processes", "1", "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no", *train_argv(config, out / "launch", list(SHORT))],
        config=config, overrides=list(SHORT), parallel=True))
    # long enough that SIGTERM at 20 s lands mid-run on a fast GPU (an epoch of this regime takes a few seconds)
    long = ["schedule.epochs=8", "schedule.milestones=[]", "logging.progress_bar=false"]
    found.append(Check("SIGTERM mid-run → 75", [python, *train_argv(config, out / "sigterm", long)],
                       expect=EXIT_PREEMPTED, sigterm_after=20.0, config=config, overrides=long))
    found.append(Check("--resume after SIGTERM → 0", [python, *train_argv(config, out / "sigterm", [], resume=True)],
                       timeout=240.0))
    return found


def run(check: Check) -> tuple[int, float, str]:
    """(exit code, seconds, output) of one check; 124 when it ran past its time limit."""
    started = time.perf_counter()
    proc = subprocess.Popen(check.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        if check.sigterm_after is not None:
            try:
                proc.wait(timeout=check.sigterm_after)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=check.timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        proc.kill()
        output, code = proc.communicate()[0], 124
    return code, time.perf_counter() - started, output or ""


def last_json(output: str) -> dict | None:
    lines = [line for line in output.strip().splitlines() if line.startswith("{")]
    try:
        return json.loads(lines[-1]) if lines else None
    except ValueError:
        return None


#: the GPU targets: a CE epoch of the ResNet regime within this multiple of (steps × a bare CE step); FLγ-SECE's
#: epoch within this multiple of CE's; the jvp meta step within this multiple of a focal step
CE_OVER_BARE, FLGAMMA_OVER_CE, JVP_OVER_FOCAL = 1.25, 2.5, 2.5


def targets(meta: dict | None, epoch: dict | None, graphs: dict | None = None, flops: dict | None = None) -> list[str]:
    """The GPU targets as lines of the page, from bench_meta_step's, bench_epoch's, the cuda_graphs and the flops
    benchmarks' JSON (any may be missing). The jvp lines give the arithmetic ratio beside the measured one.

    An epoch here is the training loop (loader + step columns of bench_epoch, scaled to the full epoch); the
    epoch-end evaluation is reported beside it but not counted, since the bare step has no counterpart to it.
    With ``run.cuda_graphs`` rows, the ratios are given again for graphed training."""
    lines = []
    arithmetic = (f"; arithmetic {flops['ratio_to_focal']['jvp']:.2f}× (FLOPs, experiments.benchmark.flops)"
                  if flops else "")
    trainer = (flops or {}).get("trainer")
    epoch_arithmetic = (f"; arithmetic {trainer['flgamma_sece'] / trainer['ce']:.2f}× per iteration"
                        if isinstance(trainer, dict) else "")
    resnet = [r for r in (epoch or {}).get("rows", []) if "resnet" in r["config"]]
    rows = {r["method"]: r for r in resnet if not r.get("graphs")}
    loop = {m: r["loader_s"] + r["step_s"] for m, r in rows.items()}
    graphed = {r["method"]: r["loader_s"] + r["step_s"] for r in resnet if r.get("graphs")}
    if meta and "ce" in rows:
        bare = rows["ce"]["steps_per_epoch"] * meta["plain_s"]
        ratio = loop["ce"] / bare
        lines.append(f"- CE epoch of the ResNet regime: {loop['ce']:.2f} s of training loop (+ "
                     f"{rows['ce']['other_s']:.2f} s evaluation) against {rows['ce']['steps_per_epoch']} × "
                     f"{meta['plain_s'] * 1e3:.2f} ms bare step = {bare:.2f} s: {ratio:.2f}× "
                     f"(target ≤ {CE_OVER_BARE}: {'met' if ratio <= CE_OVER_BARE else 'NOT met'})")
    if "ce" in loop and "flgamma_sece" in loop:
        ratio = loop["flgamma_sece"] / loop["ce"]
        verdict = "met" if ratio <= FLGAMMA_OVER_CE else "NOT met"
        lines.append(f"- FLγ-SECE epoch / CE epoch (training loop): {loop['flgamma_sece']:.2f} / {loop['ce']:.2f} s "
                     f"= {ratio:.2f}× (target ≤ {FLGAMMA_OVER_CE}: {verdict}{epoch_arithmetic})")
    if meta:
        ratio = meta["ratio_to_focal"]["jvp"]
        lines.append(f"- jvp meta step / focal step: {ratio:.2f}× (median over rounds of the paired ratio; target ≤ "
                     f"{JVP_OVER_FOCAL}: {'met' if ratio <= JVP_OVER_FOCAL else 'NOT met'}{arithmetic})")
    if "ce" in graphed and "flgamma_sece" in graphed:
        ratio = graphed["flgamma_sece"] / graphed["ce"]
        lines.append(f"- with run.cuda_graphs, FLγ-SECE epoch / CE epoch, both replayed: "
                     f"{graphed['flgamma_sece']:.2f} / {graphed['ce']:.2f} s = {ratio:.2f}× (target ≤ {FLGAMMA_OVER_CE}: "
                     f"{'met' if ratio <= FLGAMMA_OVER_CE else 'NOT met'}{epoch_arithmetic})")
        if "ce" in loop:
            ratio = graphed["flgamma_sece"] / loop["ce"]
            lines.append(f"- FLγ-SECE replayed / CE eager (training loop): {graphed['flgamma_sece']:.2f} / "
                         f"{loop['ce']:.2f} s = {ratio:.2f}×")
    steps = (graphs or {}).get("steps", {})
    if "graph_ms" in steps.get("jvp", {}) and "graph_ms" in steps.get("focal", {}):
        ratio = steps["jvp"]["graph_ms"] / steps["focal"]["graph_ms"]
        lines.append(f"- jvp meta step / focal step, both replayed from a CUDA graph: {ratio:.2f}× (medians; "
                     f"target ≤ {JVP_OVER_FOCAL}: {'met' if ratio <= JVP_OVER_FOCAL else 'NOT met'}{arithmetic})")
    return lines


def report(device: str, results: list[tuple[Check, int, float, str]], jobs: int) -> str:
    import torch

    from .epoch_report import tables

    rows = [f"| {c.name} | {c.expect} | {code} | {seconds:.1f} | {'ok' if code == c.expect else 'FAILED'} |"
            for c, code, seconds, _ in results]
    found = {c.name: last_json(out) for c, _, _, out in results if c.name in BENCHMARKS}
    meta, epoch = found.get("bench_meta_step"), found.get("bench_epoch")
    text = [f"# GPU check\n\nGenerated by `python scripts/gpu_check.py` — do not edit by hand.\n\nDevice: {device}; "
            f"torch {torch.__version__}; {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC.\n",
            "## Targets\n",
            *(targets(meta, epoch, found.get("cuda_graphs"), found.get("flops"))
              or ["- (the benchmarks have not run)"]), "",
            f"## Checks\n\nThe benchmarks ran alone; the training checks ran {jobs} at a time, so their seconds "
            "say that they finished, not how fast.\n",
            "| check | expected exit | exit | seconds | |", "|---|---:|---:|---:|---|", *rows]
    if epoch:
        text += ["", "## Epoch time (scripts/bench_epoch.py --steps 100)", "", tables(epoch)]
    if found.get("kernels"):
        counts = found["kernels"]
        text += ["", f"## Operations per step ({counts['unit']}; python -m experiments.benchmark.kernels --steps 5)",
                 "", "| step | per step |", "|---|---:|",
                 *(f"| bench_meta_step {k} | {v:.0f} |" for k, v in counts["bench"].items()),
                 *(f"| trainer {k} | {v:.0f} |" for k, v in counts["trainer"].items())]
    if found.get("flops"):
        from .flops import table as flops_table

        text += ["", "## Arithmetic per step (python -m experiments.benchmark.flops; the same on every device)", "",
                 flops_table(found["flops"])]
    if found.get("cuda_graphs"):
        from .cuda_graphs import table as graphs_table

        text += ["", "## Eager steps against CUDA-graph replay (python -m experiments.benchmark.cuda_graphs --reps 30)",
                 "", "Medians in ms; the replay is the same step captured once (a bound on what graphs save).", "",
                 graphs_table(found["cuda_graphs"]["steps"])]
    if found.get("graph_equivalence"):
        from .graph_equivalence import table as equivalence_table

        text += ["", "## Replayed training against eager training (python -m experiments.benchmark.graph_equivalence)",
                 "", "The same iterations from the same state, eager and through run.cuda_graphs' GraphedSteps "
                 "(deterministic kernels, the γ-Net's Adam capturable on both sides).", "",
                 equivalence_table(found["graph_equivalence"]["cases"])]
    if meta:
        keep = ("plain_s", "focal_s", "meta_s", "ratio_to_focal", "higher_over_jvp", "reference_s",
                "tangent_pass_focal", "trajectory_over_jvp", "hypergrad_rel_diff", "peak_mem_mb", "targets_met")
        text += ["", "## Meta step (scripts/bench_meta_step.py --reps 15)", "",
                 "Seconds are medians over rounds; ratios are medians of each round's ratio.", "", "```",
                 json.dumps({k: meta[k] for k in keep if k in meta}, indent=1, ensure_ascii=False), "```"]
    return "\n".join(text) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="gpu_check.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--dry-run", action="store_true", help="print the commands, load every config, run nothing")
    p.add_argument("--out", default="runs/gpu_check", help="directory of the check runs")
    p.add_argument("--output", default="docs/performance_gpu.md")
    p.add_argument("--jobs", type=int, default=4, help="training checks run at a time (the benchmarks run alone)")
    args = p.parse_args(argv)
    if args.jobs < 1:
        p.error("--jobs must be at least 1")
    from .epoch_report import output_problem

    if problem := output_problem(args.output):  # the page is written after every check: none may be lost
        p.error(problem)
    import torch

    todo = checks(Path(args.out))
    if args.dry_run:
        from metacal.train import load_config

        for check in todo:
            if check.config is not None:
                load_config(check.config, check.overrides)
            print(" ".join(check.argv))
        return 0
    if not torch.cuda.is_available():
        print("gpu_check: no CUDA device here; nothing checked")
        return 0
    device, output = torch.cuda.get_device_name(), Path(args.output)
    results: list[tuple[Check, int, float, str]] = []

    def record(check: Check, outcome: tuple[int, float, str]) -> None:
        code, seconds, text = outcome
        print(f"{check.name}: exit {code} (expected {check.expect}), {seconds:.1f} s", flush=True)
        if code != check.expect:
            print(text[-2000:], flush=True)
        results.append((check, *outcome))
        output.write_text(report(device, sorted(results, key=lambda r: todo.index(r[0])), args.jobs))

    parallel = [c for c in todo if c.parallel]
    for check in todo:
        if check is parallel[0]:
            with ThreadPoolExecutor(args.jobs) as pool:
                for done, outcome in zip(parallel, pool.map(run, parallel)):
                    record(done, outcome)
        elif not check.parallel:
            record(check, run(check))
    return 0 if all(code == c.expect for c, code, _, _ in results) else 1
