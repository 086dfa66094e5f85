#!/usr/bin/env python
"""The README's "Which method should I use?" section, generated from docs/results/*.csv.

Thin wrapper of metacal/report/guide.py (options and exit codes: ``--help``).

    python scripts/method_guide.py --readme README.md           # rewrite the section between its markers
    python scripts/method_guide.py --readme README.md --check   # exit 1 when it is stale
"""

import sys

from metacal.report.guide import main

if __name__ == "__main__":
    sys.exit(main())
