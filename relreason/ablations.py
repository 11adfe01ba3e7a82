"""Named ablations from the papers: a base configuration plus a delta per variant.

    relreason ablate no-edge-updates --tasks core8 --seeds 3

runs every (task, variant, seed) cell through the same `relreason.train.run` that `train` uses,
with the paper recipe of each variant's model unless `--recipe` is given, stores each cell under
`OUT/<ablation>/<variant>/<task>/seed<k>/run/`, and aggregates test scores as mean ± std per task,
their average, and each variant's difference to the first, printed beside the paper's figures.

A finished cell is read back only when its stored resolved config (budget, recipe, overrides) and
spec hash equal what the cell would train now; a cell computed under another configuration is
never mixed in: `ablate` refuses with a hint, and `--rerun-stale` moves it aside and trains it again.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from relreason.config import Config, build_config, keys_of, parse_overrides
from relreason.data.text import SCORE_TITLES
from relreason.errors import RelreasonError
from relreason.registry import Registry


@dataclass(frozen=True)
class Variant:
    label: str
    model: str  # model name
    delta: dict = field(default_factory=dict)  # config tree {section: {key: value}} applied over the recipe


@dataclass(frozen=True)
class PaperFigure:
    """A published number for one variant, with where it is printed."""

    variant: str  # the Variant label it belongs to
    value: float  # in percent (CLRS score) or the paper's unit
    source: str  # "Diao & Loynd 2023, Table 17"


@dataclass(frozen=True)
class Ablation:
    name: str
    description: str
    variants: tuple[Variant, ...]  # the first is the reference the others are compared with
    paper: tuple[PaperFigure, ...] = ()  # published figures, printed beside ours
    paper_scope: str = ""  # what the published figures average over ("mean over the 8 core tasks")

    @property
    def varied_keys(self) -> set[str]:
        """The config keys some variant sets (`--set` may not override them)."""
        return set().union(*(keys_of(v.delta) for v in self.variants))

    def paper_line(self) -> str:
        if not self.paper:
            return ""
        parts = ", ".join(f"{p.variant} {p.value:.2f}" for p in self.paper)
        sources = "; ".join(dict.fromkeys(p.source for p in self.paper))
        return f"paper ({sources}), {self.paper_scope}: {parts}"


ABLATIONS: Registry[Ablation] = Registry("ablation", "relreason list ablations")


def register_ablation(name: str, description: str, *variants: Variant, paper: tuple[PaperFigure, ...] = (),
                      paper_scope: str = "") -> None:
    ABLATIONS.register(name, Ablation(name, description, tuple(variants), paper, paper_scope))


RT_PAPER = "Diao & Loynd 2023"
CORE8_MEAN = "mean test score over the 8 core tasks (n=64)"
_RT = Variant("rt", "rt")
register_ablation(
    "no-edge-updates", "RT with vs without edge updates", _RT,
    Variant("rt without edge updates", "rt", {"processor": {"edge_updates": False}}),
    paper=(PaperFigure("rt", 81.30, f"{RT_PAPER}, Table 17"),
           PaperFigure("rt without edge updates", 53.99, f"{RT_PAPER}, Table 17")),
    paper_scope=CORE8_MEAN)
register_ablation(
    "no-edges", "RT vs a standard transformer without edge vectors or edge features", _RT,
    Variant("transformer", "transformer"),
    paper=(PaperFigure("rt", 81.30, f"{RT_PAPER}, Table 17"),
           PaperFigure("transformer", 42.34, f"{RT_PAPER}, standard-transformer ablation (re-tuned)")),
    paper_scope=CORE8_MEAN)
register_ablation(
    "single-layer", "RT with its 3 layers per step vs a single layer", _RT,
    Variant("rt 1 layer", "rt", {"processor": {"layers": 1}}),
    paper=(PaperFigure("rt", 81.30, f"{RT_PAPER}, Table 17"),
           PaperFigure("rt 1 layer", 70.44, f"{RT_PAPER}, single-layer ablation (re-tuned)")),
    paper_scope=CORE8_MEAN)
register_ablation(
    "core-node", "RT global vector tiled onto inputs (cat) vs an extra core node", _RT,
    Variant("rt core node", "rt", {"processor": {"global_vector": "core"}}),
    paper=(PaperFigure("rt", 57.65, f"{RT_PAPER}, Table 16"),
           PaperFigure("rt core node", 57.57, f"{RT_PAPER}, Table 16")),
    paper_scope="mean test score over the tasks of Table 16 (n=64)")
register_ablation(
    "node-ptr-decoding", "RT pointers decoded from edges vs from node pairs", _RT,
    Variant("rt node pointers", "rt", {"model": {"pointer_decoding": "node"}}),
    paper=(PaperFigure("rt", 81.30, f"{RT_PAPER}, Table 15"),
           PaperFigure("rt node pointers", 81.00, f"{RT_PAPER}, Table 15")),
    paper_scope=CORE8_MEAN)
_ET = Variant("et", "et")
register_ablation("et-untied", "Edge Transformer with tied vs untied layers", _ET,
                  Variant("et untied", "et", {"processor": {"tied": False}}))
register_ablation("et-value-ablation", "Edge Transformer value from e_xl * e_ly vs from e_xl only", _ET,
                  Variant("et value from e_xl", "et", {"processor": {"value_ablation": True}}))
register_ablation("et-attention-ablation", "Edge Transformer key from e_ly vs from e_xy", _ET,
                  Variant("et key from e_xy", "et", {"processor": {"attention_ablation": True}}))
_DAT = Variant("dat", "dat")
register_ablation("dat-asymmetric", "Dual Attention Transformer with symmetric vs asymmetric relations",
                  Variant("dat symmetric", "dat", {"processor": {"symmetric_relations": True}}),
                  Variant("dat asymmetric", "dat", {"processor": {"symmetric_relations": False}}))
register_ablation("dat-symbols", "Dual Attention Transformer symbol kinds",
                  Variant("symbolic attention", "dat", {"processor": {"symbols": "symbolic_attention"}}),
                  Variant("positional", "dat", {"processor": {"symbols": "positional"}}),
                  Variant("position-relative", "dat", {"processor": {"symbols": "position_relative"}}))
# The paper's single-kind baselines keep the total head count: 8 heads of one kind instead of 4 + 4.
register_ablation("dat-relational-only", "Dual Attention Transformer vs relational heads only (8 of them)", _DAT,
                  Variant("dat relational only", "dat", {"processor": {"n_heads_sa": 0, "n_heads_ra": 8}}))
register_ablation("dat-sensory-only", "Dual Attention Transformer vs sensory heads only (8: a transformer)", _DAT,
                  Variant("dat sensory only", "dat", {"processor": {"n_heads_sa": 8, "n_heads_ra": 0}}))
# TransNAR (Bounsi et al. 2024): the paper's comparison is TransNAR against the same text transformer trained
# on the same CLRS-Text data; it reports TransNAR better on most algorithms in and out of distribution, mostly by
# getting the output's shape right, but not on binary_search, find_maximum_subarray, minimum and quickselect.
# Both need the frozen NAR: --set model.nar=runs/NAME. Cells keep per-size shape/parse/CLRS in `per_task`.
_TRANSNAR = Variant("transnar", "transnar")
register_ablation("transnar-vs-text", "TransNAR vs the same text transformer without the NAR (same data and budget)",
                  _TRANSNAR, Variant("text transformer", "transnar", {"model": {"use_nar": False}}))
register_ablation("transnar-nodes-only", "TransNAR cross-attending to NAR nodes and edges vs to nodes only",
                  _TRANSNAR, Variant("transnar nodes only", "transnar", {"model": {"nodes_only": True}}))


# -- running -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Cell:
    variant: Variant
    task: str
    seed: int
    directory: Path  # the cell; the run itself is directory / "run"
    config: Config

    @property
    def run_dir(self) -> Path:
        return self.directory / "run"


def cell_dir(out: Path, ablation: str, variant: str, task: str, seed: int) -> Path:
    return Path(out) / ablation / variant.replace(" ", "_") / task / f"seed{seed}"


def plan_cells(name: str, tasks: list[str], seeds: int, recipe: str | None = None, out: Path = Path("ablations"),
               sets: list[str] | None = None) -> list[Cell]:
    """Every cell's resolved config, built before anything trains (a bad key fails at once)."""
    abl = ABLATIONS.get(name)
    if seeds < 1:
        raise RelreasonError(f"--seeds {seeds} must be at least 1", "e.g. --seeds 3")
    user = parse_overrides(list(sets or []))
    clash = sorted((keys_of(user) | ({"train.seed"} if "seed" in user.get("train", {}) else set())) &
                   (abl.varied_keys | {"train.seed"}))
    if clash:
        raise RelreasonError(f"--set {', '.join(clash)}: {name} sets {'it' if len(clash) == 1 else 'them'} itself "
                             "(the variants' keys and the seed of each cell)", "drop that --set (use --seeds for seeds)")
    cells = []
    for task in tasks:
        for v in abl.variants:
            for seed in range(seeds):
                over = {s: dict(vals) for s, vals in user.items()}
                over.setdefault("train", {})["seed"] = seed
                cfg = build_config(v.model, task, recipe, over, ablation=(name, v.delta))
                cells.append(Cell(v, task, seed, cell_dir(out, name, v.label, task, seed), cfg))
    return cells


