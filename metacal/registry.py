"""Name → constructor registries, so that configs can name losses, objectives, models and datasets.

:func:`unknown_name` words the one-line error for a name that is not known — every registry, the
``torchvision:<name>`` lookup and the config's fixed choices (schedules, meta backends, …) use it: the
closest names first ("did you mean …?", :func:`difflib.get_close_matches`), then the names themselves when
they are few, else where the full list is (a ``python -c`` command), so the line stays short.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Sequence
from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")

SHORT_LIST = 110  # characters: a list of names up to this long is printed in full (the line stays < ~200)


def close_matches(name: object, names: Sequence[str], n: int = 3) -> list[str]:
    """Up to ``n`` of ``names`` closest to ``name``, best first (none when nothing is close)."""
    return difflib.get_close_matches(str(name), [str(v) for v in names], n=n, cutoff=0.6)


def list_command(module: str, call: str = "available()") -> str:
    """The shell command that prints a module's full list of names."""
    return f"python -c 'import {module} as m; print(m.{call})'"


def unknown_name(kind: str, name: object, names: Sequence[str], full_list: str | None = None,
                 more: Sequence[str] = ()) -> str:
    """``unknown <kind> '<name>'; did you mean a, b? available: …`` — one short line.

    ``names`` are listed when they fit in :data:`SHORT_LIST` characters; otherwise ``full_list`` (e.g.
    :func:`list_command`) says where to see them (without it, the first few are shown with the count).
    ``more``: further candidates for "did you mean" only (e.g. ``torchvision:<name>`` for a model name)."""
    names = [str(v) for v in names]
    close = close_matches(name, [*names, *more])
    hint = f"did you mean {', '.join(close)}? " if close else ""
    listed = ", ".join(names)
    if len(listed) <= SHORT_LIST:
        tail = f"available: {listed}"
    elif full_list is not None:
        tail = f"full list: {full_list}"
    else:
        shown = ", ".join(names[:6])
        tail = f"available: {shown}, … ({len(names)} in all)"
    return f"unknown {kind} {str(name)!r}; {hint}{tail}"


class UnknownNameError(KeyError):
    """Raised for a name that is not registered; the message (:func:`unknown_name`) suggests the closest
    valid names and says where they are all listed."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


def keyed(key: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` built from the settings under config key ``key``: a TypeError or ValueError it raises
    (an option it does not take, a bad value) becomes one ValueError line ``<key>: <reason>`` (the reason alone when
    ``key`` is empty: a message that names its keys itself); an unknown name and a missing file pass unchanged."""
    try:
        return fn(*args, **kwargs)
    except UnknownNameError:
        raise
    except (TypeError, ValueError) as err:
        if isinstance(err, FileNotFoundError):
            raise
        reason = " ".join(str(err).split())
        raise ValueError(f"{key}: {reason}" if key else reason) from None


class Registry(Generic[T]):
    """A named collection of constructors; every name and every option is checked here, once.

    >>> LOSSES = Registry("loss")
    >>> @LOSSES.register("ce")
    ... class CrossEntropy: ...
    >>> LOSSES.build("ce")
    """

    def __init__(self, kind: str, listing: str | None = None, supplied: Sequence[str] = ()) -> None:
        """``kind`` names the entries in messages; ``listing`` is the module whose ``available()`` prints
        them all (the "full list" of :func:`unknown_name`); ``supplied`` are the constructor arguments the
        caller fills in (a dataset's ``root`` and ``seed``), not options a config may set."""
        self.kind = kind
        self.listing = listing
        self.supplied = tuple(supplied)
        self._entries: dict[str, Callable[..., T]] = {}

    def register(self, name: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
        def add(fn: Callable[..., T]) -> Callable[..., T]:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._entries[name] = fn
            return fn

        return add

    def get(self, name: str, more: Sequence[str] = ()) -> Callable[..., T]:
        """The constructor of ``name``; an unknown name raises :class:`UnknownNameError` worded by
        :func:`unknown_name` (``more``: further "did you mean" candidates)."""
        if name not in self._entries:
            listing = list_command(self.listing) if self.listing else None
            raise UnknownNameError(unknown_name(self.kind, name, self.available(), listing, more))
        return self._entries[name]

    def options(self, name: str) -> list[str] | None:
        """The keyword options ``name``'s constructor takes (its parameters without :attr:`supplied` and
        positional-only ones); None when it takes ``**kwargs`` (then it checks them itself)."""
        params = inspect.signature(self.get(name)).parameters.values()
        if any(p.kind is p.VAR_KEYWORD for p in params):
            return None
        return [p.name for p in params if p.name not in self.supplied
                and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]

    def check_options(self, name: str, options: Sequence[str], extra: Sequence[str] = ()) -> None:
        """ValueError, one line, naming the options of ``options`` that ``name`` does not take and the valid
        ones (``extra``: options the caller handles besides the constructor's)."""
        valid = self.options(name)
        if valid is None:
            return
        unknown = sorted(set(options) - set(valid) - set(extra) - set(self.supplied))
        if unknown:
            raise ValueError(f"{self.kind} {name!r} has no option(s) {', '.join(unknown)}; "
                             f"valid: {', '.join([*valid, *extra]) or '(none)'}")

    def build(self, name: str, *args: Any, **options: Any) -> T:
        """``name``'s constructor called with ``options`` after checking them (:meth:`check_options`)."""
        self.check_options(name, list(options))
        return self.get(name)(*args, **options)

    def available(self) -> list[str]:
        return sorted(self._entries)

    def entries(self) -> list[tuple[str, Callable[..., T]]]:
        """(name, entry) of every registered name, in the order they were registered."""
        return list(self._entries.items())

    def __contains__(self, name: object) -> bool:
        return name in self._entries
