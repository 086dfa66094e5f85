"""How much of a GPU step is launch overhead: each step of scripts/bench_meta_step.py eager and replayed from a
CUDA graph (one capture of the whole step: forward, backward, optimizer step), on CUDA only.

    python -m experiments.benchmark.cuda_graphs [--reps 30] [--json]

A step whose replay is much faster than its eager run spends its time launching kernels, not computing; that
is the case for the small ResNet at batch 128 (experiments/benchmark/kernels.py counts the launches). The
captured meta step uses a capturable Adam for the γ-Net (:func:`capturable`; CUDA only). A step that cannot be
captured (a host read, a CPU-side branch on a tensor) is reported with the reason. The replayed step is the same
arithmetic on static input buffers (the PyTorch "whole-network capture" recipe), so this
measures a bound on what graphs can save; the trainer replays its iterations this way with ``run.cuda_graphs``
(metacal/train/cuda_graphs.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Callable

import torch

from .meta_step import Method, default_setup

STEPS = ("plain", "focal", "floor", "jvp")


def median_ms(fn: Callable[[], None], reps: int) -> float:
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        started = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
    return 1e3 * statistics.median(times)


def capturable(method: Method) -> Method:
    """``method`` with its γ-Net optimizer (Adam) made capturable: its step count lives on the device, so that
    its step can be recorded in a graph (eager Adam keeps it on the host)."""
    if method.meta is not None:
        for group in method.meta.meta_optimizer.param_groups:
            group["capturable"] = True
    return method


def capture(fn: Callable[[], None]) -> Callable[[], None]:
    """``fn`` captured once into a CUDA graph (after three warm-up calls on a side stream); returns its replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def table(steps: dict[str, dict]) -> str:
    """The measured rows as a markdown table (docs/performance_gpu.md)."""
    lines = ["| step | eager ms | graph replay ms | × faster |", "|---|---:|---:|---|"]
    for name, row in steps.items():
        if "graph_ms" in row:
            lines.append(f"| {name} | {row['eager_ms']:.2f} | {row['graph_ms']:.2f} | {row['speedup']:.1f} |")
        else:
            lines.append(f"| {name} | {row['eager_ms']:.2f} | — | not captured: {row['capture_failed']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.benchmark.cuda_graphs",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("cuda_graphs: no CUDA device here; nothing measured")
        return 0
    model, gamma_net, objective, data = default_setup(torch.device("cuda"))
    result = {}
    for name in STEPS:
        eager = Method(name, model, gamma_net, objective, data)
        for _ in range(3):
            eager.step()
        row = {"eager_ms": median_ms(eager.step, args.reps)}
        try:
            replay = capture(capturable(Method(name, model, gamma_net, objective, data)).step)
            row["graph_ms"] = median_ms(replay, args.reps)
            row["speedup"] = row["eager_ms"] / row["graph_ms"]
        except Exception as error:  # noqa: BLE001 — the reason a step cannot be captured is the finding
            row["capture_failed"] = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
        result[name] = row
        print(name, row, flush=True)
    if args.json:
        print(json.dumps({"steps": result, "device": torch.cuda.get_device_name(), "torch": torch.__version__}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
