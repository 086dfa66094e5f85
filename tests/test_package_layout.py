"""The package's rooms (docs/layout.md): at most eight modules stand directly in metacal/, and every module that
moved into a room still answers to its old dotted name for one release, through the import hook of
metacal/__init__.py (the same module object, with a DeprecationWarning pointed at the importing line), with no
file left behind at the old path."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import metacal
from metacal import MOVED

PACKAGE = Path(metacal.__file__).parent


def test_at_most_eight_modules_at_the_root():
    assert len(sorted(PACKAGE.glob("*.py"))) <= 8


@pytest.mark.parametrize("old, new", sorted(MOVED.items()))
def test_an_old_name_is_the_moved_module_with_a_warning(old, new):
    sys.modules.pop(old, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert [str(w.message) for w in caught] == [f"{old} is now {new}; the old name goes in the next release"]
    assert caught[0].category is DeprecationWarning
    assert not (PACKAGE.parent / (old.replace(".", "/") + ".py")).exists()  # no shim file


def test_from_import_of_an_old_path_points_at_the_importing_line():
    script = ("import warnings; warnings.simplefilter('always')\n"
              "from metacal.shift_eval import evaluate_run\n"
              "import metacal.shift.evaluate as new; assert evaluate_run is new.evaluate_run\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=PACKAGE.parent)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ("<string>:2: DeprecationWarning: metacal.shift_eval is now metacal.shift.evaluate; the old "
                           "name goes in the next release\n")


@pytest.mark.parametrize("old, new", [("metacal.evaluate", "metacal.evaluate.cli"),
                                      ("metacal.predict", "metacal.predict.cli")])
def test_a_package_serves_the_names_of_the_module_it_replaced(old, new):
    package = importlib.import_module(old)
    package.__dict__.pop("main", None)
    with pytest.warns(DeprecationWarning, match=f"^{old}.main is now {new}.main;"):
        main = package.main
    assert main is importlib.import_module(new).main
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert package.main is main  # warned once
    with pytest.raises(AttributeError, match="has no attribute 'mian'"):
        package.mian  # noqa: B018