def cell_state(cell: Cell) -> str:
    """"done" (results under the same config), "stale" (results or a checkpoint under another config),
    "partial" (a checkpoint to resume under the same config) or "new"."""
    from relreason.train.loop import has_progress, stored_config

    results = cell.run_dir / "results.json"
    if results.is_file():
        try:
            data = json.loads(results.read_text())
        except (OSError, json.JSONDecodeError):
            return "stale"
        return "done" if data.get("config") == cell.config.to_dict() else "stale"
    if (cell.run_dir / "last" / "trainer_state.json").exists():
        try:
            return "partial" if stored_config(cell.run_dir).to_dict() == cell.config.to_dict() else "stale"
        except RelreasonError:
            return "stale"
    return "stale" if has_progress(cell.run_dir) else "new"


def run_ablation(name: str, tasks: list[str], seeds: int, recipe: str | None = None, out: Path = Path("ablations"),
                 sets: list[str] | None = None, show_progress: bool = True, log: Callable[[str], None] = print,
                 rerun_stale: bool = False, jobs: int = 1, shard: tuple[int, int] | None = None) -> dict:
    """Trains the cells that have no results yet and reads back every finished one; returns {"ablation",
    "variants", "tasks", "cells" (the finished ones), "missing" (labels of cells without results),
    "planned", "paper", ...}.

    `jobs`: cells train in that many worker processes (torch threads divided between them unless
    train.threads is set). `shard` (i, k): this call trains only the cells j with j % k == i - 1 (i is
    1-based), so k machines (a SLURM array) can share one sweep directory. Either way a cell is claimed
    with its run lock; a cell whose lock another process holds is being trained there and is skipped."""
    abl = ABLATIONS.get(name)
    if jobs < 1:
        raise RelreasonError(f"--jobs {jobs} must be at least 1", "e.g. --jobs 2")
    cells = plan_cells(name, tasks, seeds, recipe, out, sets)
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
    if jobs == 1:
        _train_here(name, todo, len(mine), show_progress, log)
    else:
        _train_in_workers(name, todo, len(mine), jobs, show_progress, log)
    collected, missing = [], []
    for c in cells:  # the whole sweep: other shards' cells too
        if cell_state(c) != "done":
            missing.append(cell_label(c))
            continue
        data = json.loads((c.run_dir / "results.json").read_text())
        collected.append({"variant": c.variant.label, "task": c.task, "seed": c.seed,
                          "score": data["test"]["score"], "best_val": data["best_val"],
                          "examples": data["examples"], "recipe": data.get("recipe"),
                          "per_task": data.get("per_task") or {}})
    first = cells[0].config
    return {"ablation": name, "description": abl.description, "variants": [v.label for v in abl.variants],
            "tasks": tasks, "seeds": seeds, "cells": collected, "missing": missing, "planned": len(cells),
            "recipe": first.recipe, "train_examples": first.train.train_examples,
            "paper": [{"variant": p.variant, "value": p.value, "source": p.source} for p in abl.paper],
            "paper_line": abl.paper_line(), "lower_is_better": _lower_is_better(tasks)}


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
        res = run(cell.config, out=cell.directory, name="run", resume=state == "partial", show_progress=show_progress,
                  log=log, lock=lock)
        return "interrupted" if res.interrupted else "trained"
    finally:
        lock.release()


