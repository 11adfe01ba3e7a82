"""Sweeps on a cluster: a study's cells submitted as one submitit job array, and their status.

    relreason reproduce clrs30 --models mpnn --tasks core8 --launcher slurm --slurm partition=gpu,time=600
    relreason reproduce clrs30 --models mpnn --tasks core8 --status

`run_study` (relreason.studies.sweep) plans and checks the cells as for a local sweep (stale cells are
refused before anything is submitted), then hands the seed groups left to train to `Launch.submit`: one
array element per group (`--seed-batch`; with 1, one cell each), each running `train_group`
(relreason.studies.training) on its cells, the machinery of a local run: the run lock, the cell's state
checked again under it, a partial cell resumed. A cell whose lock is held is running and is not
submitted again and a finished one is skipped, so the same command again resumes what a killed or
timed-out job left. Each submitted cell records its job in `job.json` beside its run (written
atomically), which `--status` shows beside each cell's state.

Launchers (`--launcher`, the registry LAUNCHERS): local (the cells train in this process, `--jobs` /
`--shard`), slurm (sbatch through submitit) and local-submitit (submitit's LocalExecutor: the same job
files and job processes on this machine; the tests use it, and it tries a submission before a cluster
sees it). A job on SLURM that reaches its time limit is requeued by submitit (`CellJob.checkpoint`) and
resumes its cell from the last validation's checkpoint.

submitit is imported only here, when a job is submitted or run; nothing else in relreason needs it.
"""

from __future__ import annotations

import difflib
import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from relreason.data.store import atomic_path
from relreason.errors import RelreasonError
from relreason.files import maybe_json_object
from relreason.registry import Registry
from relreason.runtime import lock_holder
from relreason.studies.cells import Cell, cell_label, cell_state, is_held
from relreason.studies.training import train_group

JOB_RECORD = "job.json"  # in a cell's directory, beside its run: the job that was submitted to train it
EXTRA = "pip install 'relreason[slurm]'"


@dataclass(frozen=True)
class LauncherKind:
    """A `--launcher` choice: `cluster` is submitit's AutoExecutor cluster (None: train in this process)."""

    name: str
    cluster: str | None
    summary: str


LAUNCHERS: Registry[LauncherKind] = Registry("launcher (--launcher)")
LAUNCHERS.register("local", LauncherKind("local", None, "the cells train in this process (--jobs N, --shard I/K)"))
LAUNCHERS.register("slurm", LauncherKind("slurm", "slurm", "one SLURM job array through submitit, a cell per element"))
LAUNCHERS.register("local-submitit", LauncherKind("local-submitit", "local",
                                                  "submitit's local executor: the same jobs as processes here"))


def _minutes(text: str) -> int:
    """"90" or "1:30:00" or "2-00:00:00" (SLURM's [D-]HH:MM:SS) -> minutes."""
    if re.fullmatch(r"\d+", text):
        return int(text)
    m = re.fullmatch(r"(?:(\d+)-)?(\d+):(\d\d):(\d\d)", text)
    if not m:
        raise ValueError("minutes or [D-]HH:MM:SS")
    days, hours, minutes, seconds = (int(x or 0) for x in m.groups())
    return days * 1440 + hours * 60 + minutes + (seconds > 0)


def _count(text: str) -> int:
    if not re.fullmatch(r"\d+", text):
        raise ValueError("a whole number")
    return int(text)


