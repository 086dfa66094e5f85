"""The method guide's two generated files and their command line.

    python scripts/method_guide.py --readme README.md   # rewrite README's block and docs/method_guide.md
    python scripts/method_guide.py --check              # exit 1 when either is stale (README.md by default)
    python scripts/method_guide.py                      # print the README block

The README holds the compact block (:mod:`metacal.report.guide_compact`) between its markers; the full guide
(:func:`metacal.report.guide.guide_markdown`) is the whole of ``docs/method_guide.md`` next to the README. Which
pages and methods: ``docs/method_guide.yaml`` next to the README (:mod:`metacal.report.guide_spec`), or ``--pages``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Sequence

from metacal.report.guide import COMMAND, guide_markdown
from metacal.report.guide_compact import compact_markdown
from metacal.report.guide_spec import GuideSpec, load_guide_spec

START, END = "<!-- method-guide:start -->", "<!-- method-guide:end -->"
FULL = Path("docs/method_guide.md")  # relative to the README's folder
SPEC = Path("docs/method_guide.yaml")  # the pages and methods it reads, relative to the README's folder
FULL_TITLE = "# Which method should I use? All measured methods"


def replace_section(text: str, body: str) -> str:
    """``text`` with everything between the START and END markers replaced by ``body``; a ValueError when the
    markers are missing, repeated or out of order."""
    starts, ends = text.count(START), text.count(END)
    if starts != 1 or ends != 1 or text.index(START) > text.index(END):
        raise ValueError(f"method guide: expected one '{START}' followed by one '{END}' in the README "
                         f"(found {starts} and {ends}); add them where the section goes")
    head, rest = text.split(START)
    _, tail = rest.split(END)
    return f"{head}{START}\n{body}{END}{tail}"


def _rel(target: Path, start: Path) -> str:
    return Path(os.path.relpath(target.resolve(), start.resolve())).as_posix()


def render_readme(readme: str | Path, results: str | Path, spec: GuideSpec,
                  full: str | Path | None = None) -> tuple[str, str]:
    """(current README text, README text with a freshly generated compact block); links relative to the README."""
    readme = Path(readme)
    full = Path(full) if full is not None else readme.parent / FULL
    text = readme.read_text(encoding="utf-8")
    body = compact_markdown(results, spec, _rel(Path(results), readme.parent), _rel(full, readme.parent))
    return text, replace_section(text, body)


def render_full(full: str | Path, results: str | Path, spec: GuideSpec) -> tuple[str, str]:
    """(current text of the full guide, "" when absent; its freshly generated text), links relative to it."""
    full = Path(full)
    old = full.read_text(encoding="utf-8") if full.is_file() else ""
    return old, f"{FULL_TITLE}\n\n" + guide_markdown(results, spec, _rel(Path(results), full.parent))


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: print the README block, or rewrite (``--readme``) / check (``--check``) the README's block and the
    full guide. Exit 0 on success, 1 when ``--check`` finds either stale, 2 on bad input."""
    ap = argparse.ArgumentParser(prog="python scripts/method_guide.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--readme", default=None, help="README whose marked block to rewrite (default: print the block; "
                                                   "README.md with --check)")
    ap.add_argument("--full", default=None, help=f"the full guide's file (default: {FULL} next to the README)")
    ap.add_argument("--results", default=None,
                    help="folder of the results CSVs (default: docs/results next to the README, else ./docs/results)")
    ap.add_argument("--pages", default=None, help=f"YAML list of pages and methods (default: {SPEC} next to the "
                                                  "README, else ./" + str(SPEC) + ")")
    ap.add_argument("--check", action="store_true", help="exit 1 if the README's block or the full guide is stale, "
                                                         "write nothing")
    args = ap.parse_args(argv)
    readme = args.readme or ("README.md" if args.check else None)
    results = args.results or (Path(readme).parent / "docs/results" if readme else Path("docs/results"))
    try:
        spec = load_guide_spec(args.pages or (Path(readme).parent / SPEC if readme else SPEC))
        if readme is None:
            sys.stdout.write(compact_markdown(results, spec))
            return 0
        full = Path(args.full) if args.full else Path(readme).parent / FULL
        files = {Path(readme): render_readme(readme, results, spec, full), full: render_full(full, results, spec)}
    except (OSError, ValueError, KeyError) as exc:
        print(f"method_guide: error: {exc}", file=sys.stderr)
        return 2
    stale = [path for path, (old, new) in files.items() if old != new]
    if args.check:
        for path, (old, new) in files.items():
            print(f"{path}: method guide {'STALE; run: ' + COMMAND if old != new else 'up to date'}")
        return 1 if stale else 0
    for path, (old, new) in files.items():
        if old != new:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(new, encoding="utf-8")
        print(f"{path}: method guide {'rewritten' if old != new else 'already up to date'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
