#!/usr/bin/env python
"""Training throughput of the small models (images/s for forward + backward + SGD step).

The code: experiments/benchmark/model_cost.py (options: ``--help``).

    python scripts/bench_models.py [--threads 2[,1]] [--batch 128] [--steps 30] [--repeats 5]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's root: experiments/ is not installed
from experiments.benchmark.model_cost import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
