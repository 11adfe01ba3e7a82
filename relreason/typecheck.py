"""One typed checker for values read from outside, against a dataclass field's annotation.

    value = check(raw, float | None, "train.lr", report, YAML)     # a recipe's or --set value
    value = check(raw, int, "examples", report, JSON, build=...)  # a field of a run's record

It serves two readers that differ only in their rules (`Rules`): the configuration's recipes and
`--set` values (relreason.config: YAML's spellings taken, "1e-4" as a number, 3.0 as an integer, a
value as its enum, a list as a tuple) and the run directory's JSON records (relreason.rundir: types as
written, numbers finite, nested records built). Each place a value does not fit goes to the caller's
`report` as a `Mismatch`, which the caller words in its own messages (and raises, to stop at the first,
or collects, to name them all).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable, Union


@dataclass(frozen=True)
class Rules:
    """How a reader takes values: `coerce` the spellings YAML allows, `finite` numbers only, and the
    types it leaves `unchecked` (to the dataclass that holds them, which checks them itself)."""

    coerce: bool  # "1e-4" -> 1e-4, 3.0 -> 3 for an integer, a value -> its enum member, numbers -> float
    finite: bool  # a float must be finite (JSON has no NaN or infinity; Python's reader makes 1e309 one)
    unchecked: tuple = ()


# recipes and --set: range checks judge the numbers afterwards, and a mapping-valued option (a text model's
# tokenizer record) is judged by its own config's check
YAML = Rules(coerce=True, finite=False, unchecked=(dict,))
JSON = Rules(coerce=False, finite=True)  # run records: what was written is what is read


@dataclass(frozen=True)
class Mismatch:
    """The value at `path` is not of type `tp` (`finite`: it is a float, but not a finite one)."""

    path: str
    tp: Any
    value: Any
    finite: bool = False


_KINDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string", dict: "a JSON object",
          list: "a list", tuple: "a list"}


def kind(tp: Any) -> str:
    """How a message names type `tp`: "an integer", "a number or null", "one of ['a', 'b']"."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        kinds = [kind(a) for a in typing.get_args(tp) if a is not type(None)]
        nullable = type(None) in typing.get_args(tp)
        return " or ".join(kinds) + (" or null" if nullable else "")
    if dataclasses.is_dataclass(tp):
        return "a JSON object"
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return f"one of {[m.value for m in tp]}"
    return _KINDS.get(origin or tp, str(tp))


def check(value: Any, tp: Any, path: str, report: Callable[[Mismatch], None], rules: Rules,
          build: Callable[[type, dict, str], Any] | None = None) -> Any:
    """`value` as type `tp` (converted as `rules` allow); every place it does not fit is reported and
    left as it was. `build(cls, mapping, path)` makes a nested dataclass (a record's sub-record).

    A union takes the first of its types that the value's outer shape fits, and reports what is wrong
    inside it (`per_task.bfs.score`), or the union itself when none fits."""
    if tp is Any or tp in rules.unchecked:
        return value
    if rules.finite and isinstance(value, float) and not math.isfinite(value) and float in (tp, *typing.get_args(tp)):
        report(Mismatch(path, tp, value, finite=True))
        return value
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in typing.get_args(tp):
            return None
        for arg in typing.get_args(tp):
            if arg is not type(None) and _fits(value, arg, rules):
                return check(value, arg, path, report, rules, build)
    elif _fits(value, tp, rules):
        if dataclasses.is_dataclass(tp) and build is not None:
            return build(tp, value, f"{path}.")
        if origin is dict and typing.get_args(tp):
            _, vtype = typing.get_args(tp)
            return {k: check(v, vtype, f"{path}.{k}", report, rules, build) for k, v in value.items()}
        if origin in (list, tuple):
            (itype, *_) = typing.get_args(tp) or (Any,)
            return origin(check(v, itype, f"{path}[{i}]", report, rules, build) for i, v in enumerate(value))
        return _converted(value, tp, rules)
    report(Mismatch(path, tp, value))
    return value


def _fits(value: Any, tp: Any, rules: Rules) -> bool:
    """Whether `value` has the outer type `tp` (its items are checked after): a bool is no number; a float
    is finite under `rules.finite`; with `rules.coerce`, also a spelling `_converted` takes."""
    if tp in rules.unchecked:
        return True
    if dataclasses.is_dataclass(tp):
        return isinstance(value, dict)
    base = typing.get_origin(tp) or tp
    if base in (list, tuple):
        return isinstance(value, (list, tuple))
    if isinstance(base, type) and issubclass(base, enum.Enum):
        try:
            base(value)
        except ValueError:
            return False
        return True
    if base is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return math.isfinite(value) or not rules.finite
        return rules.coerce and isinstance(value, str) and _parses_as_float(value)
    if base is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return True
        return rules.coerce and isinstance(value, float) and value.is_integer()
    return isinstance(value, base)


def _converted(value: Any, tp: Any, rules: Rules) -> Any:
    """A value that fits `tp` in the type itself, where `rules.coerce` asks (YAML's "1e-4", 3.0, "mean")."""
    if not rules.coerce:
        return value
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(value)
    if tp is float:
        return float(value)
    if tp is int:
        return int(value)
    return value


def _parses_as_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


__all__ = ["Rules", "YAML", "JSON", "Mismatch", "kind", "check"]
