"""One run as a record: what a run directory says about itself, finished, running or interrupted.

    info = read_run("runs/mpnn-bfs-s0")          # RunInfo
    info.status, info.test, info.metric.describe(), info.problems

The files and their records are relreason.rundir's; this module turns them into what `runs`,
`compare` and `plot` show. Every missing or unreadable piece has a stated fallback: a record never
crashes a listing, it carries a `problems` note instead (an unreadable results.json still means
"finished"; a run whose config.json is lost still says what its results.json says).
"""

from __future__ import annotations

import enum
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

from relreason.errors import RelreasonError
from relreason.eval.metric_kinds import Metric, MetricLookup, resolve_metric
from relreason.files import escape, maybe_json_object, read_json_object
from relreason.rundir import (RESULTS, DivergedRow, FieldError, ResumeRow, RunDir, RunRecord, RunResults,
                              find_run_dirs, read_metrics, validations)
from relreason.runtime import lock_holder


class Status(str, enum.Enum):
    FINISHED = "finished"  # results.json exists
    RUNNING = "running"  # its lock names a live process on this host
    INTERRUPTED = "interrupted"  # neither: killed, crashed or stopped with Ctrl-C (resumable)
    DIVERGED = "diverged"  # stopped by a non-finite loss (resumable with a lower train.lr)


@dataclass
class RunInfo:
    """What one run directory says about itself. Missing values are None, never guessed."""

    path: Path
    name: str  # relative to the folder it was found in (or the path as given)
    model: Optional[str]
    task: Optional[str]
    seed: Optional[int]
    status: Status
    metric: Metric
    examples: Optional[int]  # training examples seen (results.json, else the last validation)
    best_val: Optional[float]
    best_examples: Optional[int]
    test: Optional[float]  # OOD test headline score of the best checkpoint
    test_size: Optional[int]
    per_task: dict = field(default_factory=dict)  # multi-task runs: {task: (score, Metric)}
    config: dict = field(default_factory=dict)  # the resolved config; {} when unreadable
    started: Optional[float] = None  # epoch seconds (the lock's, else config.json's mtime)
    updated: float = 0.0  # epoch seconds of the newest file the run wrote
    ablation: Optional[str] = None  # for ablation cells: the ablation and variant directory names
    variant: Optional[str] = None
    lock: Optional[dict] = None
    problems: list = field(default_factory=list)  # unreadable files and damaged lines, in words
    diverged_step: Optional[int] = None  # the step whose loss was not finite, when that stopped the run

    def scores(self) -> dict:
        """{task: (OOD test score, Metric)}: one task for a single-task run, each of `per_task` else."""
        if self.per_task:
            return dict(self.per_task)
        if self.task is None:
            return {}
        return {self.task: (self.test, self.metric)}

    def to_dict(self, now: Optional[float] = None) -> dict:
        now = time.time() if now is None else now
        return {"name": self.name, "path": str(self.path), "model": self.model, "task": self.task,
                "seed": self.seed, "status": self.status.value, "metric": self.metric.name,
                "lower_is_better": self.metric.lower_is_better, "examples": self.examples,
                "best_val": self.best_val, "best_examples": self.best_examples, "test": self.test,
                "test_size": self.test_size,
                "per_task": {t: {"score": s, "metric": m.name} for t, (s, m) in self.per_task.items()},
                "ablation": self.ablation, "variant": self.variant, "started": self.started,
                "updated": self.updated, "age_seconds": round(now - self.updated, 1),
                "diverged_step": self.diverged_step, "problems": self.problems}


def _load(path: Path, record, problems: list):
    """The record (RunRecord or RunResults) stored in `path`; None, with a note in `problems`, when it
    is unreadable or does not validate; None when there is no such file."""
    if not os.path.lexists(path):
        return None
    try:
        data = read_json_object(path)
    except RelreasonError as e:  # a FIFO, a directory, a link, a cut file, hostile JSON: listed as damaged
        problems.append(escape(e.message))
        return None
    try:
        return record.from_dict(data, path.name)
    except FieldError as e:
        problems.append(escape(e.message))
        return None


def run_status(run_dir: Path) -> tuple[Status, Optional[dict]]:
    """finished if results.json exists; running if a live process holds the run's lock (an OS file lock,
    so it also answers for other hosts on a shared filesystem and never mistakes a reused pid); else
    interrupted. The second value is the holder's record ({"pid", "host", "started"}) when known."""
    run_dir = Path(run_dir)
    holder = lock_holder(run_dir)
    if RunDir(run_dir).finished():
        return Status.FINISHED, holder
    if holder is not None:
        return Status.RUNNING, holder
    return Status.INTERRUPTED, None


def _number(x) -> Optional[float]:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x)


def _int(x) -> Optional[int]:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def _bool(x) -> Optional[bool]:
    return x if isinstance(x, bool) else None


