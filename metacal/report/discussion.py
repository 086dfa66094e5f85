"""A results page's Discussion: a Markdown file written by people (docs/results/discussion/<page>.md), appended to
the generated page. Its relative links are written from its own folder, so they work where the file lies; they
are rebased onto the page's folder when it is appended, so they work on the page too (tests/test_doc_links.py
checks both). External links (``https:``, ``mailto:`` …) and links to an anchor of the same page stay as written.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

#: ``[label](target ...)`` or ``![alt](target ...)``: group 1 is everything up to the target, group 2 the target
LINK = re.compile(r"(!?\[[^\]]*\]\(\s*)([^\s)]+)")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
FENCE = re.compile(r"^\s*(```|~~~)")


def rebase(target: str, source_dir: Path, page_dir: Path) -> str:
    """``target`` as written in a file of ``source_dir``, rewritten to name the same file from ``page_dir``."""
    if SCHEME.match(target) or target.startswith(("#", "/")):
        return target
    path, hash_, anchor = target.partition("#")
    moved = Path(os.path.relpath(os.path.normpath(source_dir / path), page_dir)).as_posix()
    return moved + hash_ + anchor


def rebased_links(text: str, source_dir: Path, page_dir: Path) -> str:
    """``text`` with every link outside fenced code rebased from ``source_dir`` onto ``page_dir``."""
    lines, in_code = [], False
    for line in text.split("\n"):
        if FENCE.match(line):
            in_code = not in_code
        elif not in_code:
            line = LINK.sub(lambda m: m.group(1) + rebase(m.group(2), source_dir, page_dir), line)
        lines.append(line)
    return "\n".join(lines)


def discussion_text(source: str | Path, page: str | Path) -> str:
    """The Markdown file ``source`` with its links rebased for the page written at ``page``."""
    source, page = Path(source), Path(page)
    return rebased_links(source.read_text(encoding="utf-8"), source.resolve().parent, page.resolve().parent)


def discussion_section(source: str | Path, page: str | Path) -> list[str]:
    """A page's lines for its Discussion file ``source`` (:func:`discussion_text`) under the heading "Discussion"."""
    return ["## Discussion", "", discussion_text(source, page).strip(), ""]
