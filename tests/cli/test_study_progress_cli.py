"""Long work says what it costs and how far it got: every study (`ablate`, `reproduce`) prints its cells, the
device and their predicted time before it trains (relreason.studies.costs), `ablate --list` prices every
ablation as `reproduce --list` prices the tables, and an interrupted study names the command that resumes it
(not a single run's `--name run --resume`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from child_hold import hold_env, release, wait_held
from cli_run import ENTRY, invoke, ok, one_line_error, succeeds, tiny_sets
from relreason.runtime import cpu_kernels
from relreason.studies.ablations import ABLATIONS
from relreason.studies.cells import plan_cells
from relreason.studies.costs import costs_file, estimate_cells

# the measured cells of relreason/studies/costs.json these tests price by hand (seconds, training examples)
RT = (13115.0, 320000)  # rt-table13's "rt on bellman_ford"
RT_NO_EDGE_UPDATES = (11855.8, 320000)  # rt-table17's "rt without edge updates on bellman_ford"


def test_the_shipped_costs_are_the_ones_priced_here():
    cells = json.loads(costs_file().read_text())
    rt, no_edges = cells["rt-table13"]["cells"]["rt on bellman_ford"], \
        cells["rt-table17"]["cells"]["rt without edge updates on bellman_ford"]
    assert (rt["seconds"], rt["examples"]) == RT and (no_edges["seconds"], no_edges["examples"]) == RT_NO_EDGE_UPDATES


def test_an_ablation_is_priced_from_the_measured_columns_of_its_configuration(tmp_path):
    """no-edge-updates' two columns are rt-table13's RT and rt-table17's ablated RT: each cell costs its
    measured cell, scaled to its training examples; a recipe no measurement covers is named, not guessed."""
    cells = plan_cells(ABLATIONS.get("no-edge-updates"), ["bfs", "dfs"], (0, 1), None, tmp_path)
    examples = cells[0].config.train.train_examples
    want = 4 * (RT[0] * examples / RT[1] + RT_NO_EDGE_UPDATES[0] * examples / RT_NO_EDGE_UPDATES[1])
    estimate = estimate_cells(cells)
    assert (estimate.cells, estimate.unmeasured_cells) == (8, 0) and estimate.seconds == pytest.approx(want)
    half = plan_cells(ABLATIONS.get("no-edge-updates"), ["bfs"], (0,), None, tmp_path, ["train.train_examples=160000"])
    assert estimate_cells(half).seconds == pytest.approx((RT[0] + RT_NO_EDGE_UPDATES[0]) / 2)
    quick = estimate_cells(plan_cells(ABLATIONS.get("no-edge-updates"), ["bfs"], (0,), "quick", tmp_path))
    assert (quick.unmeasured_cells, quick.seconds) == (2, 0.0) and "not predicted: no measured cell of rt quick" in \
        quick.text()


def test_a_cell_is_priced_from_its_own_tasks_measurement_else_the_mean_of_those_measured_and_says_so(tmp_path):
    """A task's hint steps and graphs change what a cell costs by a factor of several (the core-8 Triplet-GMPNN
    cells): a cell whose task was measured costs that; another costs the mean of the tasks measured, and the
    estimate counts and names those cells."""
    from relreason.studies.tables import TABLES

    costs = tmp_path / "costs.json"
    entry = {"hardware": "Test CPU", "date": "today", "cells": {
        "triplet-gmpnn on bellman_ford": {"batch": 32, "examples": 320000, "seconds": 1000.0},
        "triplet-gmpnn on dfs": {"batch": 32, "examples": 320000, "seconds": 4000.0}}}
    costs.write_text(json.dumps({"ibarz2022": entry}))
    cells = plan_cells(TABLES.get("ibarz2022"), ["bellman_ford", "dfs", "bfs"], (0,), None, tmp_path / "p")
    estimate = estimate_cells(cells, costs)
    assert estimate.seconds == pytest.approx(1000 + 4000 + 2500) and estimate.other_task_cells == 1
    assert "1 of them priced from other tasks' cells" in estimate.text()
    own = estimate_cells(cells[:2], costs)
    assert own.seconds == pytest.approx(5000) and own.other_task_cells == 0 and "other tasks" not in own.text()


def test_a_studys_nar_cells_are_priced_from_the_nar_share_of_the_cell_that_reads_them(tmp_path):
    """The TransNAR study trains its NAR cells as cells of their own before the cells that read them; they are
    priced from the `nar_s` the measured TransNAR cell of their algorithm counted in for them (their recipe's
    whole budget: not scaled by the TransNAR cell's examples), and the estimate says that figure is a prediction."""
    from relreason.studies.cells import nar_cells
    from relreason.studies.tables import TABLES

    costs = tmp_path / "costs.json"
    entry = {"hardware": "Test CPU", "date": "today", "cells": {
        "transnar on text:bfs": {"batch": 32, "examples": 64000, "seconds": 3000.0, "nar_s": 120.0},
        "transnar on text:insertion_sort": {"batch": 32, "examples": 64000, "seconds": 2000.0, "nar_s": 200.0},
        "text transformer on text:bfs": {"batch": 32, "examples": 64000, "seconds": 900.0}}}
    costs.write_text(json.dumps({"transnar-ood": entry}))
    cells = plan_cells(TABLES.get("transnar-ood"), ["text:bfs", "text:insertion_sort"], (0, 1), None, tmp_path / "p")
    nars = nar_cells(cells)
    assert sorted((n.task, n.seed) for n in nars) == [("bfs", 0), ("bfs", 1), ("insertion_sort", 0),
                                                      ("insertion_sort", 1)]
    estimate = estimate_cells(nars, costs)
    assert (estimate.unmeasured_cells, estimate.seconds) == (0, pytest.approx(2 * 120 + 2 * 200))
    assert "predicted by scripts/bench_quick.py" in estimate.text()
    assert estimate_cells(nars[:1], costs).seconds == pytest.approx(120.0 if nars[0].task == "bfs" else 200.0)
    # a NAR measured on no algorithm of its own: the mean of the measured ones, counted as priced from other tasks
    (other,) = nar_cells(plan_cells(TABLES.get("transnar-ood"), ["text:dfs"], (0,), None, tmp_path / "p"))
    elsewhere = estimate_cells([other], costs)
    assert elsewhere.seconds == pytest.approx(160.0) and elsewhere.other_task_cells == 1


def test_ablate_list_prices_the_cells_at_the_seeds(tmp_path):
    row, = json.loads(ok(invoke("ablate", "no-edge-updates", "--list", "--tasks", "bellman_ford", "--seeds", "0,4",
                                "--json")))["ablations"]
    assert (row["cells"], row["variants"], row["tasks"], row["seeds"]) == (4, 2, 1, 2)
    assert row["predicted_seconds"] == pytest.approx(2 * (RT[0] + RT_NO_EDGE_UPDATES[0]), abs=0.1)
    shown = invoke("ablate", "no-edge-updates", "--list", "--tasks", "bellman_ford")
    assert "no-edge-updates" in ok(shown) and "6 (2 x 1 x 3)" in shown.stdout and "costs measured on" in shown.stderr
    one_line_error(invoke("ablate", "--list", "nosuch"), "nosuch")


def test_ablate_list_lists_every_ablation():
    rows = json.loads(ok(invoke("ablate", "--list", "--json")))["ablations"]
    assert [r["ablation"] for r in rows] == ABLATIONS.names()
    assert all(r["predicted"] for r in rows)


def test_ablate_needs_a_name_unless_it_lists():
    one_line_error(invoke("ablate"), "which ablation?")


STUDIES = {  # each study on tiny settings: two cells for ablate, one for reproduce
    "ablate": ["ablate", "single-layer", "--tasks", "bfs", "--seeds", "1", "--recipe", "quick"],
    "reproduce": ["reproduce", "clrs30", "--models", "mpnn", "--tasks", "bfs", "--seeds", "1", "--recipe", "quick"],
}


@pytest.mark.parametrize("command", STUDIES)
def test_a_study_prints_its_cost_first_and_its_own_resume_command_when_interrupted(command, tmp_path):
    args = [*STUDIES[command], *tiny_sets(tmp_path / "data"), "--out", tmp_path / "out"]
    env = hold_env(tmp_path, examples=4, env={**os.environ, "RELREASON_PROGRESS": "0"})
    proc = subprocess.Popen([*ENTRY, *map(str, args)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        wait_held(tmp_path, proc)  # the first cell holds at its validation at 4 examples
        proc.send_signal(signal.SIGINT)
        release(tmp_path)
        _, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    lines = stderr.splitlines()
    study = args[1]
    cost = next(i for i, line in enumerate(lines) if line.startswith(f"{study}: "))
    cells = 2 if command == "ablate" else 1
    assert lines[cost].startswith(f"{study}: {cells} cell(s) to train on cpu ({cpu_kernels()} kernels); not "
                                  "predicted: no measured cell of ")
    assert all(f"{study}: " not in line or "cell(s) to train" in line for line in lines[:cost])  # before any cell
    typed = "relreason " + " ".join(map(str, args))
    assert f"{study}: interrupted; resume the study with the same command: {typed}" in lines
    assert f"continue with {typed}" in stderr and "--name run --resume" not in stderr
    assert lines[-1] == "Interrupted."
    again = subprocess.run([*ENTRY, *map(str, args), "--json"], env={**os.environ, "RELREASON_PROGRESS": "0"},
                           capture_output=True, text=True, timeout=300)
    assert not json.loads(succeeds(again))["missing"]  # the same command resumed and finished it


def test_the_bar_across_cells_says_the_predicted_time_left(tmp_path):
    from relreason.studies.costs import time_left

    cells = plan_cells(ABLATIONS.get("no-edge-updates"), ["bfs"], (0, 1), None, tmp_path,
                       ["train.train_examples=32000"])  # a tenth of the measured cells: 2 x (21.9 + 19.8) min
    assert time_left(cells) == "predicted 83 min left"
    assert time_left(cells, 2) == "predicted 42 min left (2 at once)"
    assert time_left(plan_cells(ABLATIONS.get("no-edge-updates"), ["bfs"], (0,), "quick", tmp_path)) == ""