def _str(x) -> Optional[str]:
    """A non-empty string read from a run's file, its control characters escaped (it is printed)."""
    return escape(x) if isinstance(x, str) and x else None


def _best(values: Iterable[tuple[float, int]],
          lower_is_better: Optional[bool]) -> tuple[Optional[float], Optional[int]]:
    vals = [(v, e) for v, e in values if not math.isnan(v)]
    if not vals or lower_is_better is None:
        return None, None
    # the first of equal scores, as the training loop keeps the first checkpoint that reached it
    pick = min if lower_is_better else max
    best = pick(v for v, _ in vals)
    return best, next(e for v, e in vals if v == best)


def is_run_dir(path: Path) -> bool:
    """A folder with a run's config.json (or results.json); checkpoints and bundles hold weights and are not runs."""
    return RunDir(path).is_run()


def read_run(path: Path, name: Optional[str] = None, metric_of: Optional[MetricLookup] = None) -> RunInfo:
    """Reads one run directory. Raises RelreasonError when `path` is not one."""
    path = Path(path)
    rd = RunDir(path)
    if not rd.is_run():
        raise RelreasonError(f"{path} is not a run directory (no run config.json or results.json)",
                             _not_a_run_hint(path))
    problems: list[str] = []
    record: Optional[RunRecord] = _load(rd.config, RunRecord, problems)
    cfg = record.config if record is not None else {}
    res: Optional[RunResults] = _load(rd.results, RunResults, problems)
    status, lock = run_status(path)
    train = cfg.get("train") if isinstance(cfg.get("train"), dict) else {}
    model = _str(cfg.get("model_name")) or (_str(res.model) if res else None)
    task = _str(cfg.get("task")) or (_str(res.task) if res else None)
    seed = _int(train.get("seed"))
    seed = seed if seed is not None else (res.seed if res else None)
    lib = res.lower_is_better if res else None
    metric = resolve_metric(_str(res.metric) if res else None, lib, task, metric_of)

    rows = read_metrics(rd.metrics, problems)
    last_session = rows[max((i for i, r in enumerate(rows) if isinstance(r, ResumeRow)), default=0):]
    diverged = next((r.step for r in reversed(last_session) if isinstance(r, DivergedRow)), None)
    if status is Status.INTERRUPTED and diverged is not None:
        status = Status.DIVERGED
    if res is not None:
        examples, best_val, best_examples = res.examples, _number(res.best_val), res.best_examples
    else:  # unfinished: what its validations so far say
        vals = validations(rows)
        examples = vals[-1].examples if vals else None
        best_val, best_examples = _best(((float(r.score), r.examples) for r in vals), metric.lower_is_better)
    per_task = {}
    for t, block in (res.per_task if res else {}).items():
        # the task's own record, else the run's, else what the task registry knows
        task_metric = _str(block.get("metric")) or _str(res.metric)
        blib = _bool(block.get("lower_is_better"))
        per_task[t] = (_number(block.get("score")),
                       resolve_metric(task_metric, lib if blib is None else blib, t, metric_of))

    times = [p.stat().st_mtime for p in rd.files if p.exists()]
    started = _number(lock.get("started")) if lock else None
    if started is None and rd.config.exists():
        started = rd.config.stat().st_mtime
    cell = rd.cell()
    ablation, variant = (cell[0], cell[1]) if cell is not None and cell[2] == task else (None, None)
    return RunInfo(path=path, name=escape(name if name is not None else str(path)), model=model, task=task, seed=seed,
                   status=status, metric=metric, examples=examples, best_val=best_val, best_examples=best_examples,
                   test=_number(res.test.score) if res else None, test_size=res.test_size if res else None,
                   per_task=per_task, config=cfg, started=started, updated=max(times, default=0.0),
                   ablation=ablation, variant=variant, lock=lock, problems=problems,
                   diverged_step=diverged if status is Status.DIVERGED else None)


def _not_a_run_hint(path: Path) -> str:
    if not path.exists():
        return "check the path; `relreason runs` lists the runs"
    if path.is_dir():
        inside = sum(1 for _ in find_run_dirs(path))
        if inside:
            return f"it holds {inside} run(s): pass --runs {path}, or list them with `relreason runs {path}`"
    return "give a folder made by `relreason train` (runs/NAME) or an ablation cell (.../seed0/run)"


def read_ablation(path: Path) -> Optional[dict]:
    """The results.json of an ablation folder ({"ablation", "variants", "tasks", "cells"}), or None."""
    file = Path(path) / RESULTS  # `relreason ablate` writes its tables under the name a run gives its results
    data = maybe_json_object(file)
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list) or "ablation" not in data:
        return None
    return data


__all__ = ["Status", "RunInfo", "run_status", "is_run_dir", "read_run", "read_ablation"]
