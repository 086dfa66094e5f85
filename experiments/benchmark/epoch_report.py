"""The command line of scripts/bench_epoch.py: runs :mod:`experiments.benchmark.epoch` per regime and method,
prints the tables and writes them into docs/performance.md between :data:`BEGIN` and :data:`END`."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from pathlib import Path

import torch

from metacal.machine import cpu_model

from .epoch import time_epoch, time_loader

DEFAULT_CONFIGS = ("configs/fashion_mnist_resnet_overconfident/ce.yaml", "configs/fashion_mnist_overconfident/ce.yaml")
METHODS = ("ce", "focal", "auto_gamma", "flgamma_sece")
BEGIN, END = "<!-- bench_epoch: begin -->", "<!-- bench_epoch: end -->"
#: the acceptance target on a 2-core CPU: one Fashion-MNIST epoch through the new loader path alone
LOADER_TARGET_S = 0.25


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench_epoch.py", description="Seconds per training epoch, split.")
    p.add_argument("--configs", nargs="+", default=list(DEFAULT_CONFIGS),
                   help="one config per regime, or its folder (the loader is timed with this config, or ce.yaml)")
    p.add_argument("--methods", nargs="+", default=list(METHODS),
                   help="the configs of these names in each regime's folder")
    p.add_argument("--steps", type=int, default=None, help="time N iterations per method, scaled to the epoch")
    p.add_argument("--cpu", action="store_true", help="run on the CPU even where CUDA is available")
    p.add_argument("--threads", type=int, default=None, help="run.torch_threads (default: the config's)")
    p.add_argument("--output", default="docs/performance.md")
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.add_argument("--graphs", action="store_true",
                   help="on CUDA, also time each method with run.cuda_graphs=true (iterations replayed from graphs)")
    return p.parse_args(argv)


def overrides(args: argparse.Namespace) -> list[str]:
    out = ["run.cpu=true"] if args.cpu or not torch.cuda.is_available() else []
    return out + ([f"run.torch_threads={args.threads}"] if args.threads else [])


def regime_config(config: str) -> Path:
    """The config a ``--configs`` entry names: the file, or ``ce.yaml`` of a folder."""
    return Path(config) / "ce.yaml" if Path(config).is_dir() else Path(config)


def method_config(config: str, method: str) -> str:
    """The config of ``method`` in the folder of ``config``."""
    return str(regime_config(config).with_name(f"{method}.yaml"))


def bad_input(args: argparse.Namespace) -> str | None:
    """What is wrong with the options (one line), or None; every config is loaded before anything is timed."""
    from metacal.train.config import ConfigError, load_config

    if args.steps is not None and args.steps < 1 or args.threads is not None and args.threads < 1:
        return "--steps and --threads must be positive"
    if not args.no_write and (problem := output_problem(args.output)):
        return problem
    configs = [str(regime_config(c)) for c in args.configs] + [method_config(c, m) for c in args.configs
                                                               for m in args.methods]
    for path in dict.fromkeys(configs):  # each once (a regime's ce.yaml is usually one of its methods)
        try:
            load_config(path, overrides(args))
        except ConfigError as err:
            return str(err)
    return None


def measure(args: argparse.Namespace) -> dict:
    extra = overrides(args)
    rows, loaders = [], []
    cuda = "run.cpu=true" not in extra
    for config in [str(regime_config(c)) for c in args.configs]:
        if cuda:  # untimed: the first epoch in a process pays for CUDA's context, cuDNN's autotuner, the allocator
            time_epoch(method_config(config, args.methods[0]), 5, extra)
        ways = (False, True) if args.graphs and cuda else (False,)  # eager; replayed from CUDA graphs
        for method, graphs in [(m, g) for m in args.methods for g in ways]:
            path = method_config(config, method)
            timing = time_epoch(path, args.steps, [*extra, *(["run.cuda_graphs=true"] if graphs else [])])
            rows.append({"config": path, "method": method, "graphs": graphs, **vars(timing), "epoch_s": timing.epoch_s})
            print(f"{path}{' (CUDA graphs)' if graphs else ''}: {timing.epoch_s:.2f} s/epoch (loader "
                  f"{timing.loader_s:.2f}, step {timing.step_s:.2f}, other {timing.other_s:.2f}), "
                  f"{timing.reads_per_step:.3f} host reads/step", flush=True)
        old, new = (time_loader(config, batched, extra) for batched in (False, True))
        loaders.append({"config": config, "per_sample_s": old, "batched_s": new, "speedup": old / new})
        print(f"{config}: train loader alone {old:.3f} s per-sample, {new:.3f} s batched ({old / new:.1f}×)",
              flush=True)
    device = torch.cuda.get_device_name() if cuda else f"{cpu_model()} (CPU)"
    return {"rows": rows, "loaders": loaders, "device": device, "threads": torch.get_num_threads(),
            "torch": torch.__version__, "steps": args.steps}


def tables(result: dict) -> str:
    lines = ["| config | steps timed / epoch | loader s | step s | other s | epoch s | host reads/step |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in result["rows"]:
        graphs = " (CUDA graphs)" if r.get("graphs") else ""
        lines.append(f"| `{r['config']}`{graphs} | {r['steps_timed']} / {r['steps_per_epoch']} | {r['loader_s']:.2f} | "
                     f"{r['step_s']:.2f} | {r['other_s']:.2f} | {r['epoch_s']:.2f} | {r['reads_per_step']:.3f} |")
    lines += ["", "| config | train loader alone, per-sample (`data.batched: false`) s | batched s | × faster |",
              "|---|---:|---:|---:|"]
    for r in result["loaders"]:
        lines.append(f"| `{r['config']}` | {r['per_sample_s']:.3f} | {r['batched_s']:.3f} | {r['speedup']:.1f} |")
    return "\n".join(lines)


def section(result: dict, command: str) -> str:
    met = all(r["batched_s"] <= LOADER_TARGET_S for r in result["loaders"])
    when = f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC"
    steps = result["steps"]
    timed = f"the first {steps} iterations, scaled to the epoch" if steps else "the whole epoch"
    return f"""{BEGIN}