def _train_here(name: str, todo: list[Cell], total: int, show_progress: bool, log: Callable[[str], None]) -> None:
    from relreason.runtime import progress

    with progress(total, f"ablate {name}", unit="cell", disable=not show_progress, initial=total - len(todo)) as bar:
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
    bar = progress(total, f"ablate {name} ({jobs} jobs)", unit="cell", disable=not show_progress, initial=done)
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


def _lower_is_better(tasks: list[str]) -> bool:
    from relreason.tasks import TASKS

    return TASKS.get(tasks[0]).lower_is_better


def _mean_std(xs: list[float]) -> tuple[float, float]:
    """Mean and population standard deviation (0 for one value)."""
    m = sum(xs) / len(xs)
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs)) if len(xs) > 1 else 0.0


def aggregate(result: dict, percent: bool = True) -> tuple[list[dict], list[str]]:
    """Paper-style rows: per task mean ± std per variant, an `average` row, `diff` columns (each later
    variant minus the first, on the means) and, when the paper published figures, a `paper` row.
    Scores in percent when `percent` (CLRS scores; relative losses are kept as they are).

    A partial sweep (cells still missing) shows "-" where a (task, variant) has no cell, "(k/n seeds)"
    beside means over fewer seeds than planned, and averages only for variants with every task."""
    scale = 100.0 if percent and not result.get("lower_is_better") else 1.0
    variants, tasks, seeds = result["variants"], result["tasks"], result.get("seeds")
    by: dict[tuple[str, str], list[float]] = {}
    for c in result["cells"]:
        by.setdefault((c["task"], c["variant"]), []).append(c["score"] * scale)
    columns = ["task"] + variants + [f"diff ({v})" for v in variants[1:]]
    rows, means = [], {v: {} for v in variants}  # variant -> task -> mean
    for task in tasks:
        row = {"task": task}
        for v in variants:
            xs = by.get((task, v), [])
            if not xs:
                row[v] = "-"
                continue
            m, s = _mean_std(xs)
            means[v][task] = m
            row[v] = f"{m:.2f} ± {s:.2f}" + (f" ({len(xs)}/{seeds} seeds)" if seeds and len(xs) < seeds else "")
        for v in variants[1:]:
            both = task in means[v] and task in means[variants[0]]
            row[f"diff ({v})"] = f"{means[v][task] - means[variants[0]][task]:+.2f}" if both else "-"
        rows.append(row)
    complete = {v for v in variants if len(means[v]) == len(tasks)}
    avg = {"task": "average (ours)"}
    for v in variants:
        avg[v] = f"{sum(means[v].values()) / len(tasks):.2f}" if v in complete else "-"
    for v in variants[1:]:
        both = v in complete and variants[0] in complete
        avg[f"diff ({v})"] = (f"{(sum(means[v].values()) - sum(means[variants[0]].values())) / len(tasks):+.2f}"
                              if both else "-")
    rows.append(avg)
    paper = {p["variant"]: p["value"] for p in result.get("paper", [])}
    if paper:
        row = {"task": "paper"}
        for v in variants:
            row[v] = f"{paper[v]:.2f}" if v in paper else "-"
        for v in variants[1:]:
            row[f"diff ({v})"] = f"{paper[v] - paper[variants[0]]:+.2f}" if v in paper and variants[0] in paper else "-"
        rows.append(row)
    return rows, columns


def size_breakdown(result: dict) -> tuple[list[dict], list[str]] | None:
    """For text tasks (cells scored per algorithm and size): one row per (algorithm, size), and per
    variant the shape, parse and CLRS scores in percent, mean ± std over seeds, as the TransNAR
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
            for score in SCORE_TITLES:
                by.setdefault((*key, c["variant"], score), []).append(100.0 * entry["outputs"][score])
    if not keys:
        return None
    variants = result["variants"]
    columns = ["algorithm", "size"] + [f"{v}: {name}" for v in variants for name in SCORE_TITLES.values()]
    rows = []
    for algorithm, size in sorted(keys):
        row: dict = {"algorithm": algorithm, "size": str(size)}
        for v in variants:
            for score, name in SCORE_TITLES.items():
                xs = by.get((algorithm, size, v, score))
                row[f"{v}: {name}"] = "-" if not xs else "{:.1f} ± {:.1f}".format(*_mean_std(xs))
        rows.append(row)
    return rows, columns
