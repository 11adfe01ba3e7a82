"""Minutes of GPU turned into finished cells (scripts/gpu_cells.sh runs it; issue 38): the next unfinished cells
of results/plan.txt trained one at a time, or in packs of --pack-size (relreason.train.pack: each cell its own
run, their captured steps on separate CUDA streams; a pack stalled on the H200, docs/gpu.md) for at most
--minutes, every unfinished cell then parked so that the next GPU run or a CPU lane resumes it, and what the repository commits written as at most 8 files of at most 16 MB under --out.
Needs only PyTorch and the checkout (PYTHONPATH=.), no network.

    PYTHONPATH=. python scripts/gpu_cells.py --out /tmp/gc --minutes 8             # on a CUDA machine
    PYTHONPATH=. python scripts/gpu_cells.py --out /tmp/gc --device cpu --quick    # the CPU smoke test

Files under --out (MAX_FILES at most, each MAX_BYTES at most):
- results.tar (or results.tar.partNN when larger: `cat results.tar.part* | tar x -C results`): what `relreason
  results` writes for the finished cells (cells/, curves/, selection/), progress/ of the unfinished ones and
  parked/<model>~<setting>~<task>~<seed>.tar of each unfinished cell (scripts/park_cells.sh's format); extract
  it into results/ (`tar xf OUT/results.tar -C results`) and delete the parked tars the report lists as finished;
- gpu_cells.json: the report (device, cells trained, finished, parked, the fraction of step time the device
  waited for data, the measurement of --measure, the files); gpu_cells.md: the same for a reader;
- gpu_cells.log: the run's log.

The training runs in a child process that this one watches (`watch`): a child still running --grace seconds after
its --minutes, or one that changed nothing for --stall seconds, is stopped with SIGABRT, which makes faulthandler
write every thread's stack to gpu_cells.log; after a stall the next rung of the --fallback ladder trains the same
cells for the minutes left, and in the end what was left (finished cells, checkpoints of unfinished ones) is
staged and parked as above, the report saying why. `--in-process` trains without the watcher (the tests).

--measure first measures packing (issue 38 item 5): aggregate examples/s and TFLOP/s of K packed cells against
one captured cell, K = 1, 8, 16, 32 at the Triplet-GMPNN protocol and K = 1, 3, 8 at the RT protocol, with
train.tf32 off and on; then the remaining minutes go to the plan.
"""

from __future__ import annotations

import argparse
import dataclasses
import faulthandler
import json
import os
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_FILES = 8  # what one GPU command may hand back
MAX_BYTES = 16 * 1024 * 1024
CAPTURED = {"train.static_step": True, "train.cuda_graph": True}  # incidental keys: the same cells, captured
REPORT, SUMMARY, LOG, RESULTS_TAR = "gpu_cells.json", "gpu_cells.md", "gpu_cells.log", "results.tar"
CELLS_FILE = "gpu_cells_cells.json"  # under the work directory: the cells the training process took on
GRACE_SECONDS = 60.0  # how long past --minutes the training process may run (start-up, the last step, parking)
ABORT_WAIT = 20.0  # seconds a stopped training process has to write its stacks and exit before it is killed
RESEND_SECONDS = 5.0  # the deadline's SIGTERM, repeated until the training has stopped
DUMP_SECONDS = 0.0  # the periodic dumps are off: one (from faulthandler's watchdog thread, reading the frames of a
# running thread) crashed a training process on the H200 (status -11, mid-dump, 2026-11-28)
STALL_SECONDS = 180.0  # a training process that changed nothing under its work directory for this long is stuck
POLL_SECONDS = 5.0  # how often the watcher looks
HEARTBEAT = "heartbeat"  # under the work directory: touched by every line the training process logs
COMMAND_ENV = "RELREASON_GPU_CELLS_COMMAND"  # the watched command, as its training process's report gives it
ATTEMPTS_ENV = "RELREASON_GPU_CELLS_ATTEMPTS"  # the training processes stopped before this one (JSON), for its report
# The --fallback ladder when none is given: after a stalled pack, the known-good path (wave 4's gpu_check: one
# captured cell on the default stream, validations in the training thread), then that uncaptured with one data
# process per cell.
DEFAULT_FALLBACKS = ("--pack-size 1", "--set train.cuda_graph=false --cores 1")
FALLBACK_MIN_SECONDS = 60.0  # a fallback is tried only while this much of --minutes is left


