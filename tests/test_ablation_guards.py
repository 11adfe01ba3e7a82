"""The ablation paths that guard hours of cells (relreason.studies.sweep.run_ablation, and
`relreason ablate` through its real entry point): a partial cell is resumed, not restarted or
refused; a worker's exception under `--jobs` is re-raised, not swallowed into "missing" cells;
Ctrl-C (or SIGTERM, to the parent alone or to all) under `--jobs` stops every running cell at a checkpoint
and exits 130, and the same command continues; a lower-is-better (lobster) study is aggregated in its own
unit, never as a percentage."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from relreason.runs.stats import Summary
from relreason.studies.ablations import ABLATIONS
from relreason.studies.cells import cell_state, plan_cells
from relreason.studies.report import study_table
from relreason.studies.sweep import SweepOptions, run_ablation
from relreason.train.workloads import NarWorkload

sys.path.insert(0, str(Path(__file__).parent / "cli"))  # the CLI tests' runner (tests/cli/cli_run.py)
from child_hold import hold_env, release, wait_held  # noqa: E402
from cli_run import ENTRY, fails, relreason, succeeds  # noqa: E402

ABLATION = "no-edge-updates"  # two RT variants, the RT's paper recipe
BUDGET = 8  # examples per cell: 4 steps of 2


def tiny(tmp_path: Path) -> list[str]:
    return ["model.hidden=24", "train.batch_size=2", f"train.train_examples={BUDGET}", "train.eval_every_examples=2",
            "data.train_num=4", "data.train_size=4", "data.val_size=4", "data.test_size=5", "data.val_num=2",
            "data.test_num=2", f"data.data_dir={tmp_path / 'data'}"]


def cli_args(tmp_path: Path, *extra: str, sets: list[str] | None = None) -> list[str]:
    over = [x for s in (sets or tiny(tmp_path)) for x in ("--set", s)]
    return ["ablate", ABLATION, "--tasks", "bfs", "--seeds", "1", "--out", str(tmp_path / "abl"), *over, *extra]


def test_a_partial_cell_is_resumed(tmp_path, monkeypatch):
    original = NarWorkload.loss

    def loss(self, module, part, step):  # a stop request in the first cell's third step
        if step == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return original(self, module, part, step)

    monkeypatch.setattr(NarWorkload, "loss", loss)
    with pytest.raises(KeyboardInterrupt):
        run_ablation(ABLATION, SweepOptions(tasks="bfs", seeds=(0,), out=tmp_path / "abl",
                                            sets=tuple(tiny(tmp_path)), show_progress=False), log=lambda m: None)
    monkeypatch.undo()
    first, second = plan_cells(ABLATIONS.get(ABLATION), ["bfs"], (0,), None, tmp_path / "abl", tiny(tmp_path))
    assert (cell_state(first), cell_state(second)) == ("partial", "new")
    logged: list[str] = []
    options = SweepOptions(tasks="bfs", seeds=(0,), out=tmp_path / "abl", sets=tuple(tiny(tmp_path)),
                           show_progress=False)
    result = run_ablation(ABLATION, options, log=logged.append).result
    assert any(m.endswith("(resuming)") and first.variant.label in m for m in logged), logged
    assert not result["missing"] and [c["examples"] for c in result["cells"]] == [BUDGET, BUDGET]
    events = [json.loads(x) for x in (first.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [e["examples"] for e in events if e["event"] == "resume"] == [6]  # continued at its checkpoint


def test_a_workers_exception_is_re_raised_under_jobs(tmp_path):
    """Every cell fails in its worker (its data directory is a file): the command fails with that error,
    once the running cells are done, instead of reporting the cells as merely missing."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    sets = [s for s in tiny(tmp_path) if not s.startswith("data.data_dir=")] + [f"data.data_dir={blocker}"]
    res = relreason(*cli_args(tmp_path, "--jobs", "2", sets=sets))
    fails(res, 1, str(blocker))
    assert "have no results yet" not in res.stderr and res.stdout == ""


