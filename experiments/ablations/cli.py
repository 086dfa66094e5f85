"""``python scripts/ablate.py NAME [--quick] [--out DIR] [--work DIR] [--seed S] [--runs DIR ...]``
(gamma_oracle, meta_signal and meta_horizon also take ``[--regime R] [--seeds N]``).

Where things go: without ``--out`` the page goes to ``runs/ablations/NAME/`` (``runs/ablations-quick/`` with
``--quick``), never into the tracked ``docs/ablations/`` — pass ``--out docs/ablations`` to regenerate a
published page. Training runs go to ``--work`` (default ``runs/ablations/NAME``; with ``--quick``
``<out>/_runs/NAME``). Both are printed before the study starts, and each training run prints its variant.

Bad input (unknown study, missing run directory, bad config) → one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
import time
from pathlib import Path
from typing import Callable

DEFAULT_OUT = Path("runs/ablations")  # + /<name>: a full study's page stays out of the tracked docs/
QUICK_OUT = Path("runs/ablations-quick")
PUBLISHED = Path("docs/ablations")
SUMMARY_WIDTH = 110

COMMON_HELP = f"""\
every study takes:
  --quick       tiny smoke-test settings (seconds, not a result); page marked QUICK MODE, default --out {QUICK_OUT}
  --out DIR     where the page (NAME.md, CSVs, figures) goes; default {DEFAULT_OUT}/NAME
                (pass --out {PUBLISHED} to regenerate a published page)
  --work DIR    where the study's training runs go; default runs/ablations/NAME
  --seed S      first seed (default 0)
python scripts/ablate.py NAME --help lists a study's own options."""


def study_summary(study: Callable, name: str) -> str:
    """One line on what a study does: the first sentence of its module docstring, without the "Study ``name``"
    prefix and parenthesised citations, cut at ``SUMMARY_WIDTH`` characters."""
    doc = sys.modules[study.__module__].__doc__ or ""
    text = " ".join(doc.strip().split("\n\n")[0].split())
    text = re.sub(rf"^Study ``{re.escape(name)}``\s*", "", text).replace("``", "")
    text = re.sub(r"\s*\([^()]*\)", "", text).lstrip(": ").strip()
    end = re.search(r"(?<=[.?!])\s", text)
    text = text[:end.start()] if end else text
    if len(text) > SUMMARY_WIDTH:
        text = text[:SUMMARY_WIDTH].rsplit(" ", 1)[0].rstrip(",;:—- ") + " …"
    return text


def parser(names: list[str], summaries: dict[str, str] | None = None) -> argparse.ArgumentParser:
    summaries = summaries or {}
    width = max(map(len, names), default=0)
    studies = "\n".join(f"  {name:<{width}}  {summaries.get(name, '')}".rstrip() for name in names)
    p = argparse.ArgumentParser(prog="ablate.py", description="Run one ablation study and write its page.",
                                epilog=f"studies:\n{studies}\n\n{COMMON_HELP}",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="study", required=True, metavar="NAME", help="one of the studies below")
    for name in names:
        s = sub.add_parser(name, description=summaries.get(name))
        s.add_argument("--quick", action="store_true", help="tiny smoke-test settings (seconds, not a result)")
        s.add_argument("--out", type=Path, default=None,
                       help=f"page directory (default {DEFAULT_OUT}/{name}; with --quick {QUICK_OUT}; "
                            f"--out {PUBLISHED} updates the published page)")
        s.add_argument("--work", type=Path, default=None,
                       help="where the study's training runs go (default runs/ablations/<name>, or <out>/_runs)")
        s.add_argument("--seed", type=int, default=0)
        if name in REGIME_STUDIES:
            s.add_argument("--regime", default=None,
                           help="configs/<regime> to train (default mnist1d_overconfident; or fashion_mnist_overconfident)")
            s.add_argument("--seeds", type=int, default=None, dest="num_seeds",
                           help=f"number of seeds, from --seed on (default {REGIME_STUDIES[name]})")
        if name == "bins":
            s.add_argument("--runs", type=Path, nargs="+", default=None,
                           help="existing run directories (with predictions/test.npz) instead of training")
    return p


# the studies trained on an over-confident regime, with their default number of seeds
REGIME_STUDIES = {"gamma_oracle": 3, "meta_signal": 2, "meta_horizon": 2}


def main(argv: list[str] | None = None) -> int:
    from experiments.ablations import STUDIES, StudyOptions
    from metacal.registry import UnknownNameError
    from metacal.writable import folder_problem

    argv = list(sys.argv[1:] if argv is None else argv)
    names = STUDIES.available()
    args = parser(names, {n: study_summary(STUDIES.get(n), n) for n in names}).parse_args(argv)
    out = args.out or (QUICK_OUT if args.quick else DEFAULT_OUT / args.study)
    work = args.work or (out / "_runs" / args.study if args.quick else Path("runs/ablations") / args.study)
    hint = "" if args.out or args.quick else f" (default; --out {PUBLISHED} updates the published page)"
    print(f"ablate.py {args.study}: page → {out / args.study}.md{hint}; training runs → {work}", flush=True)
    command = "python scripts/ablate.py " + " ".join(shlex.quote(a) for a in argv)
    opts = StudyOptions(quick=args.quick, out=out, work=work, command=command, seed=args.seed,
                        runs=getattr(args, "runs", None), regime=getattr(args, "regime", None),
                        num_seeds=getattr(args, "num_seeds", None))
    t0 = time.time()
    try:
        for flag, folder in (("--out", out), ("--work", work)):  # before the study trains, maybe for hours
            if problem := folder_problem(folder):
                raise ValueError(f"{flag} {problem}")
        result = STUDIES.get(args.study)(opts)
    except (ValueError, FileNotFoundError, UnknownNameError) as err:
        print(f"ablate.py {args.study}: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    print(f"wrote {result.markdown} ({len(result.csvs)} CSV, {len(result.figures)} figures) "
          f"in {time.time() - t0:.1f} s")
    return 0
