"""Cost of one meta step per backend, relative to a plain CE step and a focal step (no meta).

    python scripts/bench_meta_step.py [--reps 15] [--warmup 2] [--batch 128] [--meta-batch 128]
        [--model small_resnet] [--classes 10] [--size 28] [--objective sece] [--threads N]
        [--memory rss|saved] [--malloc retain|glibc] [--json] [--output docs/performance.md | --no-write]

All methods (experiments.benchmark.meta_step) run in ONE process, interleaved: every round times one step
of each method in a rotated order; seconds per step are medians over rounds, and each ratio is the median
over rounds of the ratio within a round (the machine may be shared: paired ratios cancel its drifts).
Each method trains its own copy of the same initial model (SGD lr 0.1, momentum 0.9, wd 5e-4; γ-Net;
Adam 1e-3), on the same fixed train and meta-val batches.

Peak memory: on CUDA ``torch.cuda.max_memory_allocated`` during one step. On CPU there is no allocator
statistic, so a child process (same options) measures, per method, the increase of the resident set size
during one step: the RSS high-water mark is reset through /proc/self/clear_refs before the step and read
from VmHWM after it, with ``MALLOC_MMAP_THRESHOLD_=65536`` so that every activation-sized tensor is mmapped
and returned to the OS when freed (RSS then tracks live tensor memory). This counts everything a step
allocates (graphs, gradients, forward-mode tangents, the ``jvp`` backend's kept primal outputs). A second
column gives the peak of bytes held by autograd graphs (tensors saved for backward, once per storage while
alive, via ``torch.autograd.graph.saved_tensors_hooks``) — the part that differs most between backends
(``higher`` keeps the train graph, its second-order backward graph and the meta-val graph alive together).
Without /proc (non-Linux) only the second measure is available and is reported as peak memory.

``hypergrad_rel_diff``: from one identical state, max|g_jvp − g_higher| / max|g_higher| over the γ-Net's
hypergradient. With ``--json`` the last printed line is one JSON object. Unless ``--no-write``, the
table is written to docs/performance.md (numbers only ever come from this script).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from experiments.benchmark.memory import minor_faults, rss_available
from experiments.benchmark.meta_step import (
    BACKENDS,
    COMPARISON_ROWS,
    Method,
    build_setup,
    hypergradient_difference,
    measure_memory,
    paired_statistic,
    rss_peaks,
)
from experiments.benchmark.epoch_report import BEGIN, END

from metacal.report.machine import cpu_model
from metacal.train.process_settings import preload_forward_ad, retain_freed_memory

#: the memory child runs through the launcher, which puts the checkout's root on sys.path
LAUNCHER = Path(__file__).resolve().parents[2] / "scripts" / "bench_meta_step.py"

TARGETS = "jvp ≤ 3.0× focal, head ≤ 1.4× focal, jvp ≥ 2× faster than higher, jvp peak memory < higher"


def measure_rss_in_child(argv: list[str]) -> dict[str, float] | None:
    """Run the RSS measurement in a fresh process with a fixed malloc mmap threshold (64 KiB), so every
    activation-sized tensor is mmapped and returned to the OS when freed and RSS tracks live memory."""
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
    cmd = [sys.executable, str(LAUNCHER), *argv, "--memory-child"]
    try:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, timeout=1800)
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, OSError, ValueError, IndexError):
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--meta-batch", type=int, default=128)
    parser.add_argument("--model", default="small_resnet")
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--size", type=int, default=28)
    parser.add_argument("--objective", default="sece")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--output", default="docs/performance.md")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--memory", choices=("rss", "saved"), default="rss",
                        help="CPU peak memory: RSS increase in a child process (default) or autograd-saved bytes")
    parser.add_argument("--malloc", choices=("retain", "glibc"), default="retain",
                        help="retain: keep freed memory for reuse, as the trainer does on CPU (run.malloc_retain); "
                             "glibc: the C library's defaults (freed memory goes back to the OS)")
    parser.add_argument("--memory-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.reps < 1 or args.warmup < 0 or min(args.batch, args.meta_batch, args.classes, args.size) < 1:
        print("error: --reps, --batch, --meta-batch, --classes, --size must be positive", file=sys.stderr)
        return 2
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    preload_forward_ad()  # the jvp backend's forward-mode AD, without torch's jit deprecation warning
    if args.malloc == "retain" and not args.memory_child and not retain_freed_memory():
        print("warning: could not make malloc retain freed memory (no glibc); timing with its defaults",
              file=sys.stderr)
        args.malloc = "glibc"
    device = torch.device(args.device)
    cuda = device.type == "cuda"

    model, gamma_net, objective, data = build_setup(args, device)
    names = ["plain", "focal", *BACKENDS, *COMPARISON_ROWS]
    if args.memory_child:
        print(json.dumps(rss_peaks(names, model, gamma_net, objective, data)))
        return 0
    methods = {n: Method(n, model, gamma_net, objective, data) for n in names}
    for _ in range(args.warmup):
        for m in methods.values():
            m.step()
    times: dict[str, list[float]] = {n: [] for n in names}
    cpu_times: dict[str, list[float]] = {n: [] for n in names}
    faults: dict[str, list[int]] = {n: [] for n in names}
    for rep in range(args.reps):
        order = names[rep % len(names):] + names[: rep % len(names)]
        for n in order:
            if cuda:
                torch.cuda.synchronize()
            start, cpu_start, faults_start = time.perf_counter(), time.process_time(), minor_faults()
            methods[n].step()
            if cuda:
                torch.cuda.synchronize()
            times[n].append(time.perf_counter() - start)
            cpu_times[n].append(time.process_time() - cpu_start)
            faults[n].append(minor_faults() - faults_start)
    median = {n: statistics.median(t) for n, t in times.items()}
    cpu_median = {n: statistics.median(t) for n, t in cpu_times.items()}
    wall, cpu = paired_statistic(times), paired_statistic(cpu_times)
    saved = {n: measure_memory(methods[n], False) for n in names}
    memory, memory_kind = None, "autograd_saved_tensors"
    if cuda:
        memory, memory_kind = {n: measure_memory(methods[n], True) for n in names}, "cuda_max_memory_allocated"
    elif args.memory == "rss" and rss_available():
        child_argv = [a for a in (argv if argv is not None else sys.argv[1:]) if a not in ("--json",)]
        memory = measure_rss_in_child(child_argv + ["--no-write"])
        memory_kind = "peak_rss_increase" if memory is not None else memory_kind
    if memory is None:
        memory = saved
    rel_jvp, rel_head = hypergradient_difference(model, gamma_net, objective, data)

    result = {
        "plain_s": median["plain"],
        "focal_s": median["focal"],
        "meta_s": {b: median[b] for b in BACKENDS},
        "ratio_to_focal": {b: wall(lambda t: t[b] / t["focal"]) for b in BACKENDS},
        "cpu_s": cpu_median,
        "cpu_ratio_to_focal": {b: cpu(lambda t: t[b] / t["focal"]) for b in BACKENDS},
        "higher_over_jvp": wall(lambda t: t["higher"] / t["jvp"]),
        "reference_s": {r: median[r] for r in COMPARISON_ROWS},
        "higher_over_floor": wall(lambda t: t["higher"] / t["floor"]),
        # jvp = floor + the tangent pass (+ a small contraction): its cost, and the cost it would need to
        # have for jvp to be 2x faster than higher, both in focal steps
        "tangent_pass_focal": wall(lambda t: (t["jvp"] - t["floor"]) / t["focal"]),
        "tangent_pass_for_2x_focal": wall(lambda t: (t["higher"] / 2 - t["floor"]) / t["focal"]),
        "higher_recompute_over_jvp": wall(lambda t: t["higher_recompute"] / t["jvp"]),
        "trajectory_over_jvp": wall(lambda t: t["jvp_trajectory"] / t["jvp"]),
        "times_s": times,
        # first touches of freshly mapped pages per step (glibc returns freed memory to the OS)
        "minor_faults_per_step": {n: statistics.median(f) for n, f in faults.items()},
        "malloc": args.malloc,
        "hypergrad_rel_diff": rel_jvp,
        "head_vs_full_rel_diff": rel_head,
        "peak_mem_mb": {n: memory[n] for n in names},
        "peak_mem_kind": memory_kind,
        "autograd_saved_peak_mb": saved,
        "reps": args.reps,
        "threads": torch.get_num_threads(),
        "device": str(device),
    }
    checks = {
        "jvp ≤ 3.0× focal": result["ratio_to_focal"]["jvp"] <= 3.0,
        "head ≤ 1.4× focal": result["ratio_to_focal"]["head"] <= 1.4,
        "jvp ≥ 2× faster than higher": result["higher_over_jvp"] >= 2.0,
        "jvp peak memory < higher": memory["jvp"] < memory["higher"],
    }
    result["targets_met"] = checks
    columns = {n: (wall(lambda t: t[n] / t["focal"]), wall(lambda t: t[n] / t["plain"]),
                   cpu(lambda t: t[n] / t["focal"])) for n in names}
    table = render_table(result, names, median, cpu_median, columns, memory, saved)
    print(table)
    if not args.no_write:
        write_doc(Path(args.output), table, result, checks, argv, args)
    if args.json:
        print(json.dumps(result))
    return 0


def render_table(result, names, median, cpu_median, columns, memory, saved) -> str:
    mem_label = {
        "cuda_max_memory_allocated": "peak MB (CUDA allocated)",
        "peak_rss_increase": "peak RSS increase MB",
        "autograd_saved_tensors": "peak autograd-saved MB",
    }[result["peak_mem_kind"]]
    label = {"plain": "plain CE step", "focal": "focal step (γ-Net, no meta)",
             "floor": "reference: focal step + meta-val fwd/bwd (floor)",
             "higher_recompute": "reference: `higher` lookahead + separate real step",
             "jvp_trajectory": "meta step, `jvp` + trajectory level (`meta.horizon: trajectory`)"}
    lines = [
        f"| method | median s/step (wall) | × focal | × plain | median CPU s/step | × focal (CPU) | {mem_label} "
        "| peak autograd-saved MB | page faults/step |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in names:
        lines.append(
            f"| {label.get(n, f'meta step, `{n}`')} | {median[n]:.4f} | {columns[n][0]:.2f} | "
            f"{columns[n][1]:.2f} | {cpu_median[n]:.4f} | {columns[n][2]:.2f} | {memory[n]:.1f} | {saved[n]:.1f} | "
            f"{result['minor_faults_per_step'][n]:,.0f} |"
        )
    lines.append("")
    lines.append(
        f"`higher` / `jvp` time (wall): {result['higher_over_jvp']:.2f}×; hypergradient relative difference "
        f"jvp vs higher: {result['hypergrad_rel_diff']:.2e} (head vs full network: "
        f"{result['head_vs_full_rel_diff']:.2e}, an approximation by design)."
    )
    lines.append("")
    lines.append(
        f"`jvp` = floor + one tangent pass: the tangent pass (with the contraction) cost "
        f"{result['tangent_pass_focal']:.2f} focal steps; for `jvp` to be 2× faster than `higher` it would have "
        f"to cost at most {result['tangent_pass_for_2x_focal']:.2f}. Against `higher` used as in the reference "
        f"code (lookahead, then the step again): {result['higher_recompute_over_jvp']:.2f}× slower than `jvp`. "
        f"The trajectory level (`meta.horizon: trajectory`, an option for over-confident regimes: "
        f"[conventions](conventions.md#trajectory)) costs {result['trajectory_over_jvp']:.2f}× a `jvp` meta step."
    )
    return "\n".join(lines)


def write_doc(path: Path, table: str, result: dict, checks: dict, argv, args) -> None:
    command = "python scripts/bench_meta_step.py " + " ".join(argv if argv is not None else sys.argv[1:])
    met = "\n".join(f"- {name}: {'met' if ok else 'NOT met'}" for name, ok in checks.items())
    text = f"""# Performance of the meta step

