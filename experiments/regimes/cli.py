"""The regime study's command line (``scripts/regime_study.py``):

    python scripts/regime_study.py arrays                         # the own-data study's .npz (once)
    python scripts/regime_study.py sweep [--studies ...] [--jobs 2] [--seeds 0 1 2 3 4] [--dry-run]
    python scripts/regime_study.py report noisy_labels|overlap|long_tail [--out docs/results/<page>.md] [--no-cache]

``sweep`` runs each regime's ``scripts/sweep.py`` in turn (each resumes: finished runs are skipped); the pages print
those commands. ``report`` writes one page from the studies that name it (experiments/regimes/page.py); each run's
numbers are cached (experiments/regimes/numbers_cache.py), so a second report only scores new or retrained runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from .study import ARRAYS, SEEDS, STUDIES, study

SWEEP_PROG = "python scripts/sweep.py"


def write_arrays(path: Path = ARRAYS, n: int = 5000, seed: int = 0) -> Path:
    """``n`` Fashion-MNIST training images (the first of a seeded permutation of the 60,000) and the 10,000 test
    images as rows of 784 pixel values in [0, 1], float32, with their labels and class names (metacal/data/arrays.py)."""
    import torch

    from metacal.data.fashion_mnist import CLASSES, read_fashion_mnist

    train, test = read_fashion_mnist()
    keep = torch.randperm(len(train), generator=torch.Generator().manual_seed(seed))[:n].sort().values
    rows = lambda images: (images.reshape(len(images), -1).float() / 255).numpy()  # noqa: E731
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, x_train=rows(train.images[keep]), y_train=train.targets[keep].numpy(),
             x_test=rows(test.images), y_test=test.targets.numpy(), classes=np.array(CLASSES))
    return path


def sweep(names: list[str], seeds: list[int], jobs: int, dry_run: bool) -> int:
    """Every regime of the named studies, one ``scripts/sweep.py`` after another; the first failure's exit code."""
    from metacal.sweep.cli import main as sweep_main

    worst = 0
    for s in [study(n) for n in names]:
        if any("data.root=" + str(ARRAYS) in x for x in s.sets) and not ARRAYS.is_file() and not dry_run:
            print(f"regime_study: writing {write_arrays()}", flush=True)
        for regime in s.regimes:
            argv = s.sweep_argv(regime, seeds, jobs) + (["--dry-run"] if dry_run else [])
            print(f"== {s.name}/{regime.name}: {SWEEP_PROG} {' '.join(argv)}", flush=True)
            code = sweep_main(argv, prog=SWEEP_PROG)
            worst = worst or code
    return worst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/regime_study.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    arrays = sub.add_parser("arrays", help="write the own-data study's .npz")
    arrays.add_argument("--out", type=Path, default=ARRAYS)
    run = sub.add_parser("sweep", help="train every regime's grid (resumes)")
    run.add_argument("--studies", nargs="+", default=[s.name for s in STUDIES], metavar="STUDY")
    run.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    run.add_argument("--jobs", type=int, default=1)
    run.add_argument("--dry-run", action="store_true")
    report = sub.add_parser("report", help="write one page")
    report.add_argument("page", choices=sorted({s.page for s in STUDIES}))
    report.add_argument("--out", type=Path, default=None, help="default docs/results/<page>.md")
    report.add_argument("--no-cache", action="store_true",
                        help="score every run afresh (the cache: $XDG_CACHE_HOME/metacal/regime_numbers)")
    args = parser.parse_args(argv)
    try:
        if args.command == "arrays":
            print(write_arrays(args.out))
            return 0
        if args.command == "sweep":
            return sweep(args.studies, args.seeds, args.jobs, args.dry_run)
        from .numbers_cache import default_dir
        from .page import write_page

        out = args.out or Path("docs/results") / f"{args.page}.md"
        print(write_page(args.page, out, None if args.no_cache else default_dir()))
        return 0
    except (ValueError, FileNotFoundError) as exc:
        print(f"regime_study: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
