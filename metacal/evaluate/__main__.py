"""``python -m metacal.evaluate``: the evaluate command line (metacal/evaluate/cli.py)."""

import sys

from metacal.evaluate.cli import main

if __name__ == "__main__":
    sys.exit(main())
