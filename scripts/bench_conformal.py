#!/usr/bin/env python
"""Seconds to fit conformal prediction sets and apply them (10,000 × 10 by default), per score, on one CPU thread.

The code: experiments/benchmark/conformal_cost.py (options: ``--help``).

    python scripts/bench_conformal.py [--n 10000] [--classes 10] [--repeats 5] [--no-write]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's root: experiments/ is not installed
from experiments.benchmark.conformal_cost import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
