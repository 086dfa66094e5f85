"""metacal.writable.folder_problem: the nearest existing folder decides, and nothing is created."""

import os

from metacal.writable import folder_problem


def test_a_new_folder_below_existing_ones_is_fine_and_not_made(tmp_path):
    assert folder_problem(tmp_path) is None
    assert folder_problem(tmp_path / "a" / "b" / "c") is None
    assert list(tmp_path.iterdir()) == []


def test_a_file_on_the_way_is_named(tmp_path):
    (tmp_path / "f").write_text("")
    assert folder_problem(tmp_path / "f") == f"{tmp_path / 'f'} cannot be written: {tmp_path / 'f'} is a file"
    assert folder_problem(tmp_path / "f" / "x" / "y") == (f"{tmp_path / 'f' / 'x' / 'y'} cannot be written: "
                                                          f"{tmp_path / 'f'} is a file")


def test_a_folder_without_write_permission_is_named(tmp_path, monkeypatch):
    """os.access decides (root passes it everywhere, so the answer is set here rather than by chmod)."""
    locked = tmp_path / "locked"
    locked.mkdir()
    monkeypatch.setattr(os, "access", lambda path, mode: os.fspath(path) != os.fspath(locked))
    assert folder_problem(locked / "x") == f"{locked / 'x'} cannot be written: no permission in {locked}"
    assert folder_problem(tmp_path / "free") is None


def test_a_page_needs_a_file_name_in_a_folder_that_can_be_made(tmp_path):
    from metacal.writable import page_problem

    assert page_problem(tmp_path / "new" / "page.md") is None
    assert page_problem(tmp_path) == f"{tmp_path} is a folder; give the page's file name"
    (tmp_path / "f").write_text("")
    page = tmp_path / "f" / "page.md"
    assert page_problem(page) == f"{page} cannot be written: {tmp_path / 'f'} is a file"
    assert page_problem(tmp_path / "f") is None  # an existing page is overwritten
