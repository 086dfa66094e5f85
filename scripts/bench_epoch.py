"""Seconds per training epoch split into loader, step and other (evaluation, logging), host reads per step, per
method, and the train loader alone with whole batches (``data.batched: true``) beside the per-sample path.

    python scripts/bench_epoch.py [--configs configs/fashion_mnist_resnet_overconfident/ce.yaml ...]
        [--methods ce focal auto_gamma flgamma_sece] [--steps 20] [--cpu] [--threads 1]
        [--output docs/performance.md | --no-write] [--json]

Each method is the config of the same name next to the given one (``…/focal.yaml``); a folder stands for its
``ce.yaml``. A config or method that does not load, or missing data, is one line and exit 2, before anything is
written. ``--steps N`` times N iterations and scales the loader and step columns to the full epoch (the evaluation
is run in full). The loader comparison iterates one full epoch of each path. Numbers in docs/performance.md come
only from this script (the section between its markers; experiments/benchmark/epoch.py holds the measurement).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's root: experiments/ is not installed
from experiments.benchmark.epoch_report import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
