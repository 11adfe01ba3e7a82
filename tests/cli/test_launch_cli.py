"""`reproduce` / `ablate` with `--launcher`: the cells submitted as a submitit job array, end to end with
submitit's local executor (real job processes and job folders), a job killed mid-cell and resumed by the
same command again, `--status` per cell, and every bad launcher option a one-line error."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from child_hold import hold_env, release, wait_held
from cli_run import ENTRY, fails, invoke, one_line_error, relreason, succeeds, tiny_sets
from relreason.runtime import lock_holder
from relreason.studies.launch import SLURM_KEYS, parse_slurm

pytest.importorskip("submitit", reason="pip install 'relreason[slurm]' (scripts/setup.sh installs it)")

# 12 examples, a validation every 4: a job held at its validation at 8 examples has its checkpoint at 4
TABLE = ["reproduce", "clrs30", "--models", "mpnn", "--tasks", "bfs", "--recipe", "quick"]


def table(tmp_path, *args):
    return [*TABLE, *tiny_sets(tmp_path / "data", ("train.train_examples=12",)), "--out", tmp_path / "out", *args]


def status(tmp_path, seeds: int) -> dict:
    res = invoke(*table(tmp_path, "--seeds", seeds, "--status", "--json"))
    return {r["seed"]: r for r in json.loads(res.stdout)["cells"]}


def rows(run_dir, event):
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in lines if r["event"] == event]


def test_a_job_killed_mid_cell_is_resumed_by_submitting_again(tmp_path):
    cell = tmp_path / "out" / "cells" / "mpnn" / "quick" / "bfs"
    # 1. seed 0 alone, its job held at its validation at 8 examples (before that checkpoint), then killed
    env = hold_env(tmp_path, examples=8, env={**os.environ, "RELREASON_PROGRESS": "0"})
    proc = subprocess.Popen([*ENTRY, *map(str, table(tmp_path, "--seeds", 1, "--launcher", "local-submitit",
                                                     "--wait"))], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert wait_held(tmp_path, proc) == 8
        job = json.loads((cell / "seed0" / "job.json").read_text())
        assert job["launcher"] == "local-submitit" and (tmp_path / "out" / "jobs" / "clrs30" / job["job"]).is_dir()
        now = status(tmp_path, 2)
        assert (now[0]["status"], now[0]["job"], now[0]["examples"]) == ("running", job["job"], 4)
        assert (now[1]["status"], now[1]["job"]) == ("missing", None)
        holder = lock_holder(cell / "seed0" / "run")
        assert holder["pid"] != proc.pid  # the cell trains in the job's process, not in the command's
        os.kill(holder["pid"], signal.SIGKILL)
        stdout, stderr = proc.communicate()
    finally:  # on a failure above: the held job goes on and ends by itself (a tiny run), the command is stopped
        release(tmp_path)
        if proc.poll() is None:
            proc.kill()
    fails(subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr), 1,
          f"1 of 1 job(s) failed: job {job['job']} (mpnn / bfs / seed 0)")
    now = status(tmp_path, 2)
    assert (now[0]["status"], now[0]["job"], now[0]["examples"]) == ("partial", job["job"], 4)

    # 2. the same command with two seeds: seed 0 resumes from its checkpoint, seed 1 trains from scratch
    out = succeeds(relreason(*table(tmp_path, "--seeds", 2, "--launcher", "local-submitit", "--wait", "--json")))
    assert [c["seed"] for c in json.loads(out)["cells"]] == [0, 1]
    (resumed,) = rows(cell / "seed0" / "run", "resume")
    assert resumed["examples"] == 4
    for seed in (0, 1):
        assert [r["examples"] for r in rows(cell / f"seed{seed}" / "run", "val")] == [0, 4, 8, 12]  # none twice
        assert len(rows(cell / f"seed{seed}" / "run", "test")) == 1
    again = json.loads((cell / "seed0" / "job.json").read_text())["job"]
    assert again != job["job"]
    assert {s: (r["status"], r["job"]) for s, r in status(tmp_path, 2).items()} == {
        0: ("done", again), 1: ("done", json.loads((cell / "seed1" / "job.json").read_text())["job"])}

    # 3. again: every cell is done, nothing is submitted
    res = invoke(*table(tmp_path, "--seeds", 2, "--launcher", "local-submitit"))
    assert res.exit_code == 0 and "nothing to submit" in res.stderr
    assert json.loads((cell / "seed0" / "job.json").read_text())["job"] == again


@pytest.mark.parametrize("args, message", [
    (["--launcher", "slurm", "--slurm", "partiton=gpu,time=60"], "--slurm key 'partiton' is not known (did you mean 'partition'?)"),
    (["--launcher", "slurm", "--slurm", "time=soon"], "--slurm time='soon' must be minutes or [D-]HH:MM:SS"),
    (["--launcher", "slurm", "--slurm", "time=60,gpus_per_node=one"], "--slurm gpus_per_node='one' must be a whole number"),
    (["--launcher", "slurm", "--slurm", "time=60,mem_gb=-4"], "--slurm mem_gb='-4' must be a positive number of GB"),
    (["--launcher", "slurm", "--slurm", "time=60,time=90"], "--slurm key 'time' is given twice"),
    (["--launcher", "slurm", "--slurm", "gpu"], "--slurm 'gpu' is not KEY=VALUE"),
    (["--launcher", "slurm", "--slurm", "partition=gpu"], "--launcher slurm needs a time limit"),
    (["--launcher", "slurm", "--slurm", "time=60", "--jobs", "2"], "--jobs splits a sweep"),
    (["--launcher", "local-submitit", "--shard", "1/2"], "--shard splits a sweep"),
    (["--slurm", "time=60"], "--slurm goes with a submitit launcher"),
    (["--wait"], "--wait goes with a submitit launcher"),
    (["--launcher", "sge"], "unknown launcher (--launcher) 'sge'"),
])
def test_bad_launcher_options_are_one_line_errors_before_anything_is_planned(tmp_path, args, message):
    for command in (table(tmp_path, *args), ["ablate", "single-layer", "--out", tmp_path / "out", *args]):
        one_line_error(invoke(*command), message)
    assert not (tmp_path / "out").exists()


def test_missing_submitit_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "submitit", None)  # `import submitit` now raises ImportError
    res = invoke(*table(tmp_path, "--launcher", "slurm", "--slurm", "time=60"))
    one_line_error(res, "--launcher slurm needs the submitit package")
    assert "pip install 'relreason[slurm]'" in res.output


def test_slurm_values_become_submitit_parameters(tmp_path):
    got = parse_slurm("partition=gpu, time=1-02:30:00,gpus_per_node=1,mem_gb=16,constraint=a100|h100")
    assert got == {"partition": "gpu", "time": 24 * 60 + 150, "gpus_per_node": 1, "mem_gb": 16.0,
                   "constraint": "a100|h100"}
    assert parse_slurm("time=0:00:30")["time"] == 1  # seconds round up: never a zero time limit
    import submitit

    # every key, as the parameter we pass: submitit's AutoExecutor knows each (it refuses unknown ones by name)
    every = parse_slurm("partition=gpu,time=60,gpus_per_node=1,cpus_per_task=4,mem_gb=16,account=lab,qos=high,"
                        "constraint=a100,array_parallelism=8")
    assert every.keys() == SLURM_KEYS.keys()
    executor = submitit.AutoExecutor(folder=tmp_path, cluster="debug")
    executor.update_parameters(**{SLURM_KEYS[k].param: v for k, v in every.items()})


def test_ablate_status_lists_every_planned_cell(tmp_path):
    res = invoke("ablate", "single-layer", "--tasks", "bfs", "--seeds", "2", "--out", tmp_path / "out", "--status",
                 "--json")
    cells = json.loads(res.stdout)["cells"]
    assert len(cells) == 4 and {c["status"] for c in cells} == {"missing"} and not (tmp_path / "out").exists()
