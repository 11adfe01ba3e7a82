"""The results plan (relreason.studies.plan): results/plan.txt says which `reproduce` commands fill RESULTS.md,
in which lane; scripts/reproduce_results.sh runs its lines and RESULTS.md says how far each got."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from relreason.errors import RelreasonError
from relreason.studies.cells import plan_cells
from relreason.studies.costs import costs_file, hours
from relreason.studies.plan import parse_plan_line, plan_status, read_plan
from relreason.studies.results import collect_results
from relreason.studies.results_report import write_report
from relreason.studies.tables import TABLES
from relreason.tasks import expand_tasks
from test_results import _finish, _start

ROOT = Path(__file__).resolve().parents[1]
PLAN = ROOT / "results" / "plan.txt"


def test_the_committed_plan_reads_and_every_line_plans_cells():
    lines = read_plan(PLAN)
    assert lines and {lane for line in lines for lane in line.lanes} == {"1", "2"}
    for line in lines:
        study = TABLES.get(line.table)
        tasks = expand_tasks(line.tasks if line.tasks is not None else study.tasks)
        models = line.models.split(",") if line.models is not None else None
        assert plan_cells(study, tasks, tuple(range(line.seeds)), out=Path("reproduce"), models=models), line.args


def test_a_plan_line_reads_its_lanes_table_and_options():
    line = parse_plan_line("1,2: ibarz2022 --tasks core8 --seeds 3", "here")
    assert (line.lanes, line.table, line.tasks, line.seeds, line.models) == (("1", "2"), "ibarz2022", "core8", 3, None)
    assert line.command == "relreason reproduce ibarz2022 --tasks core8 --seeds 3 --set train.threads=1 --committed results"


@pytest.mark.parametrize("text, message", [
    ("clrs30 --seeds 3", "is not a plan line"),
    ("1 2: clrs30 --seeds 3", "is not a plan line"),
    ("1:", "is not a plan line"),
    ("1: nosuchtable --seeds 3", "unknown table 'nosuchtable'"),
    ("1: clrs30 --tasks nosuchtask --seeds 3", "unknown task 'nosuchtask'"),
    ("1: clrs30 --models rt --seeds 3", "--models rt: not a column of clrs30"),
    ("1: clrs30 --tasks bfs", "--seeds must be given"),
    ("1: clrs30 --seeds 0", "--seeds must be given"),
    ("1: clrs30 --seeds 3 --jobs 2", "'--jobs' is not an option of a plan line"),
    ("1: clrs30 --seeds 3 --seeds 2", "'--seeds' is not an option of a plan line (or is given twice)"),
    ("1: clrs30 --seeds", "'--seeds' has no value"),
])
def test_a_bad_plan_line_is_a_one_line_error_naming_where(text, message):
    with pytest.raises(RelreasonError, match="^here: ") as e:
        parse_plan_line(text, "here")
    assert message in str(e.value) and "\n" not in str(e.value)


def test_the_script_reads_each_lanes_lines_in_order_through_relreason(tmp_path):
    """scripts/reproduce_results.sh runs `python -m relreason.studies.plan PLAN LANE`: one parser for the script
    and the report; a line of two lanes belongs to both, and a bad plan stops the script with the error."""
    plan = tmp_path / "plan.txt"
    plan.write_text("# a comment\n1: clrs30 --models mpnn --tasks bellman_ford --seeds 3  # trailing\n"
                    "2: ibarz2022 --tasks bellman_ford --seeds 3\n\n1,2: ibarz2022 --tasks core8 --seeds 3\n")
    run = lambda *a: subprocess.run([sys.executable, "-m", "relreason.studies.plan", str(plan), *a],  # noqa: E731
                                    capture_output=True, text=True, cwd=ROOT)
    assert run().stdout.split("\n")[:2] == ["1", "2"]
    assert run("1").stdout.splitlines() == ["clrs30 --models mpnn --tasks bellman_ford --seeds 3",
                                            "ibarz2022 --tasks core8 --seeds 3"]
    assert run("2").stdout.splitlines() == ["ibarz2022 --tasks bellman_ford --seeds 3",
                                            "ibarz2022 --tasks core8 --seeds 3"]
    plan.write_text("1: clrs30 --seeds three\n")
    bad = run("1")
    assert bad.returncode == 1 and bad.stdout == "" and bad.stderr.startswith("Error: ") and "plan.txt:1:" in bad.stderr


def test_the_lanes_script_runs_each_lanes_lines_in_order_then_the_report(tmp_path):
    """scripts/reproduce_results.sh on a plan, with a stand-in for relreason that records its arguments: each
    lane's log holds its lines in order with the lanes' options, a line of two lanes runs in both, then
    `relreason results`; a bad plan stops it before anything runs."""
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "reproduce_results.sh").write_text((ROOT / "scripts" / "reproduce_results.sh").read_text())
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "plan.txt").write_text(
        "1: clrs30 --models mpnn --tasks bellman_ford --seeds 3\n2: ibarz2022 --tasks bellman_ford --seeds 3\n"
        "1,2: ibarz2022 --tasks core8 --seeds 3\n")
    fake = tmp_path / "fake_relreason"
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path}/calls\n")
    fake.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "RELREASON": str(fake), "PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    subprocess.run(["bash", str(tmp_path / "scripts" / "reproduce_results.sh")], env=env, check=True, timeout=120)
    logs = {lane: (tmp_path / "reproduce" / "logs" / f"lane{lane}.log").read_text() for lane in ("1", "2")}
    calls = (tmp_path / "calls").read_text().splitlines()
    opts = " --set train.threads=1 --committed results"
    lane1 = ["reproduce clrs30 --models mpnn --tasks bellman_ford --seeds 3" + opts,
             "reproduce ibarz2022 --tasks core8 --seeds 3" + opts]
    lane2 = ["reproduce ibarz2022 --tasks bellman_ford --seeds 3" + opts, "reproduce ibarz2022 --tasks core8 --seeds 3" + opts]
    assert logs == {"1": "", "2": ""} and calls[-1] == "results"
    assert [c for c in calls if c in lane1[:1]] == lane1[:1] and calls.count(lane1[1]) == 2
    assert calls.index(lane1[0]) < max(i for i, c in enumerate(calls) if c == lane1[1])
    assert sorted(calls[:-1]) == sorted(lane1 + lane2)
    (tmp_path / "calls").unlink()
    (tmp_path / "results" / "plan.txt").write_text("1: clrs30\n")
    bad = subprocess.run(["bash", str(tmp_path / "scripts" / "reproduce_results.sh")], env=env, capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 1 and "plan.txt:1: --seeds must be given" in bad.stderr
    assert not (tmp_path / "calls").exists()


def test_results_md_says_how_far_each_plan_line_got_and_the_command_that_resumes_it(tmp_path):
    """Finished = committed under the cell's config; in progress = a progress record under the cell's config
    (with how far); the rest not started. A committed cell of another config counts as not finished."""
    study = TABLES.get("ibarz2022")
    done = plan_cells(study, ["bellman_ford"], (0, 1), None, tmp_path / "rep", [])
    for cell, score in zip(done, (0.97, 0.98)):
        _finish(cell, score)
    (partial,) = plan_cells(study, ["dfs"], (0,), None, tmp_path / "rep", [])
    _start(partial)
    results = tmp_path / "results"
    collect_results(tmp_path / "rep", results)
    other = results / "cells" / "triplet_gmpnn" / "triplet_gmpnn" / "bellman_ford" / "seed1.json"
    data = json.loads(other.read_text())
    data["config"]["train"]["train_examples"] = 1000  # seed 1 committed under another budget: not this cell
    other.write_text(json.dumps(data))
    (results / "plan.txt").write_text("1: ibarz2022 --tasks bellman_ford,dfs --seeds 3\n2: clrs30 --models mpnn "
                                      "--tasks bfs --seeds 1\n")
    (mpnn,) = plan_cells(TABLES.get("clrs30"), ["bfs"], (0,), None, tmp_path / "rep", [], ["mpnn"])
    cfg = mpnn.config.to_dict()
    cfg["train"]["train_examples"] = 1000  # a progress record of another config: not this cell in progress
    record = results / "progress" / "mpnn" / "clrs30" / "bfs" / "seed0.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"examples": 640, "train_examples": 1000, "config": cfg}))

    rows = plan_status(read_plan(results / "plan.txt"), results)
    assert [(r["lane"], r["cells"], r["finished"], r["in progress"], r["not started"]) for r in rows] == [
        ("1", "6", "1", "triplet-gmpnn / dfs / seed 0: 96,000 of 320,000 examples", "4"), ("2", "1", "0", "-", "1")]
    # what is left, on one quiet core, from the shipped costs: each cell's own task where measured (ibarz2022's
    # bellman_ford), else the mean of the tasks measured (dfs), in-progress cells by the fraction still to train
    shipped = json.loads(costs_file().read_text())
    ibarz = {k.partition(" on ")[2]: v["seconds"] for k, v in shipped["ibarz2022"]["cells"].items()}
    mean = sum(ibarz.values()) / len(ibarz)
    assert rows[0]["left (predicted, one quiet core)"] == \
        f"{hours(2 * ibarz['bellman_ford'] + (0.7 + 2) * mean)} (3 priced from other tasks)"
    assert rows[1]["left (predicted, one quiet core)"] == \
        f"{hours(shipped['clrs30']['cells']['mpnn on bellman_ford']['seconds'])} (1 priced from other tasks)"
    write_report(results, tmp_path / "RESULTS.md")
    md = (tmp_path / "RESULTS.md").read_text()
    assert "## Planned: the results lanes" in md
    assert ("| 1 | `relreason reproduce ibarz2022 --tasks bellman_ford,dfs --seeds 3 --set train.threads=1 --committed "
            "results` | 6 | 1 | triplet-gmpnn / dfs / seed 0: 96,000 of 320,000 examples | 4 |") in md
    (results / "plan.txt").write_text("1: clrs30 --seeds x\n")
    with pytest.raises(RelreasonError, match="plan.txt:1: --seeds must be given"):
        write_report(results, tmp_path / "RESULTS.md")
