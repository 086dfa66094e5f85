"""``python -m metacal.train``: the trainer's command line (the same as ``scripts/train.py`` and ``metacal-train``)."""

import sys

from metacal.train.cli import main

if __name__ == "__main__":
    sys.exit(main())
