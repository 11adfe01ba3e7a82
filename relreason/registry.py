"""One small registry class for every kind of named thing (algorithms, processors, ablations...).

Every list a user sees (CLI choices, `relreason list`, test parametrization) comes from a
registry, so a name is written exactly once: where it is registered.

Once relreason's own entries are registered, a registry may accept plugins
(`PROCESSORS.accept_plugins("relreason.processors")`): the next time its names are listed or a name is
looked up, the installed plugins of that entry-point group are loaded (relreason.plugins), so always
after the built-ins. Each name keeps its origin (`origin(name)`): built in, or the plugin
distribution that registered it. Registries that share a namespace (`namespace=other`) never hold
the same name twice between them (a model is a processor or a text model, never both).
"""

from __future__ import annotations

import difflib
from typing import Callable, Generic, Iterator, TypeVar

from relreason.errors import RelreasonError
from relreason.plugins import Origin, current_origin, load, on_undo, withdraw

T = TypeVar("T")


class NameClash(ValueError):
    """A name registered where a registry (or one sharing its namespace) already holds it."""


class Registry(Generic[T]):
    """Maps names to objects. `register` works as a decorator or a plain call."""

    def __init__(self, kind: str, list_command: str | None = None, namespace: Registry | None = None):
        """
        Args:
            kind: what the registry holds, as error messages name it ("algorithm").
            list_command: the command that lists the names ("relreason list algorithms"), for hints.
            namespace: another registry whose names this one must not repeat (and the reverse).
        """
        self.kind = kind
        self.list_command = list_command
        self.plugin_group: str | None = None  # the entry-point group whose plugins add to it (accept_plugins)
        self._adopt: Callable[[object], None] | None = None
        self._items: dict[str, T] = {}
        self._origins: dict[str, Origin] = {}
        self._namespace: list[Registry] = namespace._namespace if namespace is not None else []
        self._namespace.append(self)

    def register(self, name: str, obj: T | None = None) -> Callable[[T], T] | T:
        def add(item: T) -> T:
            origin = current_origin()
            holder = next((r for r in self._namespace if name in r._items), None)
            if holder is not None:
                held = holder._origins[name]
                if not (origin.built_in and not held.built_in):
                    where = "" if holder is self else f" as a {holder.kind}"
                    by = "relreason (built-in)" if held.built_in else f"the plugin {held}"
                    raise NameClash(f"{self.kind} {name!r} is registered twice: first{where} by {by}")
                withdraw(held, f"is withdrawn: {holder.kind} {name!r} is built into relreason")
            self._items[name] = item
            self._origins[name] = origin
            if not origin.built_in:
                on_undo(origin, lambda: self._forget(name))
            return item

        return add(obj) if obj is not None else add

    def accept_plugins(self, group: str, adopt: Callable[[object], None] | None = None) -> None:
        """Lets the installed plugins of the entry-point `group` add to this registry: they are loaded
        at its next read. Called once relreason's own entries are all registered.

        Args:
            adopt: what to do with each entry point's object (relreason.plugins.load's default: a
                module's import registers, a function is called).
        """
        self.plugin_group = group
        self._adopt = adopt

    def _forget(self, name: str) -> None:
        del self._items[name]
        del self._origins[name]

    def _load_plugins(self) -> None:
        if self.plugin_group is not None:
            load(self.plugin_group, self._adopt)

    def get(self, name: str) -> T:
        """Returns the object named `name`; raises RelreasonError with a did-you-mean hint."""
        self._load_plugins()
        try:
            return self._items[name]
        except KeyError:
            raise RelreasonError(f"unknown {self.kind} {name!r}", self.suggest(name)) from None

    def origin(self, name: str) -> Origin:
        """Where `name` comes from: relreason.plugins.BUILT_IN or a plugin's entry point."""
        self.get(name)
        return self._origins[name]

    def suggest(self, name: str) -> str:
        self._load_plugins()
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
        self._load_plugins()
        return list(self._items)

    def items(self) -> list[tuple[str, T]]:
        self._load_plugins()
        return list(self._items.items())

    def __contains__(self, name: object) -> bool:
        self._load_plugins()
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        self._load_plugins()
        return iter(list(self._items))

    def __len__(self) -> int:
        self._load_plugins()
        return len(self._items)
