#!/usr/bin/env python
"""Shift results page of one regime (Markdown + CSV + figures) from a sweep evaluated with
``python -m metacal.evaluate RUN --shift SUITE [--ood SET]``.

Thin launcher of metacal/report/shift_page.py (options and exit codes: ``--help``).

    python scripts/shift_report.py runs/sweep_fmnist --suite corruptions --out docs/results/fmnist_shift.md
"""

import sys

from metacal.report.shift_page import main

if __name__ == "__main__":
    sys.exit(main())
