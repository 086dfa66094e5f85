"""Every relative link of README.md and of the Markdown under docs/ resolves: the file or folder it names exists,
and its ``#anchor`` is a heading of the target page under GitHub's rule for heading ids (or an explicit
``<a id=…>``/``<a name=…>``). External links (http, https, mailto) are not followed.

GitHub's rule (github-slugger): the heading's text as rendered (code spans, emphasis and link targets gone),
lowercased; every character that is not a letter, a digit, a combining mark, ``_``, ``-`` or a space is dropped
(letters of every script stay: ``γ``); each space becomes ``-``. A heading whose slug was already taken on the
page gets ``-1``, ``-2``, … in order.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from pathlib import Path
from urllib.parse import unquote

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")])

FENCE = re.compile(r"^ {0,3}(```|~~~)")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)"
                         r"(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
HTML_ID = re.compile(r"<a\s[^>]*?(?:id|name)\s*=\s*[\"']([^\"']+)[\"']", re.I)
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # http:, https:, mailto:, …


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    out, fence = [], None
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line)
        if match and (fence is None or match.group(1) == fence):
            fence = match.group(1) if fence is None else None
            continue
        if fence is None:
            out.append((number, line))
    return out


def heading_text(raw: str) -> str:
    """What a heading shows: code spans keep their text, links their label, images their alt text."""
    text = re.sub(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)", r"\1", raw)
    text = re.sub(r"<[^>]+>", "", text)
    return CODE_SPAN.sub(lambda m: m.group(0).strip("`").strip(), text)


def slug(text: str) -> str:
    """GitHub's id of a heading's ``text`` (module docstring), before duplicates are numbered."""
    kept = [c for c in heading_text(text).lower()
            if c in "-_ " or unicodedata.category(c)[0] in "LMN"]
    return "".join(kept).replace(" ", "-")


@lru_cache(maxsize=None)
def anchors(page: Path) -> frozenset[str]:
    """Every id ``page`` defines: its headings' slugs (duplicates numbered) and explicit HTML anchors."""
    seen: dict[str, int] = {}
    ids = set()
    for _, line in prose_lines(page.read_text(encoding="utf-8")):
        ids.update(HTML_ID.findall(line))
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        ids.add(base if count == 0 else f"{base}-{count}")
    return frozenset(ids)


def links(page: Path) -> list[tuple[int, str]]:
    """(line, target) of every inline link, image and reference definition outside code."""
    found = []
    for number, line in prose_lines(page.read_text(encoding="utf-8")):
        line = CODE_SPAN.sub("", line)
        targets = [m.group(1) for m in INLINE_LINK.finditer(line)]
        if ref := REFERENCE.match(line):
            targets.append(ref.group(1))
        found += [(number, t.strip("<>")) for t in targets if t]
    return found


def shown(path: Path) -> str:
    return str(path.relative_to(REPO) if path.is_relative_to(REPO) else path)


def problem(page: Path, target: str) -> str | None:
    """Why ``target`` (a link on ``page``) does not resolve, or None when it does (or is external)."""
    if EXTERNAL.match(target):
        return None
    path_part, _, anchor = target.partition("#")
    path = (page.parent / unquote(path_part)).resolve() if path_part else page
    if not path.exists():
        return f"no such file {shown(path)}"
    if anchor and path.suffix == ".md" and unquote(anchor) not in anchors(path):
        return f"no heading #{anchor} in {shown(path)}"
    return None


def test_the_slug_rule():
    assert slug("Quickstart: the recommended path") == "quickstart-the-recommended-path"
    assert slug("Focal, auto γ: one run instead of a γ grid") == "focal-auto-γ-one-run-instead-of-a-γ-grid"
    assert slug("`eval.select_by` and ties") == "evalselect_by-and-ties"
    assert slug("A [linked](x.md) *word* — and 2 > 1") == "a-linked-word--and-2--1"


def test_duplicate_headings_are_numbered(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# Notes\n\n## Notes\n\n```\n# Notes\n```\n\n### Notes\n<a id=\"here\"></a>\n")
    assert anchors(page) == {"notes", "notes-1", "notes-2", "here"}
    assert problem(page, "#notes-2") is None and problem(page, "#notes-3") == f"no heading #notes-3 in {page}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page):
    broken = [f"{shown(page)}:{line}: ({target}) {why}"
              for line, target in links(page) if (why := problem(page, target)) is not None]
    assert not broken, "\n".join(broken)
