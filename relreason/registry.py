"""One small registry class for every kind of named thing (algorithms, processors, ablations...).

Every list a user sees (CLI choices, `relreason list`, test parametrization) comes from a
registry, so a name is written exactly once: where it is registered.
"""

from __future__ import annotations

import difflib
from typing import Callable, Generic, Iterator, TypeVar

from relreason.errors import RelreasonError

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names to objects. `register` works as a decorator or a plain call."""

    def __init__(self, kind: str, list_command: str | None = None):
        self.kind = kind  # e.g. "algorithm"; used in error messages
        self.list_command = list_command  # e.g. "relreason list algorithms"
        self._items: dict[str, T] = {}

    def register(self, name: str, obj: T | None = None) -> Callable[[T], T] | T:
        def add(item: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._items[name] = item
            return item

        return add(obj) if obj is not None else add

    def get(self, name: str) -> T:
        """Returns the object named `name`; raises RelreasonError with a did-you-mean hint."""
        try:
            return self._items[name]
        except KeyError:
            raise RelreasonError(f"unknown {self.kind} {name!r}", self.suggest(name)) from None

    def suggest(self, name: str) -> str:
        close = difflib.get_close_matches(name, self._items, n=3, cutoff=0.5)
        parts = []
        if close:
            parts.append("did you mean " + " or ".join(repr(c) for c in close) + "?")
        if self.list_command:
            parts.append(f"see `{self.list_command}`")
        else:
            parts.append("known: " + ", ".join(sorted(self._items)))
        return "; ".join(parts)

    def names(self) -> list[str]:
        return list(self._items)

    def items(self) -> list[tuple[str, T]]:
        return list(self._items.items())

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)
