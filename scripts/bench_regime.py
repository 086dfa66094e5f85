#!/usr/bin/env python
"""What the regime options (label noise, a trusted set, a long tail) cost per training step, side by side.

The code: experiments/benchmark/regime_cost.py (options: ``--help``).

    python scripts/bench_regime.py [--config configs/fashion_mnist_overconfident/ce.yaml] [--rounds 5] [--no-write]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's root: experiments/ is not installed
from experiments.benchmark.regime_cost import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