class Log:
    """Lines to stderr and to OUT/gpu_cells.log, flushed (a run killed at its limit keeps what it said)."""

    def __init__(self, path: Path):
        self.file = open(path, "a")

    def __call__(self, message: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {message}"
        print(line, file=sys.stderr, flush=True)
        self.file.write(line + "\n")
        self.file.flush()
        alive()


_heartbeat: list[Path] = []  # the training process's heartbeat file, once its work directory is known


def alive() -> None:
    """A sign of life for the watcher (--stall): touches the heartbeat file under the work directory. Each log line
    gives one, and --measure's steps, which change nothing else there."""
    for path in _heartbeat:
        try:
            path.touch()
        except OSError:  # the work directory is gone (the run is over)
            _heartbeat.clear()


def parked_name(rel: Path) -> str:
    """scripts/park_cells.sh's archive name of a cell: <model>~<setting>~<task>~<seed>.tar."""
    return "~".join(rel.parts) + ".tar"


def study_sets(study, sets: list[str], data_dir: str) -> list[str]:
    """`sets` with where a study's datasets go (an incidental key: the same cells): data.data_dir for a graph
    table's cells; for a text table (its data made in memory), nar.data.data_dir for the NAR cells its TransNAR
    column reads."""
    from relreason.models.catalog import Family, find_model

    if not all(find_model(v.model)[0] is Family.TEXT for v in study.variants):
        return [f"data.data_dir={data_dir}", *sets]
    return ([f"nar.data.data_dir={data_dir}"] if any(v.nar is not None for v in study.variants) else []) + sets


def next_cells(plan: Path, results: Path, work: Path, sets: list[str], log, data_dir: str | None = None) -> list:
    """The plan's cells, in its order, that are neither committed under `results` nor finished under `work`
    (relreason.studies.plan's lines, planned under `work` as the lanes plan theirs under reproduce/). A TransNAR
    cell's NAR cell comes first where it is not finished under `work` (its weights are never committed, so a
    NAR committed by a CPU lane trains again here; `train_packs` trains it in an earlier pack)."""
    from relreason.studies.cells import cell_state, committed_result, plan_cells
    from relreason.studies.plan import read_plan
    from relreason.studies.sweep import parse_models
    from relreason.studies.tables import TABLES
    from relreason.tasks import expand_tasks

    todo, seen = [], set()
    for line in read_plan(plan):
        study = TABLES.get(line.table)
        tasks = expand_tasks(line.tasks if line.tasks is not None else study.tasks)
        mine = study_sets(study, sets, data_dir or str(work / "data"))
        for c in plan_cells(study, tasks, tuple(range(line.seeds)), None, work, mine, parse_models(line.models)):
            if c.directory in seen or committed_result(c, work, results) is not None:
                continue
            seen.add(c.directory)
            state = cell_state(c)
            if state == "stale":
                log(f"skipped {c.directory.relative_to(work / 'cells')}: its directory holds another configuration")
            elif state != "done":
                if c.nar is not None and c.nar.directory not in seen and cell_state(c.nar) != "done":
                    seen.add(c.nar.directory)
                    todo.append(c.nar)
                todo.append(c)
    return todo


def capture_problems(cfg) -> list[str]:
    """Why a cell's step cannot be captured as CUDA graphs, from its config (relreason.train.cuda_graphs'
    check_capturable refuses the same at build time): such a cell trains in the pack uncaptured."""
    from relreason.models.catalog import Family, find_model
    from relreason.models.config import SparseMode

    if find_model(cfg.model_name)[0] is not Family.NAR:
        return ["not a graph (NAR) workload"]  # a text model has no sparse or processor settings to read
    out = []
    if len(cfg.tasks) > 1:
        out.append("not a one-task graph workload")
    if getattr(cfg.processor, "dropout", 0):
        out.append("processor.dropout draws from torch's global generator")
    if cfg.model.sparse is SparseMode.ALWAYS:
        out.append("model.sparse: always")
    return out


def captured(cells: list, log) -> list:
    """The cells with train.static_step and train.cuda_graph set where they can be captured (CAPTURED)."""
    out = []
    for c in cells:
        problems = capture_problems(c.config)
        if problems:
            log(f"{c.directory.name} of {c.task} trains uncaptured: {'; '.join(problems)}")
            out.append(c)
            continue
        cfg = dataclasses.replace(c.config, train=dataclasses.replace(c.config.train, **{
            k.split(".")[1]: v for k, v in CAPTURED.items()}), sources=dict(c.config.sources))
        cfg.deviation = c.config.deviation
        cfg.sources.update({k: "scripts/gpu_cells.py" for k in CAPTURED})
        out.append(dataclasses.replace(c, config=cfg))
    return out


def capture_for(cells: list, device_type: str, sets: list[str], log) -> list:
    """`cells` captured (`captured`) on CUDA, unless --set names a CAPTURED key: the user's choice then stands."""
    mine = [k for k in (x.split("=", 1)[0].strip() for x in sets) if k in CAPTURED]
    if device_type != "cuda":
        return cells
    if mine:
        log(f"the cells are not captured by this script: --set {', '.join(mine)} given")
        return cells
    return captured(cells, log)


def restore_parked(cells: list, results: Path, work: Path, log) -> None:
    """Unpacks each cell's parked archive (results/parked) into `work` where the cell has no run yet."""
    for c in cells:
        rel = c.directory.relative_to(work / "cells")
        archive = results / "parked" / parked_name(rel)
        if archive.is_file() and not c.run_dir.exists():
            with tarfile.open(archive) as tar:
                tar.extractall(work, filter="data")
            log(f"restored parked {rel}")


class Deadline:
    """SIGTERM to this process when the minutes are up, and again every RESEND_SECONDS until cancelled: a pack
    then stops after its step and every cell saves last/ (relreason.train.stop_requests); outside training the
    handler notes it and nothing new starts. The repeats reach a pack whose stop handler was installed after the
    first signal (one signal alone, arriving while a pack was being set up, was noted and the pack then trained on
    to its end)."""

    def __init__(self, seconds: float):
        self.passed = False
        self.at = time.monotonic() + seconds
        self.before = signal.signal(signal.SIGTERM, self._note)
        self._cancelled = threading.Event()
        self.timer = threading.Thread(target=self._signal, args=(max(0.0, seconds),), name="deadline", daemon=True)
        self.timer.start()

    def _signal(self, seconds: float) -> None:
        if self._cancelled.wait(seconds):
            return
        while True:
            os.kill(os.getpid(), signal.SIGTERM)
            if self._cancelled.wait(RESEND_SECONDS):
                return

    def _note(self, signum, frame) -> None:
        self.passed = True

    def left(self) -> float:
        return 0.0 if self.passed else max(0.0, self.at - time.monotonic())

    def cancel(self) -> None:
        self._cancelled.set()
        self.timer.join()
        signal.signal(signal.SIGTERM, self.before)


def train_packs(cells: list, pack_size: int, deadline: Deadline, log, eval_threads: int | None = None,
                failures: list | None = None, cores: int | None = None) -> tuple[dict, list]:
    """Trains `cells` in packs of `pack_size` until they are done or the deadline passes; returns each cell's
    status (relreason.studies.training.train_group's) and the packs' PackResults. A pack that fails is recorded
    in `failures` and tried once more from its cells' checkpoints with its validations one after another
    (eval_threads 1: the older path), and so are the packs after it. A pack of several cells that fails again
    is split: its cells, and every cell after them, train one at a time (the watcher's first --fallback rung,
    taken in this process, since an exception is not a stall and the watcher never sees it); a single cell
    that fails twice is marked failed. The GPU time is not lost to one broken path, and the report says what
    broke."""
    from relreason.studies.cells import cell_label, cell_state
    from relreason.studies.training import train_group

    status, packs = {}, []
    failures = [] if failures is None else failures
    nars = {c.nar.directory for c in cells if c.nar is not None}
    ready, waiting = [c for c in cells if c.directory in nars], [c for c in cells if c.directory not in nars]

    def split(todo: list) -> list:
        return [todo[i:i + pack_size] for i in range(0, len(todo), pack_size)]

    groups = split(ready)  # the NARs first, packed apart
    while groups or waiting:
        if deadline.left() <= 0:
            break
        if not groups:  # the cells whose NAR is trained now (a TransNAR reads its NAR's weights when it starts)
            ready = [c for c in waiting if c.nar is None or cell_state(c.nar) == "done"]
            for c in waiting:
                if c not in ready:
                    status[c.directory] = "not started: its NAR cell did not finish"
            waiting, groups = [], split(ready)
            continue
        group = groups.pop(0)
        log(f"pack of {len(group)}: " + "; ".join(cell_label(c) for c in group))
        for attempt in (1, 2):
            try:
                got = train_group(group, show_progress=False, log=log, command=command(), pack=True, packs=packs,
                                  eval_threads=eval_threads, cores=cores)  # the cells' runs record this command
                break
            except Exception as exc:  # recorded, not hidden: the report lists it and the script exits 1
                traceback.print_exc()
                failures.append({"cells": [cell_label(c) for c in group], "eval_threads": eval_threads,
                                 "pack_size": len(group), "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
                log(f"the pack failed ({failures[-1]['error']})"
                    + ("; again with its validations one after another" if attempt == 1 else "")
                    + ("; then its cells and the rest one at a time" if attempt == 2 and len(group) > 1 else ""))
                got, eval_threads = ["failed"] * len(group), 1
        for c, s in zip(group, got):  # "failed" until trained alone: a deadline before then still parks them
            status[c.directory] = s
        if "failed" in got and len(group) > 1:  # the second failure of a pack: one cell at a time from now on
            pack_size = 1
            groups = split([*group, *(c for g in groups for c in g)])
            continue
        if "interrupted" in status.values():
            break
    return status, packs


def park(cells: list[Path], work: Path, stage: Path, results: Path, log) -> tuple[list[str], list[str]]:
    """Writes stage/parked/<name>.tar for each unfinished cell (its directory relative to work/cells) with a
    checkpoint (its run without the lock, as scripts/park_cells.sh); returns (parked names, names of finished
    cells whose archive under `results`/parked is now obsolete)."""
    from relreason.rundir import RunDir
    from relreason.studies.cells import CELL_RUN

    parked, obsolete = [], []
    for rel in cells:
        run = work / "cells" / rel / CELL_RUN
        files = RunDir(run)
        if files.results.is_file():
            if (results / "parked" / parked_name(rel)).is_file():
                obsolete.append(parked_name(rel))
        elif files.last.trainer_state.is_file():
            (stage / "parked").mkdir(parents=True, exist_ok=True)
            with tarfile.open(stage / "parked" / parked_name(rel), "w") as tar:
                tar.add(run, arcname=str(run.relative_to(work)),
                        filter=lambda info: None if Path(info.name).name == ".lock" else info)
            parked.append(parked_name(rel))
            log(f"parked {rel}")
    return parked, obsolete


def stage_cells(cells: list[Path], again: list[Path], work: Path, stage: Path, results: Path, report: dict,
                log) -> None:
    """Stages what the repository commits of the tried `cells` (directories relative to work/cells): the
    finished cells' results (relreason.studies.results.collect_results), the unfinished ones' progress and
    parked archives; fills report's parked, obsolete_parked and finished. `again`: NAR cells a CPU lane already
    committed, trained again here for their TransNAR cells, whose committed records stay."""
    from relreason.studies.results import collect_results

    if cells:
        collect_results(work, stage)
        for rel in again:
            for kind in ("cells", "curves", "progress", "selection"):
                (stage / kind / f"{rel}.json").unlink(missing_ok=True)
    report["parked"], report["obsolete_parked"] = park(cells, work, stage, results, log)
    report["finished"] = sorted(str(p.relative_to(stage / "cells")) for p in (stage / "cells").rglob("*.json")) \
        if (stage / "cells").is_dir() else []


def write_bundle(stage: Path, out: Path, budget: int) -> list[str]:
    """stage/ as OUT/results.tar, split into parts of MAX_BYTES where larger; at most `budget` files.

    Raises:
        RuntimeError: more than `budget` parts would be needed (the report says so)."""
    from relreason.data.store import atomic_path

    whole = out / (RESULTS_TAR + ".tmp")
    with tarfile.open(whole, "w") as tar:
        for path in sorted(stage.rglob("*")):
            if path.is_file():
                tar.add(path, arcname=str(path.relative_to(stage)))
    size = whole.stat().st_size
    parts = -(-size // MAX_BYTES)
    if parts > budget:
        whole.unlink()
        raise RuntimeError(f"the results are {size / 2**20:.1f} MB: {parts} parts of {MAX_BYTES / 2**20:g} MB, more than the {budget} "
                           "files left; train fewer cells (--pack-size) or shorter (--minutes)")
    if parts <= 1:
        whole.rename(out / RESULTS_TAR)
        return [RESULTS_TAR]
    names = []
    with open(whole, "rb") as f:
        for k in range(parts):
            name = f"{RESULTS_TAR}.part{k:02d}"
            with atomic_path(out / name) as tmp:
                tmp.write_bytes(f.read(MAX_BYTES))
            names.append(name)
    whole.unlink()
    return names


# -- --measure: packed throughput ---------------------------------------------------------------------------------

def protocol_config(table: str, model: str, task: str, sets: list[str]):
    """The protocol cell's config of `table`'s column `model` on `task` (seed 0), planned as `reproduce` plans it."""
    from relreason.studies.cells import plan_cells
    from relreason.studies.tables import TABLES

    with tempfile.TemporaryDirectory() as d:
        return plan_cells(TABLES.get(table), [task], (0,), None, Path(d), sets, [model])[0].config


def packed_throughput(base, ks: list[int], steps: int, warmup: int, tf32: bool, log) -> list[dict]:
    """Examples/s and TFLOP/s of K packed cells of `base` (seeds 0..K-1; relreason.train.pack's step loop, each
    cell's captured step on its own stream where train.cuda_graph) for each K, no validation: `steps` steps timed
    after `warmup`, those that captured a new graph left out. FLOPs from one uncaptured step of one cell
    (torch's FlopCounterMode), times the cells and steps."""
    from torch.utils.flop_counter import FlopCounterMode

    from relreason.train.distributed import available_cores
    from relreason.train.pack import stream_workers
    from relreason.train.seed_group import SeedGroup, claimed_sessions, seed_configs

    rows = []
    for k in ks:
        cfgs = [dataclasses.replace(c, train=dataclasses.replace(c.train, tf32=tf32))
                for c in seed_configs(base, list(range(k)))]
        with tempfile.TemporaryDirectory() as d, \
                claimed_sessions(cfgs, [Path(d) / f"c{i}" for i in range(k)], [False] * k, None, log, None, None,
                                 "a measured pack") as (sessions, dd):
            group = SeedGroup(sessions, use_vmap=False, label=f"measure K={k}", eval_threads=k)
            for s in sessions:
                s.wl.model.train()
                s.wl.stream_workers = stream_workers(k, available_cores())  # as train_pack shares the cores
            one = sessions[0]
            with FlopCounterMode(display=False) as fc:
                part = one.wl.step_batches(0)[0]
                loss, _ = one.wl.loss(one.wl.model, part, 0)
                loss.backward()
            flops = float(fc.get_total_flops())
            one.opt.zero_grad(set_to_none=True)

            timed, data_s, n = 0.0, 0.0, 0
            for i in range(warmup + steps):
                for s in sessions:
                    s.set_rate()
                before = group.graphs
                if dd.device.type == "cuda":
                    torch.cuda.synchronize(dd.device)
                t0 = time.perf_counter()
                parts = group.batches(sessions)
                t1 = time.perf_counter()
                group.step(sessions, parts).tolist()
                t2 = time.perf_counter()
                for s in sessions:
                    s.state["step"] += 1
                alive()
                if i >= warmup and group.graphs == before:
                    timed, data_s, n = timed + (t2 - t0), data_s + (t1 - t0), n + 1
            B = base.train.batch_size
            rows.append({"model": base.model_name, "recipe": base.recipe, "task": base.task, "batch": B, "cells": k,
                         "tf32": tf32, "steps": n, "captured": base.train.cuda_graph,
                         "examples_per_s": k * B * n / timed if timed else None,
                         "tflops_per_s": flops * k * n / timed / 1e12 if timed else None,
                         "data_wait": data_s / timed if timed else None, **validation_rates(group, dd)})
            log(f"measured {base.model_name} K={k} tf32={tf32}: {rows[-1]['examples_per_s']} ex/s")
    for r in rows:  # against one captured cell (K = 1, same precision)
        one = next((x for x in rows if x["cells"] == 1 and x["tf32"] == r["tf32"]), None)
        r["vs_one_cell"] = r["examples_per_s"] / one["examples_per_s"] if one and one["examples_per_s"] and \
            r["examples_per_s"] else None
    return rows


def validation_rates(group, dd) -> dict:
    """Validation examples/s of the group's K cells one after another and side by side (each in its thread and
    on its stream: relreason.train.seed_group.SeedGroup.side_by_side), each timed after one untimed round."""
    sessions = group.sessions
    if len(sessions) < 2:
        return {"val_serial": None, "val_side_by_side": None}
    examples = sum(s.wl.eval_total("val") for s in sessions)  # the splits loaded before the clock
    out, threads = {"val_serial": None, "val_side_by_side": None}, group.eval_threads
    try:
        for name, at_once in (("val_serial", 1), ("val_side_by_side", threads)):
            group.eval_threads = at_once
            for timed in (False, True):
                if dd.device.type == "cuda":
                    torch.cuda.synchronize(dd.device)
                t0 = time.perf_counter()
                group.side_by_side(sessions, lambda s: s.evaluate("val", "validation", draw=0))
                if dd.device.type == "cuda":
                    torch.cuda.synchronize(dd.device)
                if timed:
                    out[name] = examples / (time.perf_counter() - t0)
    except Exception as exc:  # recorded in the row: the step figures beside it stand
        traceback.print_exc()
        out["val_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    finally:
        group.eval_threads = threads
    return out


def measure(device, quick: bool, steps: int, sets: list[str], log) -> list[dict]:
    """Issue 38 item 5: K packed cells at the Triplet-GMPNN and the RT protocols (bellman_ford), TF32 off and
    on at the smallest and largest K. --quick: a tiny MPNN at K = 1, 2 (the CPU smoke test)."""
    if quick:
        base = protocol_config("clrs30", "mpnn", "bfs", sets)
        plans = [(base, [1, 2])]
    else:
        plans = [(protocol_config("ibarz2022", "triplet_gmpnn", "bellman_ford", sets), [1, 8, 16, 32]),
                 (protocol_config("rt-table19", "rt", "bellman_ford", sets), [1, 3, 8])]
    rows = []
    for base, ks in plans:
        if device.type == "cuda" and not capture_problems(base):
            base = dataclasses.replace(base, train=dataclasses.replace(base.train, static_step=True, cuda_graph=True))
        rows += packed_throughput(base, ks, steps, 2 if quick else 10, False, log)
        if device.type == "cuda":
            rows += packed_throughput(base, [ks[0], ks[-1]], steps, 10, True, log)
    return rows


def summary(report: dict) -> str:
    lines = [f"# scripts/gpu_cells.sh on {report['device_name']} ({report['device']}, torch {report['torch']})", "",
             f"`{report['command']}`: {report['seconds']:.0f} s, {len(report['finished'])} cells finished, "
             f"{len(report['parked'])} parked; " + (
                 "the wait for data was not measured." if report["data_wait"] is None else
                 f"the device waited for data {100 * report['data_wait']:.1f}% of the step time."), ""]
    for a in report.get("attempts") or []:
        lines += [f"Stalled first, then followed by the next --fallback: options {a['options']}: {a['stopped']}", ""]
    if report.get("error"):
        lines += [f"**Error:** {report['error']}", ""]
    if report.get("measure"):
        lines += ["Packed cells (relreason.train.pack; training steps, then one validation of every cell: one "
                  "after another and side by side, validation examples/s):", "",
                  "| model | recipe | batch | cells K | TF32 | captured | examples/s | vs one cell | TFLOP/s | data wait "
                  "| validation, one after another | validation, side by side |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in report["measure"] if isinstance(report["measure"], list) else []:
            lines.append(f"| {r['model']} | {r['recipe']} | {r['batch']} | {r['cells']} | {r['tf32']} | {r['captured']} | "
                         f"{_num(r['examples_per_s'], 1)} | {_num(r['vs_one_cell'], 2)} | {_num(r['tflops_per_s'], 3, 'g')} | "
                         f"{_num(r['data_wait'], 3)} | {_num(r.get('val_serial'), 1)} | "
                         f"{_num(r.get('val_side_by_side'), 1)} |")
        lines.append("")
    for f in report.get("failures") or []:
        lines += [f"A pack failed ({f['pack_size']} cells, eval_threads {f['eval_threads']}): "
                  f"{f['error']}; cells: {', '.join(f['cells'])}", ""]
    lines += ["| cell | status |", "|---|---|"] + [f"| {k} | {v} |" for k, v in report["cells"].items()]
    if report["obsolete_parked"]:
        lines += ["", "Finished since they were parked (delete from results/parked): "
                  + ", ".join(report["obsolete_parked"])]
    return "\n".join(lines) + "\n"


def _num(x, digits: int, kind: str = "f") -> str:
    return "-" if x is None else f"{x:.{digits}{kind}}"


def write_json(path: Path, data) -> None:
    from relreason.data.store import atomic_path

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(data, indent=1, default=str))


def write_report(out: Path, report: dict) -> None:
    """OUT/gpu_cells.md, then OUT/gpu_cells.json, atomically and last: the watcher reads a report that exists as the
    run's whole account."""
    (out / SUMMARY).write_text(summary(report))
    write_json(out / REPORT, report)


def command() -> str:
    """The command the report names: the one the user ran (the watcher's), not its training process's."""
    return os.environ.get(COMMAND_ENV) or " ".join(sys.argv)


def child_command(argv: list[str]) -> list[str]:
    """The training process's command line: this script, in this interpreter, with `argv`."""
    return [sys.executable, str(Path(__file__).resolve()), *argv]


def checkout_env() -> dict:
    """This process's environment with the checkout first on PYTHONPATH: a child process's (the training, a probe)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def abort(proc: subprocess.Popen) -> None:
    """Stops a stuck child with SIGABRT (faulthandler, enabled there, writes its threads' stacks), killing it
    where it has not exited within ABORT_WAIT."""
    proc.send_signal(signal.SIGABRT)
    try:
        proc.wait(timeout=ABORT_WAIT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def last_change(work: Path) -> float:
    """The latest modification time of anything under `work` (0 when it does not exist yet)."""
    latest = 0.0
    for root, dirs, files in os.walk(work):
        for name in [*dirs, *files]:
            try:
                latest = max(latest, os.stat(os.path.join(root, name), follow_symlinks=False).st_mtime)
            except OSError:  # removed while we looked
                pass
    return latest


def fallbacks(args) -> list[list[str]]:
    """The ladder of --fallback arguments (each a string of this script's options, appended to the command for the
    next training process: the last of an option wins, --set adds); DEFAULT_FALLBACKS when none is given, none after
    `--fallback none`."""
    given = DEFAULT_FALLBACKS if args.fallback is None else args.fallback
    return [shlex.split(f) for f in given if f.strip().lower() != "none"]


def same_options(argv: list[str], extra: list[str], rung: list[str]) -> bool:
    """Whether the fallback `rung` changes nothing in the command `argv` + `extra` (it would only train the stalled
    configuration again)."""
    return parser().parse_args([*argv, *extra]) == parser().parse_args([*argv, *extra, *rung])


def watch(args, argv: list[str], out: Path) -> int:
    """Trains in a child process (`--in-process`) and waits --minutes + --grace for it; this process touches the
    device only after its child is gone, when a salvage tests a finished cell's checkpoints that the child had not
    yet staged (relreason.studies.results' model selection: 33 s for one Triplet-GMPNN cell on the H200). A child
    still running then, or one that changed nothing under its work directory (its cells' validations and checkpoints, its data, its log lines' heartbeat) for --stall seconds, is stuck where
    its own deadline cannot reach it: the first GPU run (2026-11-28, an H200) printed nothing after its first
    pack started, its deadline's signal never handled, as when a device call holds the interpreter's lock. It
    gets SIGABRT, on which faulthandler writes every thread's stack to the log. A stalled child is followed by the
    next rung of the --fallback ladder (another child, the same work directory and cells, resuming their
    checkpoints, for the minutes left) while FALLBACK_MIN_SECONDS remain; otherwise this process parks what the
    child left (the checkpoints of its unfinished cells, the results of those it finished) and writes the report,
    so that the minutes leave a diagnosis and whatever was trained. Returns the child's exit status, or 1 when it
    had to be stopped or wrote no report."""
    log = Log(out / LOG)
    tmp = None if args.work else tempfile.mkdtemp(prefix="gpu_cells.")
    work = Path(args.work) if args.work else Path(tmp) / "work"
    limit = args.minutes * 60 + args.grace
    t0 = time.time()
    env = {**checkout_env(), COMMAND_ENV: command()}
    ladder, extra, attempts = fallbacks(args), [], []
    proc = None
    forward = {s: signal.signal(s, lambda signum, frame: proc and proc.send_signal(signum))
               for s in (signal.SIGTERM, signal.SIGINT)}  # a stop asked of this command is the child's to do
    try:
        while True:
            minutes = args.minutes - (time.time() - t0) / 60  # the rest of the command's minutes
            env[ATTEMPTS_ENV] = json.dumps(attempts)
            started = time.time()
            again = [a for a in argv if a != "--measure"] if attempts else argv  # measured once
            proc = subprocess.Popen(child_command([*again, *extra, "--minutes", f"{minutes:.4f}", "--in-process",
                                                   "--work", str(work)]), env=env)
            code, why, stalled = None, None, False
            while code is None and why is None:
                try:
                    code = proc.wait(timeout=POLL_SECONDS)
                    why = f"the training process exited with status {code} without writing its report"
                except subprocess.TimeoutExpired:
                    now = time.time()
                    quiet = now - max(started, last_change(work))
                    if now - t0 > limit:
                        why = (f"the training process was stopped {now - t0:.0f} s after the command started: it "
                               f"outran --minutes {args.minutes:g} + --grace {args.grace:g}")
                    elif args.stall and quiet > args.stall:
                        why = (f"the training process was stopped {now - t0:.0f} s after the command started: it "
                               f"had changed nothing under its work directory and logged nothing for {quiet:.0f} s "
                               f"(--stall {args.stall:g})")
                        stalled = True
            if code is None:
                why += f" (its threads' stacks are in {LOG})"
                log(f"{why}: stopping it with SIGABRT; its threads' stacks follow (faulthandler)")
                abort(proc)
            if code is not None and ((out / REPORT).is_file() or not (work / CELLS_FILE).is_file()):
                # its report, or it stopped before it took on any cell (its error says why)
                return code if (out / REPORT).is_file() else code or 1
            left = args.minutes * 60 - (time.time() - t0)
            while ladder and same_options(argv, extra, ladder[0]):  # a rung already in effect
                ladder.pop(0)
            if stalled and ladder and left >= FALLBACK_MIN_SECONDS:
                attempts.append({"options": " ".join(map(shlex.quote, extra)) or "(as given)", "stopped": why})
                extra = [*extra, *ladder.pop(0)]
                for stale in out.glob(RESULTS_TAR + "*"):  # what the stopped process may have begun to write
                    stale.unlink()
                log(f"continuing with the next --fallback for the {left / 60:.1f} minutes left: "
                    f"{' '.join(map(shlex.quote, extra))} (the same cells, from their checkpoints)")
                continue
            log(f"Error: {why}; parking what it left")
            salvage(args, work, out, why, time.time() - t0, log, attempts)
            return 1
    finally:
        for s, before in forward.items():
            signal.signal(s, before)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def salvage(args, work: Path, out: Path, why: str, seconds: float, log, attempts: list | None = None) -> None:
    """The report and results of a training process that ended without its own: every cell it took on
    (work/CELLS_FILE) staged as the process would have (finished ones collected, unfinished ones with a
    checkpoint parked), each marked with `why`."""
    import torch  # no device call: only its version, for the report

    listed = json.loads((work / CELLS_FILE).read_text()) if (work / CELLS_FILE).is_file() else {}
    cells = [Path(c) for c in listed.get("cells", [])]
    tried = [c for c in cells if (work / "cells" / c).is_dir()]
    report: dict = {"device": args.device, "torch": torch.__version__, "command": command(),
                    "device_name": "not reported (the training process ended first)", "minutes": args.minutes,
                    "pack_size": args.pack_size, "error": why, "failures": [],
                    "cells": {str(c): f"stopped: {why}" for c in tried}, "data_wait": None,
                    "attempts": attempts or []}
    with tempfile.TemporaryDirectory() as tmp:
        stage = Path(tmp)
        try:
            stage_cells(tried, [Path(c) for c in listed.get("again", [])], work, stage, Path(args.results), report,
                        log)
            for c in tried:  # finished before the process stopped
                if f"{c}.json" in report["finished"]:
                    report["cells"][str(c)] = "trained"
            for stale in out.glob(RESULTS_TAR + "*"):  # what the stopped process may have begun to write
                stale.unlink()
            report["files"] = write_bundle(stage, out, MAX_FILES - 3)
        except Exception as exc:  # the report is still written: what could not be saved, and why
            traceback.print_exc()
            report.setdefault("parked", []), report.setdefault("obsolete_parked", []), report.setdefault("finished", [])
            report["files"], report["error"] = [], f"{why}; then saving its cells failed: {type(exc).__name__}: {exc}"
    report["seconds"] = seconds
    report["files"] += [REPORT, SUMMARY, LOG]
    write_report(out, report)
    log(f"salvaged: {len(report['finished'])} finished, {len(report['parked'])} parked; files under {out}: "
        f"{', '.join(report['files'])}")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--minutes", type=float, default=8.0,
                   help="training time (default 8: a 10-minute command with its start, parking and files)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--plan", default=str(ROOT / "results" / "plan.txt"))
    p.add_argument("--results", default=str(ROOT / "results"), help="the committed results (cells, parked)")
    p.add_argument("--work", default=None, help="where the cells train (default: a temporary directory)")
    p.add_argument("--data-dir", default=None, help="the cells' datasets (default: generated under the work directory)")
    p.add_argument("--pack-size", type=int, default=1,
                   help="cells per pack (default 1: on an H200 a pack of 3 captured cells stalled in a step's "
                        "read-back, 2026-11-28, docs/gpu.md; one cell at a time trained)")
    p.add_argument("--eval-threads", type=int, default=None,
                   help="cells of a pack that validate side by side (default: all on CUDA; 1: one after another)")
    p.add_argument("--cores", type=int, default=None,
                   help="the cores a pack's data streams share (default: this process's; 1: one generating process "
                        "per cell)")
    p.add_argument("--measure", action="store_true", help="measure packing first (issue 38 item 5)")
    p.add_argument("--steps", type=int, default=50, help="steps timed per K by --measure")
    p.add_argument("--quick", action="store_true", help="tiny measurement (the CPU smoke test)")
    p.add_argument("--set", action="append", default=[], help="config override for every cell (--set k=v)")
    p.add_argument("--grace", type=float, default=GRACE_SECONDS,
                   help="seconds the training process may run past --minutes before it is stopped (its threads' "
                        f"stacks written to the log) and what it left is parked (default {GRACE_SECONDS:g})")
    p.add_argument("--dump-every", type=float, default=DUMP_SECONDS,
                   help=f"seconds between the training process's dumps of its threads' stacks to the log, written "
                        f"by a thread that needs no interpreter lock: where a run spent its time, even stuck "
                        f"(default {DUMP_SECONDS:g}; 0: none)")
    p.add_argument("--stall", type=float, default=STALL_SECONDS,
                   help="seconds without a change under the training process's work directory (validations, "
                        "checkpoints, data, log lines) after which it is stopped as stuck, its stacks logged and its "
                        f"cells parked: the rest of the device time stays unspent (default {STALL_SECONDS:g}; 0: none)")
    p.add_argument("--fallback", action="append", default=None,
                   help="options for the training process that follows a stalled one (--stall), on the same cells "
                        "from their checkpoints for the minutes left; repeat for a ladder (default: "
                        + "; then ".join(repr(f) for f in DEFAULT_FALLBACKS) + "; 'none': stop at a stall)")
    p.add_argument("--in-process", action="store_true",
                   help="train in this process, without the watching process (the tests; the watcher's own child)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.minutes <= 0 or args.pack_size < 1 or (args.eval_threads is not None and args.eval_threads < 1) \
            or args.grace <= 0 or args.dump_every < 0 or args.stall < 0 or (args.cores is not None and args.cores < 1):
        print(f"Error: --minutes and --grace must be positive, --dump-every and --stall not negative, --pack-size, "
              f"--eval-threads and --cores at least 1 (got {args.minutes}, {args.grace}, {args.dump_every}, "
              f"{args.stall}, {args.pack_size}, {args.eval_threads}, {args.cores})", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if any(p.name != LOG for p in out.iterdir()) or (not args.in_process and (out / LOG).exists()):
        print(f"Error: {out} is not empty\nHint: give an empty or new directory", file=sys.stderr)
        return 2
    if not args.in_process:
        given = list(sys.argv[1:] if argv is None else argv)
        for rung in fallbacks(args):  # a rung that does not parse fails now, not after a stall
            try:
                parser().parse_args([*given, *rung])
            except SystemExit:
                print(f"Error: --fallback {shlex.join(rung)!r} is not options of this script\nHint: e.g. --fallback "
                      f"'--pack-size 1' (see --help)", file=sys.stderr)
                return 2
        return watch(args, given, out)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a SIGABRT from the watcher: stacks, not a GPU process's core
    import torch  # after the cheap checks: a mistyped command fails at once

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("Error: --device cuda but torch sees no CUDA device\nHint: --device cpu runs the smoke test",
              file=sys.stderr)
        return 1
    log = Log(out / LOG)
    faulthandler.enable(log.file, all_threads=True)  # a fatal signal (the watcher's SIGABRT) writes every stack
    if args.dump_every:
        faulthandler.dump_traceback_later(args.dump_every, repeat=True, file=log.file)
    t0 = time.time()
    deadline = Deadline(args.minutes * 60)
    sets = [f"train.device={device.type}"] + list(args.set)
    report: dict = {"device": str(device), "torch": torch.__version__, "command": command(),
                    "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                    "minutes": args.minutes, "pack_size": args.pack_size, "cores": args.cores, "sets": sets,
                    "attempts": json.loads(os.environ.get(ATTEMPTS_ENV) or "[]")}
    results, failed = Path(args.results), False
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work) if args.work else Path(tmp) / "work"
        work.mkdir(parents=True, exist_ok=True)
        _heartbeat[:] = [work / HEARTBEAT]
        stage = Path(tmp) / "stage"
        stage.mkdir()
        data_dir = args.data_dir or str(work / "data")  # incidental: the same cells (study_sets)
        if args.measure:
            try:
                report["measure"] = measure(device, args.quick, args.steps, [f"data.data_dir={data_dir}", *sets], log)
            except Exception as exc:  # recorded, not hidden; the plan's cells still train
                traceback.print_exc()
                report["measure"] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
                failed = True
        cells = next_cells(Path(args.plan), results, work, sets, log, data_dir)
        cells = capture_for(cells, device.type, args.set, log)
        log(f"{len(cells)} unfinished cells in {args.plan}; {deadline.left() / 60:.1f} minutes left")
        restore_parked(cells, results, work, log)
        from relreason.studies.cells import committed_result

        again = [c.directory.relative_to(work / "cells") for c in cells
                 if committed_result(c, work, results) is not None]  # only NAR cells can be both committed and here
        write_json(work / CELLS_FILE, {"cells": [str(c.directory.relative_to(work / "cells")) for c in cells],
                                       "again": [str(r) for r in again]})  # what the watcher salvages after a hang
        report["failures"] = []
        status, packs = train_packs(cells, args.pack_size, deadline, log, args.eval_threads, report["failures"],
                                    args.cores)
        failed = failed or bool(report["failures"])
        deadline.cancel()
        faulthandler.cancel_dump_traceback_later()
        tried = [c for c in cells if c.directory in status]
        tried_rel = [c.directory.relative_to(work / "cells") for c in tried]
        stage_cells(tried_rel, again, work, stage, results, report, log)
        report["cells"] = {str(c.directory.relative_to(work / "cells")): status[c.directory] for c in tried}
        data = sum(x.data_seconds for x in packs)
        step = sum(x.step_seconds for x in packs)
        report["data_wait"] = data / (data + step) if data + step else None
        report["data_seconds"], report["step_seconds"] = round(data, 2), round(step, 2)
        try:
            report["files"] = write_bundle(stage, out, MAX_FILES - 3)
        except RuntimeError as exc:
            report["files"], report["error"], failed = [], str(exc), True
            log(f"Error: {exc}")
    report["seconds"] = time.time() - t0
    report["files"] += [REPORT, SUMMARY, LOG]
    write_report(out, report)
    log(f"done in {report['seconds']:.0f} s: {len(report['finished'])} finished, {len(report['parked'])} parked; "
        f"files under {out}: {', '.join(report['files'])}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
