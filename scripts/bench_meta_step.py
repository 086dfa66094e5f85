#!/usr/bin/env python
"""Cost of one meta step per backend, relative to a plain CE step and a focal step (no meta).

The code: experiments/benchmark/meta_step_cli.py (options: ``--help``).

    python scripts/bench_meta_step.py [--reps 15] [--warmup 2] [--batch 128] [--meta-batch 128]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's root: experiments/ is not installed
from experiments.benchmark.meta_step_cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
