"""Check a CUDA machine end to end in one command (under 8 minutes on one GPU): every method family for one short
epoch in fp32 and bf16, ``accelerate launch``, SIGTERM and ``--resume``, and the epoch and meta-step benchmarks;
writes docs/performance_gpu.md. Skips in one line without CUDA; ``--dry-run`` lists the commands.

    python scripts/gpu_check.py [--dry-run] [--out runs/gpu_check] [--output docs/performance_gpu.md]

The checks are in experiments/benchmark/gpu_check.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's root: experiments/ is not installed
from experiments.benchmark.gpu_check import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
