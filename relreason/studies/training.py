"""Training a study's cells: each claimed with its run lock, here or in `--jobs` worker processes.

A cell whose lock another process holds is being trained there (another worker, another shard on
another machine sharing the sweep directory) and is skipped, never waited for. A partial cell resumes
its checkpoint under the same configuration. Ctrl-C stops the running cells after their step, with a
checkpoint, and raises KeyboardInterrupt once they have stopped; a worker's exception is raised once
the running cells are done.
"""

from __future__ import annotations

from typing import Callable

from relreason.errors import RelreasonError
from relreason.rundir import CELL_RUN
from relreason.runtime import cli_command
from relreason.studies.cells import Cell, cell_label, cell_state, is_held


def train_cell(cell: Cell, show_progress: bool = False, log: Callable[[str], None] = print,
               command: str | None = None) -> str:
    """Claims a cell with its run lock and trains it (resuming a checkpoint under the same config).
    `command`: the command line its run records (a job of relreason.studies.launch: the one that
    submitted it); by default this process's. Returns "trained", "interrupted", "held" (another process
    trains it: left alone), "done" (another process finished it meanwhile) or "stale" (its directory holds
    another configuration's run)."""
    from relreason.runtime import RunLock
    from relreason.tracking import RunAbout
    from relreason.train import run
    from relreason.train.loop import resume_config

    lock = RunLock(cell.run_dir)
    try:
        lock.acquire()
    except RelreasonError:
        if is_held(cell):
            return "held"
        raise
    try:
        state = cell_state(cell)  # again under the lock: the cell may have changed since it was planned
        if state in ("done", "stale"):
            return state
        cfg = cell.config
        if state == "partial":  # the stored config (the same cell; it may differ in machine-only keys)
            t = cell.config.train
            cfg = resume_config(cell.run_dir, [f"train.device={t.device}", f"train.threads={t.threads}"])
        about = RunAbout(cell_label(cell), group=cell.study or None, job_type=cell.variant.label)
        res = run(cfg, out=cell.directory, name=CELL_RUN, resume=state == "partial", show_progress=show_progress,
                  command=command or cli_command(), log=log, lock=lock, about=about)
        return "interrupted" if res.interrupted else "trained"
    finally:
        lock.release()


def run_cells(name: str, todo: list[Cell], total: int, jobs: int, show_progress: bool,
              log: Callable[[str], None]) -> None:
    """Trains the cells `todo` of the study `name` (`total` cells in this sweep, for progress), in this
    process or in `jobs` worker processes."""
    if jobs == 1:
        _train_here(name, todo, total, show_progress, log)
    else:
        _train_in_workers(name, todo, total, jobs, show_progress, log)


def _train_here(name: str, todo: list[Cell], total: int, show_progress: bool, log: Callable[[str], None]) -> None:
    from relreason.runtime import progress

    with progress(total, name, unit="cell", disable=not show_progress, initial=total - len(todo)) as bar:
        for c in todo:
            resume = cell_state(c) == "partial"
            log(f"{name}: {cell_label(c)}" + (" (resuming)" if resume else ""))
            status = train_cell(c, show_progress, log)
            if status == "interrupted":
                raise KeyboardInterrupt
            if status in ("held", "stale"):
                log(f"{name}: {cell_label(c)}: " + ("another process trains it; skipped" if status == "held"
                                                     else "its directory holds another configuration; skipped"))
            else:
                bar.update(1)


def _train_in_workers(name: str, todo: list[Cell], total: int, jobs: int, show_progress: bool,
                      log: Callable[[str], None]) -> None:
    """Trains `todo` in `jobs` worker processes, at most `jobs` cells at a time (so the running ones are
    exactly those submitted), with one progress display: cells done / total and the running cells."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    from relreason.runtime import bars_enabled, progress
    from relreason.train.distributed import available_cores

    jobs = min(jobs, max(1, len(todo)))
    threads = max(1, available_cores() // jobs)
    done = total - len(todo)
    queue, running, failure, interrupted = list(todo), {}, None, False
    bar = progress(total, f"{name} ({jobs} jobs)", unit="cell", disable=not show_progress, initial=done)
    pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_start,
                               initargs=(threads,))
    try:
        while (queue or running) and not interrupted:
            while queue and len(running) < jobs and failure is None:
                c = queue.pop(0)
                running[pool.submit(_worker_cell, c)] = c
                log(f"{name}: started {cell_label(c)} ({len(running)} running)")
            if not running:
                break
            bar.set_postfix_str("running: " + "; ".join(cell_label(c) for c in running.values()), refresh=True)
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in finished:
                c = running.pop(fut)
                try:
                    status = fut.result()
                except Exception as e:  # noqa: BLE001 - re-raised once the running cells are done
                    failure = failure or e
                    continue
                interrupted = interrupted or status == "interrupted"
                finished_now = status in ("trained", "done")
                done += finished_now
                bar.update(finished_now)
                what = {"trained": "done", "done": "done (by another process)", "interrupted": "interrupted",
                        "held": "skipped: another process trains it",
                        "stale": "skipped: its directory holds another configuration"}[status]
                if not bars_enabled() or status != "trained":
                    log(f"{name}: {what}: {cell_label(c)} ({done}/{total} cells)")
    except KeyboardInterrupt:
        interrupted = True
        log(f"{name}: interrupted; the running cells save a checkpoint and stop")
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        bar.close()
    if failure is not None:
        raise failure
    if interrupted:
        raise KeyboardInterrupt


def _worker_start(threads: int) -> None:
    """A worker ignores Ctrl-C between cells (the parent handles it); `threads` torch threads."""
    import signal

    import torch

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(threads)


def _worker_cell(cell: Cell) -> str:
    """One cell in a worker: Ctrl-C now stops the run after its step, with a checkpoint (train.run)."""
    import signal

    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return train_cell(cell, show_progress=False, log=lambda m: None)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
