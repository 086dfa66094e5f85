#!/usr/bin/env python
"""The automatic γ's cost against CE's, side by side in one run: the same regime and seed, trained in
rotating order (CE, focal, auto; focal, auto, CE; …) so that a busy machine slows each alike. Focal loss at
its fixed γ separates what the focal loss itself costs from what the controller adds.

The code: experiments/benchmark/auto_cost.py (options: ``--help``).

    python scripts/bench_auto.py --regime mnist1d_overconfident --repeats 2 [--set run.torch_threads=1]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's root: experiments/ is not installed
from experiments.benchmark.auto_cost import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
