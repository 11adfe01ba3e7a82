"""The training loop: `run(config) -> RunResult`, called by `relreason train`, `ablate` and the tests.

    res = run(build_config("mpnn", "bellman_ford", "quick"), out=Path("runs"), name="demo")

`run` claims the run directory (relreason.train.claim), builds the `Workload` (relreason.train.workloads:
what is trained and how it is scored, so graph tasks, multi-task runs and text models share this loop)
and takes one `Session` (relreason.train.session) through three phases: `open` (the run directory,
resuming), `train` (the step loop, validation every `eval_every_examples` examples with the best
weights kept) and `final_test` (the best checkpoint on the OOD test). A resume's configuration comes
from relreason.train.resume.

Determinism: every random draw of step k comes from generators seeded by (seed, k), and the
checkpoint holds the optimizer and the loop counters, so a run resumed from `last/` ends with the
same weights as one never interrupted (on CPU). A validation record is appended to `metrics.jsonl`
before `last/` moves forward, so a kill never loses a line (resuming drops lines written after the
checkpoint it resumes from, and they are written again).

Ctrl-C and SIGTERM stop the loop at the end of the current step (where weights, optimizer and
counters agree) and save `last/` there; a second Ctrl-C stops at once without saving
(relreason.train.stop_requests).

Several processes (torchrun, relreason.train.distributed): every process calls `run`; each trains
its rows of every global batch with DistributedDataParallel and evaluates its share of validation
and test; rank 0 alone holds the lock and writes (checkpoints, metrics, results, console). The noise
and the loss normalization make N processes train as one with the same global batch (to float
rounding), so a run may resume with another number of processes.

Run directory `runs/<name>/` (its layout and the records of its files: relreason.rundir): `best/` and
`last/` checkpoints, `config.json` (RunRecord: the resolved config), `metrics.jsonl` (a row per
validation, resume and the final test), `results.json` (RunResults: the summary that `runs`, `compare`
and `export` read) and `.lock` (held while a process trains); with
`train.log=tensorboard` also TensorBoard event files, with `wandb` a W&B run whose id is kept in `wandb.json`
(relreason.tracking: training loss and learning rate every step, the validation and test scores; metrics.jsonl
stays the record).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from relreason.config import Config
from relreason.errors import RelreasonError
from relreason.files import check_name
from relreason.models.precision import set_tf32
from relreason.runtime import RunLock, keep_freed_memory
from relreason.tracking import RunAbout, check_trackers
from relreason.train.claim import claim
from relreason.train.distributed import Distributed
from relreason.train.session import RunResult, Session
from relreason.train.workloads import build_workload


def default_run_name(cfg: Config) -> str:
    task = cfg.task.replace(",", "+").replace(":", "-")
    return f"{cfg.model_name}-{task}-s{cfg.train.seed}-{time.strftime('%Y%m%d-%H%M%S')}"


def check_run_name(name: str) -> None:
    if not name or name in (".", "..") or "/" in name or "\\" in name or name.startswith("."):
        raise RelreasonError(f"invalid run name {name!r}", "use a plain name without '/', '..' or a leading '.'")
    check_name(name, "run name")


def run(cfg: Config, out: Path = Path("runs"), name: str | None = None, resume: bool = False,
        show_progress: bool = True, command: str | None = None, log=None, lock: RunLock | None = None,
        about: RunAbout | None = None, resume_hint: str | None = None) -> RunResult:
    """Trains `cfg.model_name` on `cfg.task`; returns where the run is and how it scored.

    Under torchrun every process calls it (see the module docstring). `lock`: the run directory's lock,
    already held by the caller (`ablate` claims a cell before training it); by default `run` takes it.
    `about`: the run's name, group and job type as trackers show them (a cell's; by default the run's name).
    `resume_hint`: what continues the run when it is interrupted (a study's cell: the study's command; by
    default `--name NAME --resume`)."""
    log = log or (lambda msg: print(msg, file=sys.stderr))
    check_trackers(cfg.train.log)  # a missing tracker package fails before anything is claimed
    if name is not None:
        check_run_name(name)
    if resume and name is None:
        raise RelreasonError("--resume needs the run's --name", "e.g. relreason train mpnn bfs --name myrun --resume")
    keep_freed_memory()
    with Distributed.start(cfg.train.device) as dd:
        if not dd.main:
            log, show_progress = _quiet, False
        # the default name holds rank 0's clock
        run_dir = Path(out) / dd.broadcast(default_run_name(cfg) if name is None else name)
        set_tf32(cfg.train.tf32, dd.device)  # before the run directory is claimed: it may refuse
        with claim(run_dir, resume, dd, lock):
            dd.set_threads(cfg.train.threads)
            workload = build_workload(cfg, dd.device)
            session = None
            try:
                if dd.world > 1 and not workload.supports_distributed:
                    raise RelreasonError(f"{cfg.model_name} does not train on several processes yet",
                                         "run it in one process (without torchrun)")
                session = Session(cfg, run_dir, workload, command, log, show_progress, dd)
                session.about = about
                if resume_hint is not None:  # a study's cell: the study's command (default: --name NAME --resume)
                    session.resume_hint = resume_hint
                session.open(resume)
                interrupted = session.train()
                result = session.result(interrupted)
                if not interrupted:
                    session.final_test(result)
                return result
            finally:
                if session is not None:
                    session.tracker.close()
                workload.close()


def _quiet(msg: str) -> None:
    """The log of ranks other than 0: rank 0 speaks for all."""


__all__ = ["RunResult", "run", "default_run_name", "check_run_name"]
