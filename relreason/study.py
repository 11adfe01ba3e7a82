"""Studies: published tables and ablations as grids of cells (column x task x seed), one machinery.

A study is a set of columns (`Variant`: a model, the recipe that is its protocol, and a config
delta), the tasks it runs on and, where a paper printed them, the published figures per column and
task (`Published`: mean, std, seed count). `relreason ablate NAME` and `relreason reproduce TABLE`
both call `run_study`, which

- plans every cell's resolved config before anything trains (a bad key fails at once),
- marks each cell comparable with the paper or not (a recipe other than the column's protocol, a
  `--set` that changes the protocol, a column or task the study declares as not the paper's
  protocol): a cell that is not comparable is printed, marked, and never enters a verdict,
- trains the cells without results (here, in `--jobs` worker processes, or the shard `--shard I/K`
  of them), resuming partial ones, refusing cells computed under another configuration,
- and reads every finished cell back into one result format (`collect`).

`study_table` is the one table printer: per task and column, ours as mean ± sample std (ddof 1) with
its seed count, the published figure with its own, the difference, and whether the published mean
lies inside our 95% interval.

Cell directories: an ablation keeps `OUT/<ablation>/<variant>/<task>/seed<k>/run`; a published table
keys cells by what they compute, `OUT/cells/<model>/<recipe>[+<delta>]/<task>/seed<k>/run`, so the tables
that share a configuration (the RT of Tables 13 to 19) share its cells.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from relreason.config import Config, build_config, keys_of, parse_overrides, to_plain
from relreason.errors import RelreasonError
from relreason.eval.stats import STD_KIND, Summary
from relreason.protocol import run_identity
from relreason.rundir import CELL_RUN, RunDir, read_results, seed_dir
from relreason.tasks import expand_tasks


@dataclass(frozen=True)
class Variant:
    """One column of a study."""

    label: str
    model: str  # model name
    delta: dict = field(default_factory=dict)  # config tree {section: {key: value}} applied over the recipe
    recipe: str | None = None  # the column's protocol; None: the model's paper recipe for each task
    caveat: str = ""  # non-empty: this column is knowingly not the paper's protocol (printed, never compared)


@dataclass(frozen=True)
class Published:
    """A published figure: mean (in percent, or the paper's unit), its std and seed count where printed."""

    mean: float
    std: float | None = None
    seeds: int | None = None

    def text(self) -> str:
        s = f"{self.mean:.2f}" + (f" ± {self.std:.2f}" if self.std is not None else "")
        return s + (f" ({self.seeds} seeds)" if self.seeds else "")


@dataclass(frozen=True)
class Study:
    name: str
    description: str
    variants: tuple[Variant, ...]  # the first is the reference the others are compared with
    tasks: str = "core8"  # the default task list (a group or comma list)
    source: str = ""  # where the published figures are printed
    figures: Mapping[tuple[str, str], Published] = field(default_factory=dict)  # (variant, task) -> figure
    averages: Mapping[str, Published] = field(default_factory=dict)  # variant -> published average
    paper_scope: str = ""  # what `averages` average over
    not_comparable: Mapping[str, str] = field(default_factory=dict)  # task -> why no cell of it compares
    note: str = ""  # printed under the table (e.g. how the published ± is defined)
    layout: str = "study"  # "study": OUT/<name>/<variant>/...; "protocol": OUT/cells/<model>/<recipe>[+delta]/...

    @property
    def varied_keys(self) -> set[str]:
        """The config keys some variant sets (`--set` may not override them)."""
        return set().union(*(keys_of(v.delta) for v in self.variants))

    def paper_line(self) -> str:
        """The published averages in one line ("" when the paper printed none)."""
        if not self.averages:
            return ""
        parts = ", ".join(f"{v} {p.mean:.2f}" for v, p in self.averages.items())
        return f"paper ({self.source}), {self.paper_scope}: {parts}"


# -- cells ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Cell:
    variant: Variant
    task: str
    seed: int
    directory: Path  # the cell; the run itself is directory / "run"
    config: Config
    why_not: str = ""  # non-empty: the cell is not the paper's protocol, and why

    @property
    def run_dir(self) -> Path:
        return self.directory / CELL_RUN

    @property
    def comparable(self) -> bool:
        return not self.why_not


def delta_slug(delta: dict) -> str:
    """{"processor": {"layers": 1}} -> "processor.layers=1" (sorted; the directory name of a delta)."""
    flat = sorted(f"{s}.{k}={json.dumps(v, sort_keys=True)}" for s, vals in delta.items() for k, v in vals.items())
    return ",".join(x.replace('"', "").replace("/", "_").replace(" ", "") for x in flat)


def cell_dir(out: Path, study: Study, variant: Variant, task: str, seed: int, recipe_label: str) -> Path:
    if study.layout == "protocol":
        setting = recipe_label + (f"+{delta_slug(variant.delta)}" if variant.delta else "")
        return Path(out) / "cells" / variant.model / setting / task / seed_dir(seed)
    return Path(out) / study.name / variant.label.replace(" ", "_") / task / seed_dir(seed)


def result_identity(plain: dict) -> dict:
    """A stored config (Config.to_dict()) without the keys that do not change what a run computes
    (relreason.protocol.run_identity: device, threads, kernels..., but the seed stays): two runs with the same
    identity are the same cell, whichever machine and thread count computed them.

    The stored config is first resolved again by today's code, so a key added since the run was
    stored counts with its default (options are added with the default that keeps what ran before);
    a stored config today's code refuses is kept as it is (and so never equals a planned cell)."""
    from relreason.config import config_from_dict

    try:
        plain = config_from_dict(plain).to_dict()
    except (RelreasonError, KeyError, TypeError):
        pass
    return run_identity(plain)


def _differences(a: dict, b: dict) -> list[str]:
    """The "section.key" names whose values differ between two config dicts (sections one level deep)."""
    out = []
    for section in sorted(set(a) | set(b)):
        x, y = a.get(section), b.get(section)
        if isinstance(x, dict) and isinstance(y, dict):
            out += [f"{section}.{k}" for k in sorted(set(x) | set(y)) if x.get(k) != y.get(k)]
        elif x != y:
            out.append(section)
    return out


def plan_cells(study: Study, tasks: list[str], seeds: int, recipe: str | None = None, out: Path = Path("ablations"),
               sets: list[str] | None = None, models: list[str] | None = None) -> list[Cell]:
    """Every cell's resolved config, built before anything trains (a bad key fails at once).

    `recipe` replaces every column's protocol recipe (the cells are then not comparable unless it
    resolves to the protocol's own recipe name); `models` keeps the columns of those models."""
    if seeds < 1:
        raise RelreasonError(f"--seeds {seeds} must be at least 1", "e.g. --seeds 3")
    variants = list(study.variants)
    if models is not None:
        known = {v.model for v in variants}
        unknown = [m for m in models if m not in known]
        if unknown:
            raise RelreasonError(f"--models {','.join(unknown)}: not a column of {study.name}",
                                 f"its models: {', '.join(dict.fromkeys(v.model for v in variants))}")
        variants = [v for v in variants if v.model in models]
    user = parse_overrides(list(sets or []))
    clash = sorted((keys_of(user) | ({"train.seed"} if "seed" in user.get("train", {}) else set())) &
                   (study.varied_keys | {"train.seed"}))
    if clash:
        raise RelreasonError(f"--set {', '.join(clash)}: {study.name} sets {'it' if len(clash) == 1 else 'them'} "
                             "itself (the variants' keys and the seed of each cell)",
                             "drop that --set (use --seeds for seeds)")
    cells = []
    for task in tasks:
        for v in variants:
            # the column's protocol: its recipe and delta, nothing else (compared value by value, so a recipe
            # file or a --set that resolves to the protocol's values is the protocol; machine keys never count)
            protocol = build_config(v.model, task, v.recipe, {}, ablation=(study.name, v.delta))
            want = result_identity(protocol.to_dict())
            for seed in range(seeds):
                over = {s: dict(vals) for s, vals in user.items()}
                over.setdefault("train", {})["seed"] = seed
                cfg = build_config(v.model, task, recipe if recipe is not None else v.recipe, over,
                                   ablation=(study.name, v.delta))
                why = [v.caveat] if v.caveat else []
                got = result_identity(cfg.to_dict())
                want["train"]["seed"] = seed
                if cfg.recipe != protocol.recipe:
                    why.append(f"recipe {cfg.recipe}, not the protocol's {protocol.recipe}")
                elif got != want:
                    keys = _differences(got, want)
                    why.append(f"{', '.join(keys[:4])}{', ...' if len(keys) > 4 else ''} "
                               f"differ{'s' * (len(keys) == 1)} from the protocol ({protocol.recipe})")
                if task in study.not_comparable:
                    why.append(study.not_comparable[task])
                cells.append(Cell(v, task, seed, cell_dir(out, study, v, task, seed, cfg.recipe), cfg, "; ".join(why)))
    return cells


def cell_state(cell: Cell) -> str:
    """"done" (results under the same config), "stale" (results or a checkpoint under another config),
    "partial" (a checkpoint to resume under the same config) or "new". Configs are compared by
    `result_identity`: a cell computed with other threads or on another device is the same cell."""
    from relreason.train.loop import has_progress, stored_config

    want = result_identity(cell.config.to_dict())
    files = RunDir(cell.run_dir)
    if files.results.is_file():
        try:
            data = read_results(files.results)
        except RelreasonError:
            return "stale"
        return "done" if result_identity(data.config) == want else "stale"
    if files.last.trainer_state.exists():
        try:
            return "partial" if result_identity(stored_config(cell.run_dir).to_dict()) == want else "stale"
        except RelreasonError:
            return "stale"
    return "stale" if has_progress(cell.run_dir) else "new"


def shard_cells(cells: list[Cell], shard: tuple[int, int] | None) -> list[Cell]:
    """The cells of shard (i, k), i in 1..k: every k-th cell starting at the i-th (index % k == i - 1)."""
    if shard is None:
        return list(cells)
    i, k = shard
    if k < 1 or not 1 <= i <= k:
        raise RelreasonError(f"--shard {i}/{k}: the shard number must be in 1..{k}",
                             "e.g. --shard 1/4 ... --shard 4/4 (a SLURM array: --array=1-4 and "
                             "--shard $SLURM_ARRAY_TASK_ID/4)")
    return [c for j, c in enumerate(cells) if j % k == i - 1]


def cell_label(c: Cell) -> str:
    return f"{c.variant.label} / {c.task} / seed {c.seed}"


def _held(c: Cell) -> bool:
    from relreason.runtime import lock_holder

    return lock_holder(c.run_dir) is not None


def train_cell(cell: Cell, show_progress: bool = False, log: Callable[[str], None] = print) -> str:
    """Claims a cell with its run lock and trains it (resuming a checkpoint under the same config).
    Returns "trained", "interrupted", "held" (another process trains it: left alone), "done" (another
    process finished it meanwhile) or "stale" (its directory holds another configuration's run)."""
    from relreason.runtime import RunLock
    from relreason.train import run
    from relreason.train.loop import resume_config

    lock = RunLock(cell.run_dir)
    try:
        lock.acquire()
    except RelreasonError:
        if _held(cell):
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
        res = run(cfg, out=cell.directory, name=CELL_RUN, resume=state == "partial", show_progress=show_progress,
                  log=log, lock=lock)
        return "interrupted" if res.interrupted else "trained"
    finally:
        lock.release()


def run_cells(study: Study, todo: list[Cell], total: int, jobs: int, show_progress: bool,
              log: Callable[[str], None]) -> None:
    if jobs == 1:
        _train_here(study.name, todo, total, show_progress, log)
    else:
        _train_in_workers(study.name, todo, total, jobs, show_progress, log)


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


# -- one result format ---------------------------------------------------------------------------

def cell_record(c: Cell) -> dict:
    """A finished cell as the study's result files hold it: what ran, how it scored, on what hardware
    and how long, and whether it is comparable with the paper."""
    data = read_results(c.run_dir)
    return {"variant": c.variant.label, "model": c.variant.model, "task": c.task, "seed": c.seed,
            "score": data.test.score, "best_val": data.best_val, "examples": data.examples,
            "recipe": data.recipe, "comparable": c.comparable, "why_not": c.why_not,
            "seconds": data.seconds, "hardware": data.hardware or [],
            "processes": 1 if data.processes is None else data.processes, "command": data.command,
            "relreason": data.relreason, "run": str(c.run_dir), "per_task": data.per_task, "config": data.config}


def collect(study: Study, cells: list[Cell]) -> tuple[list[dict], list[str]]:
    """(records of the finished cells, labels of the missing ones), over the whole sweep."""
    records, missing = [], []
    for c in cells:
        if cell_state(c) != "done":
            missing.append(cell_label(c))
            continue
        records.append(cell_record(c))
    return records, missing


def run_study(study: Study, tasks: list[str], seeds: int, recipe: str | None = None, out: Path = Path("ablations"),
              sets: list[str] | None = None, show_progress: bool = True, log: Callable[[str], None] = print,
              rerun_stale: bool = False, jobs: int = 1, shard: tuple[int, int] | None = None,
              models: list[str] | None = None, train: bool = True) -> dict:
    """Trains the cells that have no results yet (unless `train` is False) and reads back every
    finished one; returns the study's result: {"study", "description", "variants", "tasks", "seeds",
    "cells" (records of the finished ones), "missing", "planned", "figures", "paper_line", ...}.

    `jobs`: cells train in that many worker processes (torch threads divided between them unless
    train.threads is set). `shard` (i, k): this call trains only the cells j with j % k == i - 1 (i is
    1-based), so k machines (a SLURM array) can share one sweep directory. Either way a cell is claimed
    with its run lock; a cell whose lock another process holds is being trained there and is skipped."""
    if jobs < 1:
        raise RelreasonError(f"--jobs {jobs} must be at least 1", "e.g. --jobs 2")
    cells = plan_cells(study, tasks, seeds, recipe, out, sets, models)
    if train:
        mine = shard_cells(cells, shard)
        states = {c.directory: cell_state(c) for c in mine}
        stale = [c for c in mine if states[c.directory] == "stale" and not _held(c)]
        if stale and not rerun_stale:
            raise RelreasonError(f"{len(stale)} cell(s) were computed under another configuration "
                                 f"(e.g. {stale[0].run_dir}); their results would mix budgets or settings",
                                 "pass --rerun-stale to move them aside (as run.stale-<time>) and train them again")
        for c in stale:
            c.run_dir.rename(c.directory / f"run.stale-{time.strftime('%Y%m%d-%H%M%S')}-{c.seed}")
            states[c.directory] = "new"
        todo = [c for c in mine if states[c.directory] not in ("done", "stale")]
        run_cells(study, todo, len(mine), jobs, show_progress, log)
    records, missing = collect(study, cells)
    whole = set(tasks) == set(expand_tasks(study.tasks))
    first = cells[0].config
    variants = list(dict.fromkeys(c.variant.label for c in cells))
    return {"study": study.name, "ablation": study.name, "description": study.description, "variants": variants,
            "tasks": tasks, "seeds": seeds, "cells": records, "missing": missing, "planned": len(cells),
            "recipe": first.recipe, "train_examples": first.train.train_examples,
            "not_comparable": sorted({c.why_not for c in cells if c.why_not}),
            "figures": [{"variant": v, "task": t, **to_plain(p)} for (v, t), p in study.figures.items()
                        if v in variants and t in tasks],
            # the published averages are over the study's own tasks: beside ours only when we ran those
            "averages": [{"variant": v, **to_plain(p)} for v, p in study.averages.items() if v in variants and whole],
            "paper": [{"variant": v, "value": p.mean, "source": study.source} for v, p in study.averages.items()
                      if v in variants and whole],
            "paper_line": study.paper_line(), "paper_scope": study.paper_scope, "source": study.source,
            "note": study.note, "std": STD_KIND, "lower_is_better": _lower_is_better(tasks)}


def _lower_is_better(tasks: list[str]) -> bool:
    from relreason.tasks import TASKS

    return TASKS.get(tasks[0]).lower_is_better


# -- one table printer ---------------------------------------------------------------------------

def _published(result: dict) -> tuple[dict, dict]:
    figures = {(f["variant"], f["task"]): Published(f["mean"], f.get("std"), f.get("seeds"))
               for f in result.get("figures", [])}
    averages = {a["variant"]: Published(a["mean"], a.get("std"), a.get("seeds")) for a in result.get("averages", [])}
    if not averages:  # results written before averages had their own list
        averages = {p["variant"]: Published(p["value"]) for p in result.get("paper", [])}
    return figures, averages


def _verdict(ours: Summary, paper: Published | None, comparable: bool, why_not: str) -> tuple[str, str]:
    """(difference, "in our 95% CI?") of one cell."""
    if not ours.n:
        return "-", "-"
    if not comparable:
        return "-", f"not comparable: {why_not}"
    if paper is None:
        return "-", "-"
    diff = f"{ours.mean - paper.mean:+.2f}"
    inside = ours.contains(paper.mean)
    return diff, {None: "one seed: no interval", True: "yes", False: "no"}[inside]


def study_table(result: dict, percent: bool = True) -> tuple[list[dict], list[str]]:
    """The table of a study's result: one row per (task, column) with ours (mean ± sample std, seeds
    "k of n" where the paper ran n), the published figure, the difference, whether the published mean
    lies in our 95% interval; then per column an average row (over the tasks every column finished)
    beside the published average. Scores in percent when `percent` and the metric is a score."""
    scale = 100.0 if percent and not result.get("lower_is_better") else 1.0
    figures, averages = _published(result)
    planned = result.get("seeds")
    by: dict[tuple[str, str], list[dict]] = {}
    for c in result["cells"]:
        by.setdefault((c["task"], c["variant"]), []).append(c)
    columns = ["task", "model", "ours", "seeds", "paper", "diff", "paper in our 95% CI"]
    rows, means = [], {}
    for task in result["tasks"]:
        for v in result["variants"]:
            cells = by.get((task, v), [])
            ours = Summary.of(c["score"] * scale for c in cells)
            paper = figures.get((v, task))
            comparable = all(c.get("comparable", True) for c in cells)
            why = "; ".join(dict.fromkeys(c.get("why_not", "") for c in cells if c.get("why_not")))
            diff, verdict = _verdict(ours, paper, comparable, why)
            seeds = f"{ours.n}" + (f" of {paper.seeds}" if paper and paper.seeds else f" of {planned}"
                                   if planned and ours.n < planned else "")
            rows.append({"task": task, "model": v, "ours": ours.text(), "seeds": seeds if ours.n else "0",
                         "paper": paper.text() if paper else "-", "diff": diff, "paper in our 95% CI": verdict})
            if ours.n:
                means.setdefault(v, {})[task] = (ours.mean, comparable)
    for v in result["variants"]:
        got = means.get(v, {})
        paper = averages.get(v)
        if len(result["tasks"]) < 2:
            continue
        complete = len(got) == len(result["tasks"])
        avg = sum(m for m, _ in got.values()) / len(got) if complete else None
        comparable = complete and all(ok for _, ok in got.values())
        diff = f"{avg - paper.mean:+.2f}" if avg is not None and paper is not None and comparable else "-"
        rows.append({"task": "average", "model": v, "ours": "-" if avg is None else f"{avg:.2f}",
                     "seeds": f"{len(got)} of {len(result['tasks'])} tasks",
                     "paper": paper.text() if paper else "-", "diff": diff,
                     "paper in our 95% CI": "" if avg is None or comparable else "not comparable"})
    return rows, columns


def mean_std(xs: list[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (None for one value)."""
    s = Summary.of(xs)
    return s.mean, s.std


def size_breakdown(result: dict, titles: dict[str, str]) -> tuple[list[dict], list[str]] | None:
    """For text tasks (cells scored per algorithm and size): one row per (algorithm, size), and per
    variant the shape, parse and CLRS scores in percent, mean ± sample std over seeds, as the TransNAR
    paper's Figures 4-6 show them. None when no cell was scored per size."""
    by: dict[tuple[str, int, str, str], list[float]] = {}
    keys: list[tuple[str, int]] = []
    for c in result["cells"]:
        for entry in (c.get("per_task") or {}).values():
            if "size" not in entry or "clrs" not in entry.get("outputs", {}):
                continue
            key = (entry.get("algorithm", ""), int(entry["size"]))
            if key not in keys:
                keys.append(key)
            for score in titles:
                by.setdefault((*key, c["variant"], score), []).append(100.0 * entry["outputs"][score])
    if not keys:
        return None
    variants = result["variants"]
    columns = ["algorithm", "size"] + [f"{v}: {name}" for v in variants for name in titles.values()]
    rows = []
    for algorithm, size in sorted(keys):
        row: dict = {"algorithm": algorithm, "size": str(size)}
        for v in variants:
            for score, name in titles.items():
                xs = by.get((algorithm, size, v, score))
                row[f"{v}: {name}"] = "-" if not xs else Summary.of(xs).text(1)
        rows.append(row)
    return rows, columns
