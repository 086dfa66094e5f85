#!/usr/bin/env python
"""Cost of the affine post-hoc fits: Newton's method against L-BFGS-B, side by side on the same data.

The code: experiments/benchmark/posthoc_cost.py (options: ``--help``).

    python scripts/bench_posthoc.py [--n 6000] [--k 10] [--predictions VAL.npz] [--json]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's root: experiments/ is not installed
from experiments.benchmark.posthoc_cost import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
