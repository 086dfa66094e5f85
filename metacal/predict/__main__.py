"""``python -m metacal.predict``: the predict command line (metacal/predict/cli.py)."""

import sys

from metacal.predict.cli import main

if __name__ == "__main__":
    sys.exit(main())
