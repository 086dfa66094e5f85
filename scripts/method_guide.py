#!/usr/bin/env python
"""The method guide, generated from docs/results/*.csv: README's "Which method should I use?" block (compact)
and docs/method_guide.md (every method).

Thin wrapper of metacal/report/guide_cli.py (options and exit codes: ``--help``).

    python scripts/method_guide.py --readme README.md   # rewrite README's block and docs/method_guide.md
    python scripts/method_guide.py --check              # exit 1 when either is stale
"""

import sys

from metacal.report.guide_cli import main

if __name__ == "__main__":
    sys.exit(main())
