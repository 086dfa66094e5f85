#!/usr/bin/env python
"""Train a calibrated classifier from a YAML config (see metacal/train/cli.py for the options).

    python scripts/train.py --config configs/quickstart.yaml
"""

import sys

from metacal.train.cli import main

if __name__ == "__main__":
    sys.exit(main())
