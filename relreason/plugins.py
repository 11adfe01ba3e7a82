"""Plugins: installed packages that add algorithms, processors, recipes and ablations to relreason.

A distribution becomes part of relreason by declaring entry points in these groups (as pytest's
`pytest11`), with no edit to relreason:

    [project.entry-points."relreason.processors"]      # also: relreason.algorithms, relreason.ablations
    example = "relreason_example.processors"           # a module whose import registers things
    [project.entry-points."relreason.recipes"]
    example = "relreason_example.recipes"              # a package: its *.yaml files become recipes

An entry point names a module, whose import registers its things with relreason's usual decorators
(`register_processor`, `register`, `register_ablation`), or a function (`module:function`), called
with no arguments to do the same. A registry that accepts plugins (`Registry.accept_plugins(GROUP)`,
called once its built-ins are registered) loads its group when its names are next listed or a name
is next looked up: once per process, after the built-ins, in the order of the distributions' names.

Every registered name keeps its origin: `BUILT_IN`, or the distribution (name, version) whose entry
point registered it; `relreason list` shows it and checkpoints record it (`require_plugins` checks a
checkpoint's record when it is loaded). An entry point that fails to import, raises, or registers a
name already taken is skipped as a whole (whatever it had registered is taken back) with one line on
stderr naming its distribution, the entry point and what went wrong; the built-ins and the other
plugins go on working and no command's exit code changes. RELREASON_DEBUG=1 adds the traceback. A
built-in always keeps its name: were a plugin to take one first (a model name, which the processors
and the text models share, before the text models are imported), the plugin is withdrawn the same way.
"""

from __future__ import annotations

import os
import sys
import traceback
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Callable

from relreason.errors import RelreasonError

GROUPS = ("relreason.algorithms", "relreason.processors", "relreason.recipes", "relreason.ablations")


@dataclass(frozen=True)
class Origin:
    """Where a registered name comes from: relreason itself, or one entry point of a distribution."""

    distribution: str | None = None  # None: built into relreason
    version: str | None = None
    entry_point: str | None = None  # "relreason.processors: example = relreason_example.processors"

    @property
    def built_in(self) -> bool:
        return self.distribution is None

    def __str__(self) -> str:
        """What `relreason list` shows: `built-in`, or the distribution and its version."""
        return "built-in" if self.built_in else f"{self.distribution} {self.version}"

    def record(self) -> dict[str, str] | None:
        """{"distribution", "version"} for a checkpoint's record; None for a built-in."""
        return None if self.built_in else {"distribution": self.distribution, "version": self.version}


BUILT_IN = Origin()

_loaded: set[str] = set()  # the groups loaded (or being loaded) in this process
_loading: list[Origin] = []  # the entry points being loaded now, innermost last (a plugin may trigger another group)
_undo: dict[Origin, list[Callable[[], None]]] = {}  # how to take back what each loaded entry point registered


def current_origin() -> Origin:
    """The origin of a name registered now: BUILT_IN, or the entry point being loaded.

    While a plugin loads, what relreason's own modules register (a module of relreason that the plugin
    imports first) stays built in: the origin is that of the innermost module whose import runs the
    registration, the plugin's for any module outside relreason (and for a function entry point)."""
    if not _loading:
        return BUILT_IN
    frame = sys._getframe(1)
    while frame is not None and frame.f_code is not _load_entry_point.__code__:
        if frame.f_code.co_name == "<module>":
            module = frame.f_globals.get("__name__", "")
            return BUILT_IN if module == "relreason" or module.startswith("relreason.") else _loading[-1]
        frame = frame.f_back
    return _loading[-1]


def on_undo(origin: Origin, undo: Callable[[], None]) -> None:
    """Notes how to take back one registration of a plugin's entry point (withdraw runs them)."""
    _undo.setdefault(origin, []).append(undo)


def load(group: str, adopt: Callable[[object], None] | None = None) -> None:
    """Loads every entry point of `group` once per process (later calls return at once).

    Args:
        adopt: what to do with each entry point's loaded object (e.g. register a package's recipes);
            by default a module's import is its registration and a function is called.
    """
    if group in _loaded:
        return
    _loaded.add(group)
    found = sorted(entry_points(group=group), key=lambda ep: (_distribution(ep)[0], ep.name))
    for ep in found:
        name, version = _distribution(ep)
        origin = Origin(name, version, f"{group}: {ep.name} = {ep.value}")
        _loading.append(origin)
        try:
            _load_entry_point(ep, adopt)
        except Exception as e:  # a plugin must never take relreason down with it
            withdraw(origin, f"failed to load: {type(e).__name__}: {e}", e)
        finally:
            _loading.pop()


def _load_entry_point(ep: EntryPoint, adopt: Callable[[object], None] | None) -> None:
    obj = ep.load()
    if adopt is not None:
        adopt(obj)
    elif ep.attr is not None:
        if not callable(obj):
            raise TypeError(f"{ep.value} is not a function to call")
        obj()


def withdraw(origin: Origin, why: str, error: BaseException | None = None) -> None:
    """Takes back everything `origin` registered and says so in one line on stderr."""
    for undo in reversed(_undo.pop(origin, [])):
        undo()
    reason = " ".join(why.split())  # one line, whatever the exception's message holds
    print(f"Warning: plugin {origin} (entry point {origin.entry_point}) {reason}; relreason runs without it",
          file=sys.stderr, flush=True)
    if error is not None and os.environ.get("RELREASON_DEBUG", "") not in ("", "0"):
        traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)


def require_plugins(record: list[dict], where: str, origin_here: Callable[[str, str], Origin | None]) -> None:
    """Checks that the plugins a checkpoint recorded are installed: raises one RelreasonError naming the
    first that is not.

    Args:
        record: [{"kind", "name", "distribution", "version"}] as checkpoints store it.
        where: what needs them, as the message names it (a checkpoint's path).
        origin_here: (kind, name) -> where that name comes from in this installation, None if unknown.
    """
    for need in record:
        plugin = f"{need['distribution']} {need['version']}"
        here = origin_here(need["kind"], need["name"])
        if here is not None and here.distribution == need["distribution"]:
            continue
        install = f"install it (pip install '{need['distribution']}=={need['version']}') and run again"
        if here is None:
            raise RelreasonError(f"{where} needs the plugin {plugin} (its {need['kind']} {need['name']!r}), "
                                 "which is not installed", install)
        other = "built in" if here.built_in else f"from {here}"
        raise RelreasonError(f"{where} needs the {need['kind']} {need['name']!r} of the plugin {plugin}, but "
                             f"{need['name']!r} here is {other}", install)


def plugin_version_changes(record: list[dict] | None, origin_here: Callable[[str, str], Origin | None]) -> list[str]:
    """The plugins of `record` (as require_plugins reads it) installed here at another version, in words:
    ["relreason-example 0.2.0 (installed: 0.3.0)"]; [] when every one is the recorded version."""
    out = []
    for need in record or []:
        here = origin_here(need["kind"], need["name"])
        if here is not None and here.distribution == need["distribution"] and here.version != need["version"]:
            text = f"{need['distribution']} {need['version']} (installed: {here.version})"
            if text not in out:
                out.append(text)
    return out


def _distribution(ep: EntryPoint) -> tuple[str, str]:
    """(name, version) of the installed distribution that declares `ep`."""
    return ep.dist.name, ep.dist.version
