"""Packed cells: runs of different tasks or models trained side by side in one process, each exactly its
single run (`train_pack`).

    res = train_pack([cfg_bfs, cfg_dfs], [Path("runs/a"), Path("runs/b")], resume=[False, False])

On a GPU one cell of the papers' protocols uses a sliver of the device (tiny batches, launch-bound steps), and
separate processes side by side barely help (the GPU time-slices their kernels: results/gpu). A pack keeps
several cells in one process and interleaves their steps: every cell has its own workload (model, data stream,
noise), Adam, clipping, validation, best and last checkpoints and run directory, written by the single run's
own code (relreason.train.session's `Session`, claimed by relreason.train.claim); each step of the pack steps
every unfinished cell once, each cell its own step index. With `train.cuda_graph` a cell's step is replayed
from its own CUDA graphs (relreason.train.cuda_graphs) on its own CUDA stream, so the cells' kernels overlap
on the device; the pack reads its cells' losses back once per step, after all were launched. Cells that
differ in their seed alone can share one vmapped graph instead (relreason.train.seed_group); a pack takes
cells of any kind (the step loop is the seed group's loop strategy, relreason.train.seed_group.SeedGroup).

Validations and final tests: the cells due at one step run theirs side by side, each in its own host thread
on its own CUDA stream, each its single run's code (relreason.train.seed_group.SeedGroup.side_by_side): a
validation reads its scores back to the host, so one after another on the main stream they would serialise.

Data: each cell's Ibarz training stream (relreason.data.stream) is generated ahead by its own worker
processes, the cores shared between the packed cells (`stream_workers`). `PackResult.data_wait` is the
fraction of the pack's step time spent building the cells' batches, when the device waits (the step reads
its losses back, so nothing runs on the device meanwhile).

Numbers: on the CPU a packed cell trains its single run's weights bit for bit (the same code on the same
numbers, tests/train/test_pack.py); on CUDA its captured step is its single captured run's. Resume: each cell
resumes from its own `last/` (Ctrl-C or SIGTERM stops every unfinished cell after its step, each saving `last/`;
a cell that had reached its budget is finished and tested all the same); a pack resumed with other cells beside
it is still each cell's own run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from relreason.config import Config
from relreason.errors import RelreasonError
from relreason.runtime import RunLock
from relreason.train.distributed import available_cores
from relreason.train.seed_group import SeedGroup, claimed_sessions, train_and_test


@dataclass(frozen=True)
class PackResult:
    """What a pack returns: each cell's RunResult (in order), and where its step time went."""

    results: list  # relreason.train.session.RunResult per cell
    data_seconds: float  # building the cells' batches (the device idle)
    step_seconds: float  # the cells' steps, launched and read back

    @property
    def data_wait(self) -> float:
        """The fraction of the step time the device waited for data (0 when nothing was stepped)."""
        total = self.data_seconds + self.step_seconds
        return self.data_seconds / total if total > 0 else 0.0


def stream_workers(cells: int, cores: int) -> int:
    """Generating processes per packed cell: the cores left beside the training process, shared evenly between
    the cells, at least one each (16 cores, 3 cells: 5 each; 8 cells: 1 each)."""
    if cells < 1 or cores < 1:
        raise ValueError(f"cells and cores must be >= 1, got {cells} and {cores}")
    return max(1, (cores - 1) // cells)


def train_pack(members: list[Config], run_dirs: list[Path], resume: list[bool], show_progress: bool = True,
               command: str | None = None, log=None, locks: list[RunLock] | None = None,
               abouts: list | None = None, cores: int | None = None, resume_hint: str = "--resume",
               eval_threads: int | None = None) -> PackResult:
    """Trains the cells `members[k]` (any tasks and models, one device) into `run_dirs[k]`, resuming where
    `resume[k]`, in one process (module docstring); then tests each finished cell's best checkpoint.

    Args:
        locks: the cells' run-directory locks, already held by the caller (`reproduce` claims its cells).
        abouts: each cell's RunAbout for its trackers, as `relreason.train.run`'s `about`.
        cores: the cores the cells' data streams share (default: this process's).
        resume_hint: what continues the pack when it is interrupted (a study's: its command).
        eval_threads: how many cells validate (and test) side by side (default: all on CUDA, one on the CPU;
            relreason.train.seed_group.SeedGroup.side_by_side).

    Raises:
        RelreasonError: no cells, repeated run directories or cells on different devices; a directory that
            exists (without resume); a cell whose step cannot be captured (train.cuda_graph)."""
    if not members or len(members) != len(run_dirs) or len(resume) != len(members):
        raise RelreasonError(f"a pack needs one run directory and resume flag per cell (got {len(members)} cells, "
                             f"{len(run_dirs)} directories, {len(resume)} flags)", "give one of each per cell")
    if len({Path(d).resolve() for d in run_dirs}) != len(run_dirs):
        raise RelreasonError("a pack's cells need distinct run directories", f"got {[str(d) for d in run_dirs]}")
    devices = sorted({c.train.device for c in members})
    if len(devices) > 1:
        raise RelreasonError(f"a pack trains on one device; its cells ask for {', '.join(devices)}",
                             "set the same train.device for every cell")
    workers = stream_workers(len(members), available_cores() if cores is None else cores)
    with claimed_sessions(members, run_dirs, resume, command, log, locks, abouts, "a pack") as (sessions, _dd):
        for s, again in zip(sessions, resume):
            s.wl.stream_workers = workers
            s.open(again)
        group = SeedGroup(sessions, use_vmap=False, label=f"pack of {len(sessions)} cells", resume_hint=resume_hint,
                          eval_threads=eval_threads)
        results = train_and_test(group, show_progress, log or sessions[0].log)
        return PackResult(results, group.data_seconds, group.step_seconds)


__all__ = ["PackResult", "train_pack", "stream_workers"]
