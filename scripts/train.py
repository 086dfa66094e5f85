#!/usr/bin/env python
"""Train a calibrated classifier from a YAML config (options: ``--help``; details: metacal/train/cli.py).

    python scripts/train.py --config configs/quickstart.yaml
    python scripts/train.py --run-dir runs/x --resume        # after a crash, kill or preemption

Exit codes: 0 finished, 1 diverged (NaN/inf; last good checkpoint kept), 2 bad input (one line on stderr),
75 preempted by SIGTERM (checkpoint saved at the current step; rerun with --resume), 130 interrupted by
Ctrl-C (the same; a second Ctrl-C aborts at once).
"""

import sys

from metacal.train.cli import main

if __name__ == "__main__":
    sys.exit(main())