Generated by `scripts/bench_meta_step.py` — do not edit the numbers by hand; regenerate with:

    {command.strip()}

Machine: {cpu_model()}, {result['threads']} torch threads, device {result['device']}, torch {torch.__version__},
Python {platform.python_version()}; {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC.
Setup: `{args.model}` from metacal.models, {args.batch} train + {args.meta_batch} meta-val images of
{args.size}×{args.size}, {args.classes} classes, SGD lr 0.1 / momentum 0.9 / wd 5e-4, γ-Net + focal inner
loss, `{args.objective}` meta objective, Adam 1e-3 on the γ-Net, `--malloc {result['malloc']}`.
{result['reps']} interleaved rounds, each timing every method once in rotated order. The s/step columns
are medians over rounds; every ratio (× columns, targets, the figures below the table) is the median over
rounds of that round's ratio, so changes of the machine's speed between rounds cancel.

{table}

Wall time is the target metric. The CPU column (process CPU time, all threads) is less sensitive to other
jobs on a shared machine; with more than one torch thread it also counts the workers' spin-waiting.

Peak memory ({result['peak_mem_kind']}): on CPU, the increase of the process's resident set size during
one step, measured in a child process with `MALLOC_MMAP_THRESHOLD_=65536` (so freed tensors return to the
OS) and the RSS high-water mark reset via /proc/self/clear_refs — it counts everything the step allocates.
The last column is the peak of bytes held by autograd graphs (tensors saved for backward, once per
storage), tracked with `saved_tensors_hooks`. On CUDA, `torch.cuda.max_memory_allocated` during one step.

Targets ({TARGETS}):
{met}

Why `jvp` costs what it does. Every exact full-network hypergradient that takes the real step once
does the work of the floor row: the real step (forward + backward) and v = ∇θ' J (a meta-val forward and
backward). `jvp` adds one forward-mode pass of the train batch at the old θ along the tangent −η·c·v,
which gives (J t)_i per sample; the contraction with ∂²ℓ_i/∂z∂γ_i is a few small ops. The tangent pass
does two convolutions per layer (ż = conv(ẋ, W) + conv(x, Ẇ); the primal convolution outputs and the
BatchNorm batch statistics are reused from the real forward) and a fused train-mode BatchNorm tangent,
so it costs about what a backward pass costs: the "tangent pass" figure above. `head` adds only a no-grad
meta-val forward. `higher` replaces the tangent pass by a backward through the second-order graph of the
whole step; its real step is taken from its fast weights (the step is computed once), which already
makes it cheaper than the reference code's lookahead followed by a second real step (second reference row).

