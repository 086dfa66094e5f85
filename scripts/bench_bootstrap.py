#!/usr/bin/env python
"""Cost of the bootstrap intervals: the batched path against a loop of summary() calls, and the skipped metrics.

The code: experiments/benchmark/bootstrap_cost.py (options: ``--help``).

    python scripts/bench_bootstrap.py [--n 10000] [--k 10] [--bootstrap 1000] [--bins 15] [--repeats 3]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's root: experiments/ is not installed
from experiments.benchmark.bootstrap_cost import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
