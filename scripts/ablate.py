#!/usr/bin/env python
"""Run one ablation study and write its page (Markdown + CSV + figures); see experiments/ablations/cli.py.

    python scripts/ablate.py --help                        # the studies, one line each, and the common options
    python scripts/ablate.py bins --quick --out /tmp/abl
    python scripts/ablate.py ground_truth                  # full mode → runs/ablations/ground_truth/ground_truth.md
    python scripts/ablate.py ground_truth --out docs/ablations   # regenerate the published page
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's root: experiments/ is not installed
from experiments.ablations.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
