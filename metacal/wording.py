"""How an error message names a setting the user can change: the way the caller sets it.

The same check runs under the command line (``--resume``, ``--set data.options.download=true``) and under
Python (``metacal.fit(..., resume=True)``, ``overrides=["data.options.download=true"]``); a message that names
the other interface's spelling sends the user looking for an option that is not there. The code that raises
asks :func:`current` for the :class:`Wording` of whoever called, and says the setting through it::

    w = current()
    raise FileExistsError(f"... pass {w.arg('resume')} to continue it")

The default is Python's (function keywords); the command line runs inside ``speaking(CLI)``. The trainer's
data builder runs inside ``speaking(current().in_config())``: there the dataset's keywords are config options.
"""

from __future__ import annotations

import contextlib
import dataclasses
from contextvars import ContextVar
from pathlib import PurePath
from typing import Any, Iterator


@dataclasses.dataclass(frozen=True)
class Wording:
    """``cli``: command-line flags and ``--set``; else Python keywords, and with ``config`` a config's options
    as the ``overrides`` strings :func:`metacal.fit` and :func:`metacal.train.load_config` take."""

    cli: bool = False
    config: bool = False

    def name(self, keyword: str) -> str:
        """An argument by name: ``--run-dir`` / ``run_dir``."""
        return "--" + keyword.replace("_", "-") if self.cli else keyword

    def arg(self, keyword: str, value: Any = True) -> str:
        """An argument with its value: ``--resume`` / ``resume=True``, ``--run-dir runs/x`` / ``run_dir='runs/x'``."""
        if self.cli:
            return self.name(keyword) if value is True else f"{self.name(keyword)} {value}"
        return f"{keyword}={str(value)!r}" if isinstance(value, PurePath) else f"{keyword}={value!r}"

    def args(self, **arguments: Any) -> str:
        """Several arguments: ``--run-dir runs/x --resume`` / ``run_dir='runs/x', resume=True``."""
        return (" " if self.cli else ", ").join(self.arg(k, v) for k, v in arguments.items())

    def option(self, section: str, key: str, value: Any) -> str:
        """A config option: ``--set data.options.download=true`` / ``overrides=["data.options.download=true"]``;
        outside a config (e.g. :func:`metacal.data.build`), the keyword ``download=True``."""
        item = f"{section}.{key}={_yaml(value)}"
        if self.cli:
            return f"--set {item}"
        return f'overrides=["{item}"]' if self.config else self.arg(key, value)

    def in_config(self) -> Wording:
        """This wording where keywords are a config's options (the trainer building data from ``data.options``)."""
        return self if self.cli else dataclasses.replace(self, config=True)


PYTHON = Wording()
CLI = Wording(cli=True)
_CURRENT: ContextVar[Wording] = ContextVar("metacal_wording", default=PYTHON)


def current() -> Wording:
    """The wording of whoever called (Python unless inside :func:`speaking`)."""
    return _CURRENT.get()


@contextlib.contextmanager
def speaking(wording: Wording) -> Iterator[Wording]:
    """Messages raised inside the block name settings with ``wording``."""
    token = _CURRENT.set(wording)
    try:
        yield wording
    finally:
        _CURRENT.reset(token)


def _yaml(value: Any) -> str:
    """A value as a dot-list override writes it (``true``, ``0.1``, ``name``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)
