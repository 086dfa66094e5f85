"""The MNIST-1D shift suite's first build: every shifted set (5 families × 5 severities) generated and cached once,
timed in a fresh temporary cache folder, so nothing cached before is read and nothing is left behind.

    python scripts/bench_shift_build.py [--num-samples 20000] [--seed 0] [--json]

The default is the quickstart's data (configs/quickstart.yaml: MNIST-1D, 20,000 samples, seed 0): what the first
``python -m metacal.evaluate RUN --shift mnist1d_natural`` of such a run generates before it evaluates anything
(docs/evaluation.md). Prints the seconds (wall-clock and this process's CPU), the sets' size on disk and the machine;
on a shared machine other jobs lengthen the wall-clock time, not the CPU time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from metacal.machine import cpu_model


def measure(num_samples: int, seed: int) -> dict[str, Any]:
    """Build the suite of MNIST-1D (``num_samples``, ``seed``) into a temporary folder; its cost and size."""
    from metacal.data.mnist1d import generator_args
    from metacal.data.mnist1d_shift import build_cache

    args = generator_args(num_samples, seed)
    with tempfile.TemporaryDirectory(prefix="metacal-shift-build-") as folder:
        wall, cpu = time.perf_counter(), time.process_time()
        built = build_cache(args, cache_dir=Path(folder), progress=False)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        size = sum(p.stat().st_size for p in Path(folder).rglob("*.npz"))
    return {"num_samples": num_samples, "seed": seed, "sets": built, "wall_s": wall, "cpu_s": cpu,
            "bytes": size, "cpu": cpu_model(), "cores": os.cpu_count()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_shift_build.py", description=__doc__.splitlines()[0])
    parser.add_argument("--num-samples", type=int, default=20_000, help="MNIST-1D samples (default: the quickstart's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a line")
    args = parser.parse_args(argv)
    if args.num_samples < 10 or args.seed < 0:
        print("bench_shift_build.py: error: --num-samples must be >= 10 and --seed >= 0", file=sys.stderr)
        return 2
    result = measure(args.num_samples, args.seed)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"MNIST-1D shift suite, {result['num_samples']} samples: {result['sets']} sets, "
              f"{result['bytes'] / 1e6:.0f} MB, {result['wall_s']:.0f} s wall-clock, {result['cpu_s']:.0f} s CPU "
              f"on {result['cpu']} ({result['cores']} logical cores)")
    return 0