Page faults/step: first touches of freshly mapped 4 KiB pages during one step (median over rounds).
With the C library's defaults, freed blocks go back to the OS, so every step maps and zeroes fresh pages
for much of what it allocates — most for the steps that hold the most at their peak (`higher` keeps the
second-order graph, `jvp` the real forward's activations for its tangent pass).
{"This run kept freed memory for reuse (`--malloc retain`, the default, as the trainer does on CPU "
 "through `run.malloc_retain`; metacal/train/process_settings.py): steps fault only while warming up. "
 "`--malloc glibc` measures with the C library's defaults." if result["malloc"] == "retain" else
 "This run used the C library's defaults (`--malloc glibc`); the default `--malloc retain` keeps freed "
 "memory for reuse, as the trainer does on CPU (`run.malloc_retain`)."}

The "≥ 2× faster than higher" target was set against a prototype whose `higher` lookahead recomputed the
step (8.3× focal). With the step computed once, `jvp` meets it only if its tangent pass costs at most the
"would need" figure above, while that pass evaluates two convolutions per layer, as a backward pass does.
Tried without measurable gain (A/B in one process): one fused eval-mode BatchNorm call for ẇ·x̂ + ḃ and
im2col + matmul for the one-channel stem's weight tangent.
"""
    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.read_text() if path.exists() else ""
    if BEGIN in old and END in old:  # scripts/bench_epoch.py's section stays
        text = text.rstrip("\n") + "\n\n" + old[old.index(BEGIN):old.index(END) + len(END)] + "\n"
    path.write_text(text)


if __name__ == "__main__":
    sys.exit(main())
