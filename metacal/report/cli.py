"""Results page from a sweep's run directories: a Markdown table laid out like Wang & Golebiowski 2024,
Table 1, paired comparisons over seeds against CE and the best fixed γ, plus CSVs and PNG figures.

    python scripts/report.py RUN_ROOT [--out docs/results/NAME.md] [--title TITLE] [--bins 15] [--seeds 0 1 2]
                             [--calibrators all|none|NAME,NAME,...]
    metacal-report RUN_ROOT ...          # the same, as the installed console script

RUN_ROOT holds <config-stem>/seed<S>/ run directories (scripts/sweep.py --out), all of ONE dataset (a folder
whose runs mix datasets is refused). Rows = config stems (paper labels), mean ± std over seeds. Default
--out: RUN_ROOT/report.md. --calibrators picks the "ECE after …" columns (metacal.posthoc.registry names;
default all; matrix and dirichlet cross-validate λ on every run and dominate the run time of a big report).
Exit code 2 on bad input.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

PROG = "python scripts/report.py"


def available_calibrators() -> list[str]:
    from metacal.posthoc.registry import available

    return available()


def parse_args(argv: list[str] | None = None, prog: str = PROG) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    ap.add_argument("root", metavar="RUN_ROOT", help="directory of run directories (a sweep's --out)")
    ap.add_argument("--out", default=None, help="Markdown file to write (CSV and PNGs go next to it)")
    ap.add_argument("--title", default=None, help="page title (default: 'Results: <RUN_ROOT name>')")
    ap.add_argument("--bins", type=int, default=15, help="equal-width bins for ECE/MCE/classwise ECE, ACE ranges")
    ap.add_argument("--hb-bins", type=int, default=15, help="bins of histogram binning (default 15)")
    ap.add_argument("--seeds", type=int, nargs="+", default=None,
                    help="seeds every method should have (default: all seeds found under RUN_ROOT)")
    ap.add_argument("--calibrators", default=None, metavar="NAMES",
                    help="post-hoc calibrators of the 'ECE after …' columns: all (the default, "
                         "metacal.posthoc.choice: every one fitted on predictions/val.npz alone), none, or a "
                         "comma-separated subset of "
                         f"{','.join(available_calibrators())} (matrix, dirichlet: 5-fold CV per run, a few seconds "
                         "each; ts_nll also gives the temperature the claim section reads; ts_perturbed needs "
                         "`python -m metacal.evaluate RUN --shift SUITE` first)")
    ap.add_argument("--discussion", default=None, metavar="MD",
                    help="Markdown file with the authors' interpretation, appended as the page's Discussion (its "
                         "relative links written from its own folder; they are rebased onto the page's)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv, prog)
    import matplotlib

    matplotlib.use("Agg")
    from metacal.report.page import build_report
    from metacal.report.posthoc_columns import parse_calibrators
    from metacal.writable import page_problem

    out = Path(args.out) if args.out else Path(args.root) / "report.md"
    command = shlex.join([*shlex.split(prog), *argv])
    try:
        if args.hb_bins < 1:
            raise ValueError(f"--hb-bins must be a positive integer, got {args.hb_bins}")
        if problem := page_problem(out):
            raise ValueError(f"--out {problem}")
        calibrators = parse_calibrators(args.calibrators)
        if args.discussion is not None and not Path(args.discussion).is_file():
            raise FileNotFoundError(f"--discussion: no such file: {args.discussion}")
        result = build_report(args.root, out, title=args.title, num_bins=args.bins, hb_bins=args.hb_bins,
                              command=command, expected_seeds=args.seeds, discussion=args.discussion,
                              calibrators=calibrators)
    except (ValueError, FileNotFoundError) as exc:
        print(f"report: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(f"wrote {result.markdown}, {result.csv}, {result.paired_csv} and {len(result.figures)} figures")
    return 0


def console_main() -> int:
    """Entry point of the ``metacal-report`` console script."""
    return main(prog="metacal-report")


if __name__ == "__main__":
    sys.exit(main(prog="python -m metacal.report.cli"))