## Where a training epoch's time goes

Generated by `scripts/bench_epoch.py` — do not edit the numbers by hand; regenerate with:

    {command}

Machine: {result['device']}, {result['threads']} torch threads, torch {result['torch']}, Python
{platform.python_version()}; {when}. Loader and step columns: {timed}; loader = waiting for the next
batch, step = the rest of the loop, other = the epoch-end evaluation and logging (experiments/benchmark/epoch.py).
Host reads: calls that read a tensor back to the host inside the loop body, per timed iteration
(experiments/benchmark/host_reads.py); auto γ's update (two reads, once per epoch) falls within the timed
iterations, and its measurement time is added unscaled.

{tables(result)}

Target: one Fashion-MNIST epoch through the batched train loader alone ≤ {LOADER_TARGET_S} s on this CPU:
{'met' if met else 'NOT met'}.
{END}"""


def output_problem(path: Path | str) -> str | None:
    """Why the page ``path`` cannot be written (one line), or None: the benchmarks check it before they measure
    for minutes, not after."""
    path = Path(path)
    if path.is_dir():
        return f"{path} is a folder; give the page's file"
    if not path.parent.is_dir():
        return f"cannot write {path}: no folder {path.parent}"
    if not os.access(path.parent, os.W_OK) or path.exists() and not os.access(path, os.W_OK):
        return f"cannot write {path}: permission denied"
    return None


def write(path: Path, text: str, begin: str = BEGIN, end: str = END) -> None:
    """Replace the section between the markers ``begin`` and ``end`` (or append it)."""
    old = path.read_text() if path.exists() else ""
    if begin in old and end in old:
        new = old[:old.index(begin)] + text + old[old.index(end) + len(end):]
    else:
        new = old.rstrip("\n") + "\n\n" + text + "\n"
    path.write_text(new)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    problem = bad_input(args)
    if problem:
        print(f"bench_epoch: error: {problem}", file=sys.stderr)
        return 2
    from metacal.data import DataFormatError, DataNotFoundError

    try:
        result = measure(args)
    except (DataNotFoundError, DataFormatError) as err:  # nothing is written before every regime is measured
        print(f"bench_epoch: error: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    print(tables(result))
    if not args.no_write:
        command = "python scripts/bench_epoch.py " + " ".join(sys.argv[1:] if argv is None else argv)
        write(Path(args.output), section(result, command.strip()))
    if args.json:
        print(json.dumps(result))
    return 0
