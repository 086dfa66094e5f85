#!/usr/bin/env python
"""Run one ablation study and write its page (Markdown + CSV + figures); see metacal/experiments/ablations/cli.py.

    python scripts/ablate.py bins --quick --out /tmp/abl
    python scripts/ablate.py ground_truth                  # full mode → docs/ablations/ground_truth.md
"""

import sys

from metacal.experiments.ablations.cli import main

if __name__ == "__main__":
    sys.exit(main())
