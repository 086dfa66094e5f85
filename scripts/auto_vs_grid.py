#!/usr/bin/env python
"""The automatic γ against the γ grid a user would otherwise run, seed by seed, from a sweep's run directories.

The code: experiments/auto_vs_grid.py (options: ``--help``).

    python scripts/auto_vs_grid.py runs/sweep_m1o [--auto auto_gamma "lr x3=runs/m1o_lr3/auto_gamma"] [--out FILE]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's root: experiments/ is not installed
from experiments.auto_vs_grid import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
