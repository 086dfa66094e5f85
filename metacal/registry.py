"""Name → constructor registries, so that configs can name losses, objectives, models and datasets."""

from __future__ import annotations

from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")


class UnknownNameError(KeyError):
    """Raised for a name that is not registered; the message lists the valid names."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class Registry(Generic[T]):
    """A named collection of constructors.

    >>> LOSSES = Registry("loss")
    >>> @LOSSES.register("ce")
    ... class CrossEntropy: ...
    >>> LOSSES.build("ce")
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, Callable[..., T]] = {}

    def register(self, name: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
        def add(fn: Callable[..., T]) -> Callable[..., T]:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._entries[name] = fn
            return fn

        return add

    def get(self, name: str) -> Callable[..., T]:
        if name not in self._entries:
            raise UnknownNameError(
                f"unknown {self.kind} {name!r}; available: {', '.join(self.available())}"
            )
        return self._entries[name]

    def build(self, name: str, **params: Any) -> T:
        return self.get(name)(**params)

    def available(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries
