#!/usr/bin/env python
"""Where one temperature may not be enough: noisy labels, overlapping classes, a long tail — sweeps and pages.

The code: experiments/regimes/ (options: ``--help``).

    python scripts/regime_study.py sweep --jobs 2
    python scripts/regime_study.py report noisy_labels
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's root: experiments/ is not installed
from experiments.regimes.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
