#!/usr/bin/env python
"""Prediction sets per training method: set size at the target coverage against CE, and coverage under shift.

The code: experiments/conformal/ (options: ``--help``).

    python scripts/conformal_report.py report mnist1d_overconfident
    python scripts/conformal_report.py sweep fashion_mnist_overconfident
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's root: experiments/ is not installed
from experiments.conformal.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
