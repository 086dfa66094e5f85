"""A Discussion file's relative links name files from its own folder; appended to a page in another folder they
are rebased so that they name the same files from there (external links, anchors of the page and code stay)."""

from __future__ import annotations

from metacal.report.discussion import discussion_section, rebase


def test_links_are_rebased_from_the_discussion_folder_onto_the_page(tmp_path):
    folder = tmp_path / "results" / "discussion"
    folder.mkdir(parents=True)
    source = folder / "page.md"
    source.write_text("See [the guide](../../guide.md#at-the-limit), [a sibling page](../other.md) and\n"
                      "![a figure](../fig.png), [here](#numbers), [torch](https://pytorch.org/x.md).\n"
                      "```\n[not a link](../kept.md)\n```\n")
    lines = discussion_section(source, tmp_path / "results" / "page.md")
    assert lines == ["## Discussion", "",
                     "See [the guide](../guide.md#at-the-limit), [a sibling page](other.md) and\n"
                     "![a figure](fig.png), [here](#numbers), [torch](https://pytorch.org/x.md).\n"
                     "```\n[not a link](../kept.md)\n```", ""]


def test_rebase_keeps_what_names_no_relative_file(tmp_path):
    assert rebase("mailto:a@b.c", tmp_path, tmp_path / "x") == "mailto:a@b.c"
    assert rebase("/abs/page.md", tmp_path, tmp_path / "x") == "/abs/page.md"
    assert rebase("page.md#a", tmp_path / "d", tmp_path) == "d/page.md#a"