def _gigabytes(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError("a positive number of GB")
    return value


def _name(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.:|&!\-]+", text):  # |&!: SLURM's constraint expressions
        raise ValueError("a SLURM name")
    return text


@dataclass(frozen=True)
class SlurmKey:
    parse: Callable[[str], object]  # raises ValueError naming what it wants
    param: str  # submitit AutoExecutor's parameter
    what: str


# --slurm KEY=VALUE,...: what a job of one cell needs; anything else is the cluster's default
SLURM_KEYS = {
    "partition": SlurmKey(_name, "slurm_partition", "the partition (queue)"),
    "time": SlurmKey(_minutes, "timeout_min", "each job's time limit (required: submitit's default is 5 min)"),
    "gpus_per_node": SlurmKey(_count, "gpus_per_node", "GPUs per job (a cell trains on one)"),
    "cpus_per_task": SlurmKey(_count, "cpus_per_task", "CPU cores per job"),
    "mem_gb": SlurmKey(_gigabytes, "mem_gb", "memory per job"),
    "account": SlurmKey(_name, "slurm_account", "the account charged"),
    "qos": SlurmKey(_name, "slurm_qos", "the quality of service"),
    "constraint": SlurmKey(_name, "slurm_constraint", "node features, e.g. a100"),
    "array_parallelism": SlurmKey(_count, "slurm_array_parallelism", "at most this many cells at once"),
}
LOCAL_TIMEOUT_MIN = 7 * 24 * 60  # local-submitit without time=: submitit's local default (2 min) would kill a cell


def parse_slurm(text: str) -> dict:
    """"partition=gpu,time=60" -> {"partition": "gpu", "time": 60}; a bad key or value is a one-line error
    naming it."""
    hint = "e.g. --slurm partition=gpu,time=600,gpus_per_node=1; keys: " + ", ".join(SLURM_KEYS)
    out: dict = {}
    for part in (p.strip() for p in text.split(",")):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise RelreasonError(f"--slurm {part!r} is not KEY=VALUE", hint)
        if key not in SLURM_KEYS:
            close = difflib.get_close_matches(key, SLURM_KEYS, n=1)
            raise RelreasonError(f"--slurm key {key!r} is not known" + (f" (did you mean {close[0]!r}?)" if close else ""),
                                 hint)
        if key in out:
            raise RelreasonError(f"--slurm key {key!r} is given twice", hint)
        try:
            out[key] = SLURM_KEYS[key].parse(value)
        except ValueError as e:
            what = str(e) if not str(e).startswith("could not") else "a number"
            raise RelreasonError(f"--slurm {key}={value!r} must be {what}", f"{key}: {SLURM_KEYS[key].what}") from None
    return out


def check_submitit(launcher: str) -> None:
    try:
        import submitit  # noqa: F401  (optional: the slurm extra)
    except ImportError:
        raise RelreasonError(f"--launcher {launcher} needs the submitit package",
                             f"{EXTRA}, or leave --launcher out to train here") from None


@dataclass(frozen=True)
class Launch:
    """Where and how a sweep's cells are submitted (`launch_for` builds it from the command's options)."""

    launcher: str  # a LAUNCHERS name other than local
    params: dict  # submitit AutoExecutor parameters
    folder: Path  # submitit's job files (pickles, logs): FOLDER/<job id>/
    wait: bool  # wait for the jobs to end (and fail when one failed)
    command: str | None = field(default=None)  # the command line that submitted, recorded by each cell's run

    def submit(self, name: str, groups: list[list[Cell]], log: Callable[[str], None],
               strategy: str = "auto") -> list[dict]:
        """Submits the seed groups of study `name` left to train, as one array, one element per group (a cell
        whose lock is held is running elsewhere and is left alone); returns [{"job", "cells"}] per element."""
        import submitit  # optional: the slurm extra

        held = {c.directory for g in groups for c in g if is_held(c)}
        for c in (c for g in groups for c in g if c.directory in held):
            log(f"{name}: {cell_label(c)}: running (job {job_record(c).get('job', '?')}); not submitted again")
        groups = job_groups([[c for c in g if c.directory not in held] for g in groups])
        if not groups:
            log(f"{name}: nothing to submit")
            return []
        executor = submitit.AutoExecutor(folder=self.folder / "%j", cluster=LAUNCHERS.get(self.launcher).cluster)
        executor.update_parameters(name=f"relreason-{name}", **self.params)
        jobs = executor.map_array(CellJob(self.command, strategy), groups)
        submitted = []
        for job, group in zip(jobs, groups):
            for c in group:
                write_job_record(c, {"job": job.job_id, "launcher": self.launcher, "submitted": time.time(),
                                     "log": str(job.paths.stderr)})
            submitted.append({"job": job.job_id, "cells": [cell_label(c) for c in group]})
        log(f"{name}: submitted {sum(map(len, groups))} cell(s) as {len(jobs)} job(s) ({self.launcher}: "
            f"{', '.join(j.job_id for j in jobs[:4])}{', ...' if len(jobs) > 4 else ''}); job files in {self.folder}")
        if self.wait:
            _wait(name, jobs, groups, log)
        return submitted


def launch_for(launcher: str, slurm: str | None, wait: bool, folder: Path, jobs: int = 1,
               shard: str | None = None, command: str | None = None) -> Launch | None:
    """The command's launcher options checked together (each conflict a one-line error); None: train here."""
    kind = LAUNCHERS.get(launcher)
    if kind.cluster is None:
        for flag, given in (("--slurm", slurm is not None), ("--wait", wait)):
            if given:
                raise RelreasonError(f"{flag} goes with a submitit launcher, not --launcher {launcher}",
                                     "add --launcher slurm (or local-submitit), or drop " + flag)
        return None
    for flag, given in (("--jobs", jobs != 1), ("--shard", shard is not None)):
        if given:
            raise RelreasonError(f"{flag} splits a sweep across local processes or machines; --launcher {launcher} "
                                 "submits a job per cell (per seed group)", f"drop {flag}")
    params = parse_slurm(slurm) if slurm else {}
    if kind.cluster == "slurm" and "time" not in params:
        raise RelreasonError("--launcher slurm needs a time limit: time=MINUTES (or [D-]HH:MM:SS) in --slurm",
                             "e.g. --slurm partition=gpu,time=600,gpus_per_node=1 (one cell per job)")
    check_submitit(launcher)
    executor = {SLURM_KEYS[k].param: v for k, v in params.items()}
    if kind.cluster == "local":
        executor.setdefault("timeout_min", LOCAL_TIMEOUT_MIN)
    return Launch(launcher, executor, Path(folder), wait, command)


def job_groups(groups: list[list[Cell]]) -> list[list[Cell]]:
    """The cells of each array element: one seed group per job (relreason.studies.cells.seed_groups), the
    empty ones dropped."""
    return [g for g in groups if g]


class CellJob:
    """One array element: trains its cells as one seed group with `train_group`, as a local sweep does (each
    cell's lock, state checked under it, resume). Picklable (submitit sends it to the job); `checkpoint` lets submitit requeue a job
    that reaches its time limit, which then resumes its cell."""

    def __init__(self, command: str | None, strategy: str = "auto"):
        self.command, self.strategy = command, strategy

    def __call__(self, cells: list[Cell]) -> list[str]:
        def log(message: str) -> None:
            print(message, file=sys.stderr, flush=True)

        for c in cells:
            log(f"{cell_label(c)}: {c.run_dir}" + (" (resuming)" if cell_state(c) == "partial" else ""))
        statuses = train_group(cells, self.strategy, show_progress=False, log=log, command=self.command)
        for c, status in zip(cells, statuses):
            log(f"{cell_label(c)}: {status}")
        return statuses

    def checkpoint(self, cells: list[Cell]):
        import submitit  # optional: the slurm extra

        return submitit.helpers.DelayedSubmission(self, cells)


def _wait(name: str, jobs: list, groups: list[list[Cell]], log: Callable[[str], None]) -> None:
    """Waits for every job; raises a one-line error naming the first failed one (its log, its cells)."""
    failed = []
    for job, group in zip(jobs, groups):
        error = job.exception()  # waits; None when the job returned
        if error is not None:
            lines = [x for x in str(error).splitlines() if x.strip()]
            failed.append((job, group, lines[-1].strip() if lines else type(error).__name__))
        else:
            log(f"{name}: job {job.job_id} ended: " + ", ".join(f"{cell_label(c)} {s}" for c, s in
                                                                zip(group, job.result())))
    if failed:
        job, group, why = failed[0]
        raise RelreasonError(f"{len(failed)} of {len(jobs)} job(s) failed: job {job.job_id} "
                             f"({', '.join(cell_label(c) for c in group)}): {why[:300]}",
                             f"its log: {job.paths.stderr}; the same command again resumes the unfinished cells")


def write_job_record(cell: Cell, record: dict) -> None:
    with atomic_path(cell.directory / JOB_RECORD) as tmp:
        tmp.write_text(json.dumps(record, sort_keys=True) + "\n")


def job_record(cell: Cell) -> dict:
    """The cell's job.json, or {} (none, or unreadable: the status then names no job)."""
    data = maybe_json_object(cell.directory / JOB_RECORD)
    return data if isinstance(data, dict) and isinstance(data.get("job"), str) else {}


def cell_status(cell: Cell) -> dict:
    """`--status` of one cell: "done", "running" (another process holds its lock), "partial" (a checkpoint
    to resume), "missing" (nothing yet) or "stale" (another configuration's run), with its recorded job
    (or None), where it runs and how many examples its last checkpoint holds."""
    from relreason.train.checkpoint import load_trainer_state  # CLI start-up: torch loads on use

    state = cell_state(cell)
    holder = lock_holder(cell.run_dir) if state != "done" else None
    status = "done" if state == "done" else "running" if holder is not None else \
        {"new": "missing"}.get(state, state)
    examples = None
    if status in ("running", "partial"):
        try:
            examples = load_trainer_state(cell.run_dir / "last")["examples"]
        except RelreasonError:
            pass
    return {"cell": cell_label(cell), "variant": cell.variant.label, "task": cell.task, "seed": cell.seed,
            "status": status, "job": job_record(cell).get("job"), "host": (holder or {}).get("host"),
            "examples": examples, "of": cell.config.train.train_examples, "run": str(cell.run_dir)}


__all__ = ["LAUNCHERS", "Launch", "CellJob", "launch_for", "parse_slurm", "job_groups", "cell_status", "job_record"]
