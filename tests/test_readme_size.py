"""The README stays a first page: at most 15 kB (reference material lives in docs/), with its table of contents
linking every second-level section."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
LIMIT = 15_000  # bytes


def test_readme_is_at_most_15_kb():
    size = len(README.read_bytes())
    assert size <= LIMIT, f"README.md is {size} bytes; move reference material to docs/ (limit {LIMIT})"


def test_the_table_of_contents_names_every_section():
    text = README.read_text(encoding="utf-8")
    sections = re.findall(r"^## (.+)$", text, flags=re.M)
    head = text.split("\n## ", 1)[0]
    slug = lambda s: re.sub(r"[^\w\- ]", "", s.lower()).replace(" ", "-")  # GitHub's heading ids (ASCII text)
    missing = [s for s in sections if f"](#{slug(s)})" not in head]
    assert sections and not missing, missing
