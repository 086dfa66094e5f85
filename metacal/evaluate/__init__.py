"""``python -m metacal.evaluate``: saved predictions (``files``: metrics before and after post-hoc calibration,
``ood``: OOD detection against a second file) or a finished run on shifted or new data (``run_options``, the command
line of :mod:`metacal.shift`); the command line itself is ``cli``."""

from typing import Any

from metacal import moved_attribute

#: the names of the module this package replaced, and where each is now (served for one release)
OLD_NAMES = {"main": "cli", "console_main": "cli", "build_parser": "cli", "prediction_files": "cli",
             "bootstrap_spec": "cli", "PROG": "cli", "InputError": "files", "evaluate": "files",
             "fit_calibrators": "files", "format_table": "files", "TABLE_ROWS": "files"}


def __getattr__(name: str) -> Any:
    return moved_attribute(__name__, name, OLD_NAMES)
