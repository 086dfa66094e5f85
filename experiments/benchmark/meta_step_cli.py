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
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from experiments.benchmark.epoch_report import output_problem
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
from experiments.benchmark.meta_step_report import render_table, write_doc

from metacal import models, objectives
from metacal.registry import UnknownNameError
from metacal.meta.hypergrad_jvp import preload_forward_ad
from metacal.train.process_settings import retain_freed_memory

#: the memory child runs through the launcher, which puts the checkout's root on sys.path
LAUNCHER = Path(__file__).resolve().parents[2] / "scripts" / "bench_meta_step.py"


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


def bad_input(args: argparse.Namespace) -> str | None:
    """What is wrong with the options (one line), or None; checked before anything is built or set."""
    if args.reps < 1 or args.warmup < 0 or min(args.batch, args.meta_batch, args.classes, args.size) < 1:
        return "--reps, --batch, --meta-batch, --classes, --size must be positive"
    if args.threads is not None and args.threads < 1:
        return f"--threads must be positive, got {args.threads}"
    if not args.no_write and not args.memory_child and (problem := output_problem(args.output)):
        return problem
    try:
        device = torch.device(args.device)
    except RuntimeError:
        return f"--device {args.device!r} is not a device (cpu, cuda, cuda:1, …)"
    if device.type == "cuda" and not torch.cuda.is_available():
        return f"--device {args.device}: no CUDA device on this machine"
    try:
        models.check_name(args.model)
        objectives.OBJECTIVES.get(args.objective)
    except UnknownNameError as err:
        return str(err)
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
    problem = bad_input(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
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


if __name__ == "__main__":
    sys.exit(main())
