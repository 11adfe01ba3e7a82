"""Training a study's cells: each claimed with its run lock, here or in `--jobs` worker processes.

The unit of work is a seed group (relreason.studies.cells.seed_groups: cells of one column and task that
differ in their seed alone, `--seed-batch` of them at most), trained in one process by
relreason.train.seed_group.train_members, each cell its own run directory exactly as trained alone; a
group of one is the single run itself. A cell whose lock another process holds is being trained there
(another worker, another shard on another machine sharing the sweep directory) and is skipped, never
waited for; the group trains the cells it could claim. A partial cell resumes its checkpoint under the
same configuration, in a group or alone. Ctrl-C stops the running cells after their step, with a
checkpoint, and raises KeyboardInterrupt once they have stopped; a worker's exception is raised once
the running cells are done.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Callable

from relreason.errors import RelreasonError
from relreason.rundir import CELL_RUN
from relreason.runtime import RunLock, bars_enabled, cli_command, progress
from relreason.studies.cells import Cell, cell_label, cell_state, is_held
from relreason.studies.costs import time_left
from relreason.tracking import RunAbout


def train_cell(cell: Cell, show_progress: bool = False, log: Callable[[str], None] = print,
               command: str | None = None) -> str:
    """Claims a cell with its run lock and trains it (resuming a checkpoint under the same config).
    `command`: the command line its run records (a job of relreason.studies.launch: the one that
    submitted it); by default this process's. Returns "trained", "interrupted", "held" (another process
    trains it: left alone), "done" (another process finished it meanwhile) or "stale" (its directory holds
    another configuration's run)."""
    return train_group([cell], "auto", show_progress, log, command)[0]


def train_group(cells: list[Cell], strategy: str = "auto", show_progress: bool = False,
                log: Callable[[str], None] = print, command: str | None = None, pack: bool = False,
                packs: list | None = None, eval_threads: int | None = None, cores: int | None = None) -> list[str]:
    """Claims each cell of a seed group with its run lock, as a single run would, and trains the claimed
    cells that have no results yet as one seed group (one cell: its single run); returns each cell's
    status as `train_cell` does (`command` too). `pack`: the cells (of any columns and tasks) train as one
    pack instead (relreason.train.pack), its PackResult appended to `packs` when given; `eval_threads`: how many
    of its cells validate side by side, `cores` the cores their data streams share (relreason.train.pack.train_pack's;
    defaults there)."""
    status: dict[int, str] = {}
    claimed: list[tuple[int, Cell, RunLock, str]] = []
    try:
        for k, c in enumerate(cells):
            lock = RunLock(c.run_dir)
            try:
                lock.acquire()
            except RelreasonError:
                if is_held(c):
                    status[k] = "held"
                    continue
                raise
            state = cell_state(c)  # again under the lock: the cell may have changed since it was planned
            if state in ("done", "stale"):
                lock.release()
                status[k] = state
                continue
            claimed.append((k, c, lock, state))
        if claimed:
            interrupted = _train_claimed([(c, lock, state) for _, c, lock, state in claimed], strategy,
                                         show_progress, log, command or cli_command(), pack, packs, eval_threads,
                                         cores)
            for (k, *_), stopped in zip(claimed, interrupted):
                status[k] = "interrupted" if stopped else "trained"
    finally:
        for _, _, lock, _ in claimed:
            lock.release()
    return [status[k] for k in range(len(cells))]


def _train_claimed(claimed: list, strategy: str, show_progress: bool, log: Callable[[str], None],
                   command: str | None, pack: bool = False, packs: list | None = None,
                   eval_threads: int | None = None, cores: int | None = None) -> list[bool]:
    """Trains claimed (cell, lock, state) of one group (`pack`: one pack); whether each was interrupted (a
    pack's cell that reached its budget before the stop is finished and tested: relreason.train.pack)."""
    from relreason.train import run  # CLI start-up: torch loads on use
    from relreason.train.pack import train_pack  # CLI start-up: torch loads on use
    from relreason.train.resume import resume_config  # CLI start-up: torch loads on use
    from relreason.train.seed_group import train_members  # CLI start-up: torch loads on use

    configs = []
    for c, _, state in claimed:
        cfg = c.config
        if state == "partial":  # the stored config (the same cell; it may differ in machine-only keys)
            t = c.config.train
            machine = [f"train.device={t.device}", f"train.threads={t.threads}"]
            if pack:  # a cell parked by a CPU lane continues captured on a GPU (scripts/gpu_cells.sh), and back
                machine += [f"train.static_step={t.static_step}", f"train.cuda_graph={t.cuda_graph}"]
            cfg = resume_config(c.run_dir, machine)
        configs.append(cfg)
    abouts = [RunAbout(cell_label(c), group=c.study or None, job_type=c.variant.label) for c, _, _ in claimed]
    hint = "the study's command" if command is None else command  # a cell resumes with its study
    if pack:
        packed = train_pack(configs, [c.run_dir for c, _, _ in claimed], [state == "partial" for *_, state in claimed],
                            show_progress, command, log, [lock for _, lock, _ in claimed], abouts, resume_hint=hint,
                            eval_threads=eval_threads, cores=cores)
        if packs is not None:
            packs.append(packed)
        return [r.interrupted for r in packed.results]
    if len(claimed) == 1:
        c, lock, state = claimed[0]
        return [run(configs[0], out=c.directory, name=CELL_RUN, resume=state == "partial", show_progress=show_progress,
                    command=command, log=log, lock=lock, about=abouts[0], resume_hint=hint).interrupted]
    results = train_members(configs, [c.run_dir for c, _, _ in claimed], [state == "partial" for *_, state in claimed],
                            show_progress, command, log, strategy, [lock for _, lock, _ in claimed], abouts, hint)
    return [any(r.interrupted for r in results)] * len(results)  # a group stops together


def group_label(cells: list[Cell]) -> str:
    """"rt / bfs / seed 0" for one cell, "rt / bfs / seeds 0, 1, 2" for a group, "pack of 2 cells: ..." for a
    pack of several columns or tasks."""
    if len(cells) == 1:
        return cell_label(cells[0])
    c = cells[0]
    if any((x.variant.label, x.task) != (c.variant.label, c.task) for x in cells):  # a pack (relreason.train.pack)
        return f"pack of {len(cells)} cells: " + "; ".join(cell_label(x) for x in cells)
    return f"{c.variant.label} / {c.task} / seeds {', '.join(str(x.seed) for x in cells)}"


PACK_SIZE = 8  # cells per pack (relreason.train.pack): issue 38 measures K = 1, 8, 16, 32 (scripts/gpu_cells.py)
PACK_CHOICES = ("auto", "on", "off")


def pack_size(pack: str, cells: list) -> int:
    """`--pack`: the cells per pack (0: no packing). on packs anywhere; auto does not pack, on any device: on the
    CPU a pack changes nothing, and on an H200 (2026-11-28, results/gpu/gpu_cells_third_try.log) a pack of three
    captured cells stalled in a step's read-back while one captured cell at a time trained (docs/gpu.md),
    so auto keeps the path that ran until a GPU run shows why."""
    if pack not in PACK_CHOICES:
        raise RelreasonError(f"--pack {pack!r} is not one of {', '.join(PACK_CHOICES)}", "e.g. --pack auto")
    if pack != "on" or not cells:
        return 0
    return PACK_SIZE


def pack_groups(todo: list[list[Cell]], size: int) -> list[list[Cell]]:
    """The cells of `todo`, in order, cut into packs of at most `size` cells (relreason.train.pack)."""
    cells = [c for g in todo for c in g]
    return [cells[i:i + size] for i in range(0, len(cells), size)]


def run_cells(name: str, todo: list[list[Cell]], total: int, jobs: int, show_progress: bool,
              log: Callable[[str], None], strategy: str = "auto", pack: int = 0) -> None:
    """Trains the seed groups `todo` of the study `name` (`total` cells in this sweep, for progress), in
    this process or in `jobs` worker processes, each training one group at a time. `pack` > 0: the cells
    train instead in packs of up to that many cells, one process each (relreason.train.pack)."""
    if pack:
        todo = pack_groups(todo, pack)
    if jobs == 1:
        _train_here(name, todo, total, show_progress, log, strategy, bool(pack))
    else:
        _train_in_workers(name, todo, total, jobs, show_progress, log, strategy, bool(pack))


_SKIPPED = {"held": "another process trains it; skipped", "stale": "its directory holds another configuration; skipped"}


def _train_here(name: str, todo: list[list[Cell]], total: int, show_progress: bool, log: Callable[[str], None],
                strategy: str, pack: bool = False) -> None:
    cells = sum(len(g) for g in todo)
    with progress(total, name, unit="cell", disable=not show_progress, initial=total - cells) as bar:
        for k, group in enumerate(todo):
            bar.set_postfix_str(time_left([c for g in todo[k:] for c in g]), refresh=True)
            resuming = [c for c in group if cell_state(c) == "partial"]
            which = "" if len(group) == 1 else " " + ", ".join(f"seed {c.seed}" for c in resuming)
            log(f"{name}: {group_label(group)}" + (f" (resuming{which})" if resuming else ""))
            statuses = train_group(group, strategy, show_progress, log, pack=pack)
            if "interrupted" in statuses:
                raise KeyboardInterrupt
            for c, status in zip(group, statuses):
                if status in _SKIPPED:
                    log(f"{name}: {cell_label(c)}: {_SKIPPED[status]}")
                else:
                    bar.update(1)


def _train_in_workers(name: str, todo: list[list[Cell]], total: int, jobs: int, show_progress: bool,
                      log: Callable[[str], None], strategy: str, pack: bool = False) -> None:
    """Trains the groups `todo` in `jobs` worker processes, at most `jobs` groups at a time (so the running
    ones are exactly those submitted), with one progress display: cells done / total and the running groups."""
    from relreason.train.distributed import available_cores  # CLI start-up: torch loads on use

    jobs = min(jobs, max(1, len(todo)))
    threads = max(1, available_cores() // jobs)
    done = total - sum(len(g) for g in todo)
    queue, running, failure, interrupted = list(todo), {}, None, False
    bar = progress(total, f"{name} ({jobs} jobs)", unit="cell", disable=not show_progress, initial=done)
    pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_start,
                               initargs=(threads,))
    try:
        while (queue or running) and not interrupted:
            while queue and len(running) < jobs and failure is None:
                g = queue.pop(0)
                running[pool.submit(_worker_group, g, strategy, pack)] = g
                log(f"{name}: started {group_label(g)} ({len(running)} running)")
            if not running:
                break
            left = time_left([c for g in [*running.values(), *queue] for c in g], jobs)
            bar.set_postfix_str("; ".join(filter(None, [left, "running: " + "; ".join(group_label(g) for g in
                                                                                      running.values())])),
                                refresh=True)
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in finished:
                g = running.pop(fut)
                try:
                    statuses = fut.result()
                except Exception as e:  # noqa: BLE001 - re-raised once the running groups are done
                    failure = failure or e
                    continue
                for c, status in zip(g, statuses):
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
        _stop_workers(pool)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        bar.close()
    if failure is not None:
        raise failure
    if interrupted:
        raise KeyboardInterrupt


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """Asks every worker to stop its cells after their step (SIGINT, as a terminal's Ctrl-C does). A Ctrl-C
    reached them already (it goes to the whole process group; this one comes within StopRequests.PATIENCE, so
    it is not a second), and so may a scheduler's SIGTERM; a `kill PID` reached only this process."""
    for pid in list(getattr(pool, "_processes", None) or {}):  # ProcessPoolExecutor's workers, by pid
        try:
            os.kill(pid, signal.SIGINT)
        except ProcessLookupError:  # gone already
            pass


def _worker_start(threads: int) -> None:
    """A worker ignores Ctrl-C and SIGTERM between cells (the parent handles both and passes a stop on:
    `_stop_workers`; in a cell, training stops after its step on either); `threads` torch threads. SIGTERM gets
    a handler that does nothing rather than SIG_IGN, which the worker's own data processes would inherit and
    StopRequests would keep."""
    import torch  # CLI start-up: torch loads on use

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _between_cells)
    torch.set_num_threads(threads)


def _between_cells(signum, frame) -> None:
    """A worker's SIGTERM handler outside training: nothing (the parent decides)."""


def _worker_group(cells: list[Cell], strategy: str, pack: bool = False) -> list[str]:
    """One seed group in a worker: Ctrl-C now stops its runs after their step, with a checkpoint."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return train_group(cells, strategy, show_progress=False, log=lambda m: None, pack=pack)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
