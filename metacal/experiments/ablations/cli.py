"""``python scripts/ablate.py NAME [--quick] [--out DIR] [--work DIR] [--seed S] [--runs DIR ...]``
(gamma_oracle, meta_signal and meta_horizon also take ``[--regime R] [--seeds N]``).

Bad input (unknown study, missing run directory, bad config) → one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

DEFAULT_OUT = Path("docs/ablations")
QUICK_OUT = Path("runs/ablations-quick")


def parser(names: list[str]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ablate.py", description="Run one ablation study and write its page.")
    sub = p.add_subparsers(dest="study", required=True, metavar="NAME", help=", ".join(names))
    for name in names:
        s = sub.add_parser(name, help=f"study {name}")
        s.add_argument("--quick", action="store_true", help="tiny smoke-test settings (seconds, not a result)")
        s.add_argument("--out", type=Path, default=None,
                       help=f"page directory (default {DEFAULT_OUT}; with --quick {QUICK_OUT})")
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
    from metacal.experiments.ablations import STUDIES, StudyOptions
    from metacal.registry import UnknownNameError

    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser(STUDIES.available()).parse_args(argv)
    out = args.out or (QUICK_OUT if args.quick else DEFAULT_OUT)
    work = args.work or (out / "_runs" / args.study if args.quick else Path("runs/ablations") / args.study)
    command = "python scripts/ablate.py " + " ".join(shlex.quote(a) for a in argv)
    opts = StudyOptions(quick=args.quick, out=out, work=work, command=command, seed=args.seed,
                        runs=getattr(args, "runs", None), regime=getattr(args, "regime", None),
                        num_seeds=getattr(args, "num_seeds", None))
    t0 = time.time()
    try:
        result = STUDIES.get(args.study)(opts)
    except (ValueError, FileNotFoundError, UnknownNameError) as err:
        print(f"ablate.py {args.study}: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    print(f"wrote {result.markdown} ({len(result.csvs)} CSV, {len(result.figures)} figures) "
          f"in {time.time() - t0:.1f} s")
    return 0
