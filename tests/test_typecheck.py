"""The one typed checker (relreason.typecheck) under its two readers' rules: YAML's spellings taken for
the configuration, JSON's types as written (and finite) for run records; every mismatch named by path."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Optional

import pytest

from relreason.typecheck import JSON, YAML, Mismatch, check, kind


class Colour(str, enum.Enum):
    RED = "red"
    BLUE = "blue"


def checked(value, tp, rules, build=None):
    """(the value checked, the mismatches reported), every one collected."""
    found: list[Mismatch] = []
    return check(value, tp, "x", found.append, rules, build), found


@pytest.mark.parametrize("value, tp, out", [
    ("1e-4", float, 1e-4), (3, float, 3.0), (3.0, int, 3), ("red", Colour, Colour.RED),
    ([1, 2], tuple[int, ...], (1, 2)),
    (None, Optional[int], None), ("2.5", Optional[float], 2.5), (True, bool, True), ("a", str, "a"),
])
def test_yaml_takes_its_spellings_as_the_type(value, tp, out):
    got, found = checked(value, tp, YAML)
    assert found == [] and got == out and type(got) is type(out)


@pytest.mark.parametrize("value, tp, finite", [("1e-4", float, False), (3.0, int, False), (float("inf"), float, True),
                                               (float("nan"), Optional[float], True)])
def test_json_takes_types_as_written_and_finite_numbers_only(value, tp, finite):
    _, found = checked(value, tp, JSON)
    assert [(m.path, m.finite) for m in found] == [("x", finite)]
    assert checked(value, tp, YAML)[1] == []  # the configuration's range checks judge non-finite numbers


@pytest.mark.parametrize("rules", [YAML, JSON])
@pytest.mark.parametrize("value, tp, words", [
    (True, int, "an integer"), (True, float, "a number"), (2.5, int, "an integer"),
    ("x", Optional[float], "a number or null"),
    (1, bool, "true or false"), (1, str, "a string"), ("x", tuple[int, ...], "a list"),
])
def test_a_bool_is_no_number_and_each_mismatch_is_named(rules, value, tp, words):
    _, found = checked(value, tp, rules)
    assert [(m.path, m.value, kind(m.tp)) for m in found] == [("x", value, words)]


def test_a_mapping_is_judged_by_json_and_left_to_its_own_config_by_yaml():
    _, found = checked("x", dict, JSON)
    assert [kind(m.tp) for m in found] == ["a JSON object"]
    assert checked("x", dict, YAML) == ("x", []) and checked("x", Optional[dict], YAML) == ("x", [])


def test_items_are_named_by_their_path_and_all_reported():
    _, found = checked([1, "a", 2, "b"], tuple[int, ...], YAML)
    assert [m.path for m in found] == ["x[1]", "x[3]"]
    _, found = checked({"bfs": {"score": "high"}}, dict[str, dict[str, Optional[float]]], JSON)
    assert [(m.path, kind(m.tp)) for m in found] == [("x.bfs.score", "a number or null")]


def test_an_enum_is_named_by_its_values():
    _, found = checked("green", Colour, YAML)
    assert kind(found[0].tp) == "one of ['red', 'blue']"


def test_a_nested_record_is_built_by_the_caller():
    @dataclass
    class Inner:
        n: int

    built = []

    def build(cls, data: dict, prefix: str) -> Any:
        built.append(prefix)
        return cls(**data)

    got, found = checked({"n": 1}, Optional[Inner], JSON, build)
    assert got == Inner(1) and built == ["x."] and found == []


def test_a_reporter_that_raises_stops_at_the_first():
    def stop(m: Mismatch) -> None:
        raise ValueError(m.path)

    with pytest.raises(ValueError, match=r"x\[0\]"):
        check(["a", "b"], list[int], "x", stop, JSON)
