"""One place per algorithm: an algorithm declared in one file (extra_algorithm.py) and imported after
relreason, as a plugin is, is generated, trains, evaluates, is listed, joins its task groups and an
ablation grid, streams, and reads and parses as CLRS-Text, with no other edit.

The check runs in a fresh interpreter (one_place_check.py), so the new algorithm never reaches the
registries of this test process: every other test keeps seeing the benchmark's 30.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from relreason.data import ALGORITHMS
from relreason.tasks import TASKS

HERE = Path(__file__).parent
NAME = "running_max"
FAMILY, GROUP = "scans", "extras"  # extra_algorithm's (not imported here: importing it registers it)
CHECKS = ("facts", "generated", "trained", "grouped", "listed", "text", "streamed")


@pytest.fixture(scope="module")
def seen(tmp_path_factory) -> dict:
    """What every consumer saw of the new algorithm (one_place_check.py's report)."""
    out = tmp_path_factory.mktemp("one_place")
    proc = subprocess.run([sys.executable, str(HERE / "one_place_check.py"), str(out)], capture_output=True,
                          text=True, timeout=600, cwd=out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((out / "seen.json").read_text())
    assert set(report) == {"before", *CHECKS}
    return report


def result(seen: dict, check: str) -> dict:
    value = seen[check]
    assert not (isinstance(value, dict) and "error" in value), value.get("error") if isinstance(value, dict) else value
    return value


def test_this_process_never_sees_it():
    assert NAME not in ALGORITHMS and NAME not in TASKS and f"text:{NAME}" not in TASKS


def test_registered_by_importing_its_file_after_relreason(seen):
    assert seen["before"] == {"algorithm": False, "task": False}
    facts = result(seen, "facts")
    assert facts == {"family": FAMILY, "groups": [GROUP], "spec": ["pos", "key", "best", "best_h", "i"],
                     "builtin": False, "module": "extra_algorithm"}


def test_generated_in_memory_and_by_the_cli(seen):
    assert result(seen, "generated") == {"num": 32, "n": 16, "hints": ["best_h", "i"], "outputs": ["best"],
                                         "steps": 16, "file": True}


def test_trains_evaluates_and_is_listed_as_a_run(seen):
    assert result(seen, "trained") == {"steps": 2, "test_finite": True, "test_outputs": ["best"],
                                       "eval_task": NAME, "eval_outputs": ["best"], "runs_tasks": [NAME]}


def test_joins_its_groups_and_an_ablation_grid_but_not_the_benchmark(seen):
    grouped = result(seen, "grouped")
    assert grouped["groups"][FAMILY] == grouped["groups"][GROUP] == [NAME]
    assert grouped["groups"][f"text:{FAMILY}"] == [f"text:{NAME}"]
    assert grouped["groups"]["clrs30"] == ALGORITHMS.names()  # the benchmark stays the 30
    assert grouped["tasks"] == [NAME, f"text:{NAME}"]
    assert grouped["ablation_cells"] == [NAME]


def test_listed_by_relreason_list(seen):
    listed = result(seen, "listed")
    assert listed["row"]["class"] == FAMILY
    assert (listed["row"]["inputs"], listed["row"]["outputs"], listed["row"]["hints"]) == (["pos", "key"], ["best"],
                                                                                          ["best_h", "i"])
    assert listed["row"]["splits"]["test"] == {"size": 64, "num": 32}
    assert listed["task_rows"] == {FAMILY: [NAME], GROUP: [NAME], f"text:{FAMILY}": [f"text:{NAME}"],
                                   f"text:{GROUP}": [f"text:{NAME}"], NAME: [NAME], f"text:{NAME}": [f"text:{NAME}"]}


def test_reads_and_parses_as_clrs_text(seen):
    text = result(seen, "text")
    plain, traced = text["False"], text["True"]
    # keys truncated to 3 decimals; the answer is the index of the largest, 0.715
    assert plain["question"] == "running_max:\nkey: [0.548 0.715 0.602 0.544 0.423]\nbest:\n"
    assert plain["answer"] == "1\n\n"
    # with hints: best_h prints as `best` (the <output>_h rule), steps 1..T-2 as the trace
    assert traced["question"] == ("running_max:\nkey: [0.548 0.715 0.602 0.544 0.423], initial_trace: 0\n"
                                  "trace | best:\n")
    assert traced["answer"] == "1, 1, 1 | 1\n\n"
    assert all(plain["parsed"]) and all(traced["parsed"]) and len(plain["parsed"]) == 3
    assert text["clrs_text_train"] == [4, 5]


def test_streams_from_a_spawned_worker(seen):
    assert result(seen, "streamed") == {"step": 0, "num": 4, "algorithm": NAME}
