#!/usr/bin/env python
"""Time of the MNIST-1D shift suite's first build (its 25 shifted sets, generated and cached once).

The code: experiments/benchmark/shift_build.py (options: ``--help``).

    python scripts/bench_shift_build.py [--num-samples 20000] [--seed 0] [--json]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's root: experiments/ is not installed
from experiments.benchmark.shift_build import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