@pytest.mark.parametrize("stop", ["ctrl-c", "kill", "scheduler"])
def test_a_stop_under_jobs_stops_every_cell_at_a_checkpoint_and_the_command_continues(tmp_path, stop):
    env = hold_env(tmp_path, examples=2, env={**os.environ, "RELREASON_PROGRESS": "0"})
    proc = subprocess.Popen([*ENTRY, *cli_args(tmp_path, "--jobs", "2")], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        wait_held(tmp_path, proc)  # a worker holds in its cell's validation at 2 examples
        if stop == "ctrl-c":  # the whole process group, as a terminal's Ctrl-C: the parent and its workers
            os.killpg(proc.pid, signal.SIGINT)
        elif stop == "kill":  # `kill PID`: the parent alone, which passes the stop on to its workers
            os.kill(proc.pid, signal.SIGTERM)
        else:  # a scheduler's stop (scancel): SIGTERM to every process of the job
            os.killpg(proc.pid, signal.SIGTERM)
        release(tmp_path)
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, stderr
    assert "Interrupted." in stderr and "Traceback" not in stderr and stdout == ""
    cells = plan_cells(ABLATIONS.get(ABLATION), ["bfs"], (0,), None, tmp_path / "abl", tiny(tmp_path))
    states = [cell_state(c) for c in cells]
    assert "partial" in states, states  # the held cell stopped at a checkpoint (the other may have finished)
    assert not (tmp_path / "abl" / ABLATION / "results.md").exists()
    again = json.loads(succeeds(relreason(*cli_args(tmp_path, "--jobs", "2", "--json"))))
    assert not again["missing"] and [c["examples"] for c in again["cells"]] == [BUDGET, BUDGET]
    resumed = [c for c, s in zip(cells, states) if s == "partial"]
    for c in resumed:
        events = [json.loads(x) for x in (c.run_dir / "metrics.jsonl").read_text().splitlines()]
        assert any(e["event"] == "resume" for e in events), c.run_dir


def lobster_result() -> dict:
    """A two-task relative-loss study: rt on both tasks (2 seeds each), rt 1 layer on one."""
    return {"study": "lobster-study", "lower_is_better": True, "seeds": 2, "tasks": ["lobster", "lobster_weighted"],
            "variants": ["rt", "rt 1 layer"],
            "cells": [{"task": "lobster", "variant": "rt", "score": 0.12},
                      {"task": "lobster", "variant": "rt", "score": 0.10},
                      {"task": "lobster_weighted", "variant": "rt", "score": 0.30},
                      {"task": "lobster_weighted", "variant": "rt", "score": 0.34},
                      {"task": "lobster", "variant": "rt 1 layer", "score": 0.20}],
            "figures": [{"variant": "rt", "task": "lobster", "mean": 0.115, "std": 0.01, "seeds": 5}],
            "averages": [{"variant": "rt", "mean": 0.5}]}


def test_a_lower_is_better_study_is_aggregated_in_its_own_unit_not_in_percent():
    result = lobster_result()
    rows, columns = study_table(result)
    by = {(r["task"], r["model"]): r for r in rows}
    ours = Summary.of([0.12, 0.10])
    mean, std = ours.mean, ours.std
    assert by["lobster", "rt"]["ours"] == f"{mean:.2f} ± {std:.2f}" == "0.11 ± 0.01"  # not 11.00 ± 1.41
    assert by["lobster", "rt"]["diff"] == f"{mean - 0.115:+.2f}"  # against the paper's figure, same unit
    # relative loss declares no equivalence margin: the interval, but no verdict unless --margin gives one
    assert by["lobster", "rt"]["verdict"] == "no verdict: no margin declared"
    assert by["lobster", "rt"]["95% CI of diff"].startswith("[") and "df" in by["lobster", "rt"]["95% CI of diff"]
    assert study_table(result, margin=0.5)[0][0]["verdict"] == "agrees"  # [-0.14, +0.13] inside ±0.5
    assert by["lobster", "rt 1 layer"]["ours"] == "0.20" and by["lobster", "rt 1 layer"]["seeds"] == "1 of 2"
    # the average compares the tasks with a published figure: lobster only (lobster_weighted has none)
    assert by["average", "rt"]["ours"] == "0.11" and by["average", "rt"]["diff"] == f"{mean - 0.115:+.2f}"
    assert by["average", "rt"]["seeds"] == "1 task: lobster; left out (no published figure): lobster_weighted"
    assert by["average", "rt 1 layer"]["ours"] == "-"  # its one task has one seed: nothing to average
    higher = study_table({**result, "lower_is_better": False})[0]  # the same numbers as scores: percent
    assert higher[0]["ours"] == f"{100 * mean:.2f} ± {100 * std:.2f}"


def test_cells_of_an_earlier_protocol_are_never_pooled_with_the_protocols():
    """A cell re-run under a changed protocol setting sits beside its seeds trained before the change: the
    protocol's cells are pooled and compared, the others get a row of their own, marked, never compared."""
    result = lobster_result()
    old = "trained with data.order \"seeded\" where the protocol has \"sequential\""
    result["cells"] = [{**c, "comparable": c["score"] != 0.12, "why_not": old if c["score"] == 0.12 else ""}
                       for c in result["cells"]]
    rows = [r for r in study_table(result)[0] if (r["task"], r["model"]) == ("lobster", "rt")]
    assert [(r["ours"], r["seeds"]) for r in rows] == [("0.10", "1 of 5"), ("0.12", "1 of 5")]
    assert rows[0]["diff"] == "-0.01" and rows[1]["diff"] == "-" and rows[1]["verdict"] == f"not comparable: {old}"


def test_a_study_of_lobster_tasks_is_lower_is_better():
    from relreason.studies.sweep import _lower_is_better

    assert _lower_is_better(["lobster"]) and _lower_is_better(["lobster_weighted"])
    assert not _lower_is_better(["bfs"])
