"""``python scripts/conformal_report.py report STUDY`` writes docs/results/conformal_<STUDY>.md (with .csv and .png);
``sweep STUDY`` trains the runs it reads (scripts/sweep.py, resumable)."""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

from tqdm.auto import tqdm

from metacal.registry import unknown_name
from metacal.writable import folder_problem

from .numbers import collect
from .numbers_cache import default_dir
from .page import write_page
from .study import GRID, METHODS, STUDIES

PROG = "python scripts/conformal_report.py"


def study_of(name: str):
    found = {s.name: s for s in STUDIES}
    if name not in found:
        raise ValueError(unknown_name("prediction-set study", name, list(found)))
    return found[name]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("report", help="write the study's page from its runs")
    rep.add_argument("study", help=", ".join(s.name for s in STUDIES))
    rep.add_argument("--out", default="docs/results", help="folder of the page (default docs/results)")
    rep.add_argument("--no-shift", action="store_true", help="leave out coverage under shift (faster)")
    rep.add_argument("--no-cache", action="store_true",
                     help="score every run afresh (the cache: $XDG_CACHE_HOME/metacal/conformal_numbers)")
    swp = sub.add_parser("sweep", help="train the study's runs (scripts/sweep.py; finished runs are skipped)")
    swp.add_argument("study")
    swp.add_argument("--dry-run", action="store_true", help="print the command only")
    args = parser.parse_args(argv)
    try:
        study = study_of(args.study)
        if args.command == "sweep":
            print(study.sweep_command())
            return 0 if args.dry_run else subprocess.call(shlex.split(study.sweep_command()))
        problem = folder_problem(Path(args.out))
        if problem:
            raise ValueError(problem)
        stems = tuple(dict.fromkeys((*study.swept, *(m for m in METHODS if m != GRID))))
        total = sum(len(list((study.runs / s).glob("seed*"))) for s in stems if (study.runs / s).is_dir())
        if total == 0:
            raise FileNotFoundError(f"no runs under {study.runs}; train them with {PROG} sweep {study.name}")
        with tqdm(total=total, desc=f"prediction sets of {study.name}", leave=False) as bar:
            runs = collect(study, stems, shift=not args.no_shift, progress=bar,
                           cache=None if args.no_cache else default_dir())
        print(write_page(study, runs, Path(args.out)))
    except (ValueError, FileNotFoundError, OSError) as err:
        print(f"{PROG}: error: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    return 0
