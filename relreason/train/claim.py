"""Claiming a run directory before training into it (`claim`): its lock taken, and a new run
refused where it would overwrite one.

    with claim(Path("runs/demo"), resume=False, dd=dd, lock=None):
        ...  # train: this process group alone writes runs/demo

Under several processes (relreason.train.distributed) rank 0 claims and the other ranks share its
outcome. A single run (relreason.train.loop) and every member of a seed group
(relreason.train.seed_group) are claimed so.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from relreason.errors import RelreasonError
from relreason.rundir import RunDir, check_no_links
from relreason.runtime import RunLock


def has_progress(run_dir: Path) -> bool:
    """True when a run directory holds a checkpoint or results (a run killed during its very first
    validation left only config.json / metrics.jsonl: nothing to resume, so it may start afresh)."""
    return RunDir(run_dir).has_progress()


def _exists(run_dir: Path) -> RelreasonError:
    return RelreasonError(f"run directory {run_dir} already exists", "pass --resume to continue it or another --name")


@contextmanager
def claim(run_dir: Path, resume: bool, dd, lock: RunLock | None):
    """Rank 0 takes the run directory's lock (unless `lock` is already held) and checks that a new run
    overwrites nothing; the other ranks wait for the outcome and raise its error too."""
    taken: list[RunLock] = []

    def take() -> None:
        check_no_links(run_dir)
        if not resume and has_progress(run_dir):
            raise _exists(run_dir)
        if lock is None:
            taken.append(RunLock(run_dir).acquire())
        if not resume and has_progress(run_dir):  # another process got here first
            raise _exists(run_dir)

    try:
        dd.on_main(take)
        yield
    finally:
        for held in taken:
            held.release()


__all__ = ["claim", "has_progress"]
