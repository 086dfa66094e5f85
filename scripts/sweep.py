#!/usr/bin/env python
"""Run a grid of training configs × seeds; finished runs are skipped, interrupted ones resumed.

Thin wrapper of metacal/sweep/cli.py (options and exit codes: ``--help``; installed: ``metacal-sweep``).

    python scripts/sweep.py --base configs/fashion_mnist/base.yaml --methods ce focal3 auto_gamma \
        --seeds 0 1 2 --out runs/sweep_fmnist --jobs 2
"""

import sys

from metacal.sweep.cli import main

if __name__ == "__main__":
    sys.exit(main())
