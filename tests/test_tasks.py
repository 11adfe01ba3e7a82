"""The task registry follows the algorithm registry live, and its groups are the algorithms' groups.
(An algorithm registered after import becoming a task everywhere: tests/data/test_one_place.py.)"""

from __future__ import annotations

import pytest

from relreason.data.algorithms import ALGORITHMS, algorithm_groups
from relreason.errors import RelreasonError
from relreason.tasks import TASKS, TEXT_PREFIX, Task, TaskRegistry, expand_tasks, task_groups


def _other_task(name: str) -> Task:
    return Task(name, "lobster", None, load=lambda *a: None, write=lambda *a: None)


def test_every_algorithm_is_a_clrs_and_a_text_task_in_listing_order():
    algorithms = ALGORITHMS.names()
    assert TASKS.names() == algorithms + ["lobster", "lobster_weighted"] + [TEXT_PREFIX + a for a in algorithms]
    assert all(TASKS.get(a).kind == "clrs" and TASKS.get(a).spec is ALGORITHMS.get(a).spec for a in algorithms)
    assert all(TASKS.get(TEXT_PREFIX + a).kind == "text" for a in algorithms)


def test_a_registry_made_later_adds_the_algorithms_tasks_when_read():
    tasks = TaskRegistry("task")
    tasks.register("mine", _other_task("mine"))
    assert "bfs" in tasks and len(tasks) == 1 + 2 * len(ALGORITHMS)
    assert tasks.names()[0] == "mine" and tasks.get("text:bfs").algorithm == "bfs"
    with pytest.raises(RelreasonError, match="did you mean 'bfs'"):
        tasks.get("bfss")


def test_an_algorithm_may_not_take_the_name_of_another_task():
    tasks = TaskRegistry("task", "relreason list tasks")
    tasks.register("bfs", _other_task("bfs"))
    with pytest.raises(RelreasonError, match="'bfs' has the name of a task of another kind"):
        tasks.names()


def test_groups_are_the_algorithms_groups_then_their_text_twins():
    groups = task_groups()
    plain = algorithm_groups()
    assert {g: groups[g] for g in plain} == plain
    assert [g for g in groups if g.startswith(TEXT_PREFIX)] == [TEXT_PREFIX + g for g in plain]
    assert expand_tasks("core8,bfs") == plain["core8"] + ["bfs"]
    assert expand_tasks("text:graphs") == [TEXT_PREFIX + a for a in plain["graphs"]]
