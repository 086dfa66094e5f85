#!/usr/bin/env python
"""Results page (Markdown + CSV + figures) from a sweep's run directories.

Thin wrapper of metacal/report/cli.py (options and exit codes: ``--help``; installed: ``metacal-report``).

    python scripts/report.py runs/sweep_fmnist --out docs/results/fashion_mnist.md
"""

import sys

from metacal.report.cli import main

if __name__ == "__main__":
    sys.exit(main())
