"""A sweep: a study's cells trained and read back, and the core functions of `ablate` and `reproduce`.

`run_study` plans every cell (relreason.studies.cells), trains the cells without results (here, in
`--jobs` worker processes, or the shard `--shard I/K` of them; relreason.studies.training), resuming
partial ones and refusing cells computed under another configuration, and reads every finished cell
back into the study's result. `run_ablation` and `run_table` are what the two commands call: a study
by name, swept, its tables written (relreason.studies.report); `table_costs` is `reproduce --list`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from relreason.config import to_plain
from relreason.errors import RelreasonError
from relreason.files import read_json
from relreason.eval.stats import STD_KIND, check_margin
from relreason.runtime import cli_command
from relreason.studies.ablations import ABLATIONS
from relreason.studies.cells import (cell_label, cell_state, collect, committed_result, delta_slug, is_held,
                                     parse_shard, plan_cells, seed_groups, shard_cells)
from relreason.studies.launch import Launch, cell_status, launch_for
from relreason.studies.report import write_tables
from relreason.studies.tables import TABLES
from relreason.studies.training import run_cells
from relreason.studies.variants import Study
from relreason.tasks import TASKS, expand_tasks


def run_study(study: Study, tasks: list[str], seeds: int, recipe: str | None = None, out: Path = Path("ablations"),
              sets: list[str] | None = None, show_progress: bool = True, log: Callable[[str], None] = print,
              rerun_stale: bool = False, jobs: int = 1, shard: tuple[int, int] | None = None,
              models: list[str] | None = None, train: bool = True, launch: Launch | None = None,
              seed_batch: int | None = None, seed_strategy: str = "auto", committed: Path | None = None) -> dict:
    """Trains the cells that have no results yet (unless `train` is False) and reads back every
    finished one; returns the study's result: {"study", "description", "variants", "tasks", "seeds",
    "cells" (records of the finished ones), "missing", "planned", "figures", "paper_line", ...}.

    `jobs`: cells train in that many worker processes (torch threads divided between them unless
    train.threads is set). `shard` (i, k): this call trains only the seed groups j with j % k == i - 1 (i
    is 1-based; with `seed_batch` 1 the groups are the cells), so k machines (a SLURM array) can share one
    sweep directory. Either way a cell is claimed with its run lock; a cell whose lock another process holds
    is being trained there and is skipped. `launch` (relreason.studies.launch): the groups to train are
    submitted as a job array instead (one element per group), their jobs listed under "jobs" in the result.

    `seed_batch` (None: `default_seed_batch`): the cells of one (column, task) train as seed groups of up to
    that many seeds (relreason.studies.cells.seed_groups, relreason.train.seed_group, `seed_strategy`), each
    cell's run directory as if trained alone; the units of `jobs`, `shard` and `launch` are then those groups.

    `committed` (a `relreason results` directory): a cell whose finished result is committed there under the
    cell's config (relreason.studies.cells.committed_result) counts as done: it is not trained again (its run
    directory under `out` is left as it is), and its record is read from there."""
    if jobs < 1:
        raise RelreasonError(f"--jobs {jobs} must be at least 1", "e.g. --jobs 2")
    cells = plan_cells(study, tasks, seeds, recipe, out, sets, models)
    strategy = check_seed_strategy(seed_strategy)
    groups = seed_groups(cells, default_seed_batch(cells, seeds) if seed_batch is None else seed_batch)
    submitted: list[dict] = []
    if train:
        mine_groups = shard_cells(groups, shard)
        mine = [c for g in mine_groups for c in g]
        states = {c.directory: cell_state(c) for c in mine}
        stale = [c for c in mine if states[c.directory] == "stale" and not is_held(c)
                 and committed_result(c, out, committed) is None]
        if stale and not rerun_stale:
            raise RelreasonError(f"{len(stale)} cell(s) were computed under another configuration or another "
                                 f"version of a plugin (e.g. {stale[0].run_dir}); their results would mix budgets, "
                                 "settings or code",
                                 "pass --rerun-stale to move them aside (as run.stale-<time>) and train them again")
        for c in stale:
            c.run_dir.rename(c.directory / f"run.stale-{time.strftime('%Y%m%d-%H%M%S')}-{c.seed}")
            states[c.directory] = "new"
        kept = [c for c in mine if states[c.directory] != "done" and committed_result(c, out, committed) is not None]
        if kept:
            log(f"{len(kept)} cell(s) already committed under {committed}: not trained again "
                f"({', '.join(cell_label(c) for c in kept[:3])}{', ...' if len(kept) > 3 else ''})")
            for c in kept:
                states[c.directory] = "done"
        todo = [g for g in ([c for c in g if states[c.directory] not in ("done", "stale")] for g in mine_groups) if g]
        if launch is None:
            run_cells(study.name, todo, len(mine), jobs, show_progress, log, strategy)
        else:
            submitted = launch.submit(study.name, todo, log, strategy)
    records, missing = collect(cells, out, committed)
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
            "note": study.note, "std": STD_KIND, "lower_is_better": _lower_is_better(tasks), "margin": study.margin,
            **({"jobs": submitted} if launch is not None else {})}


SEED_BATCH_MAX = 4  # the group size of the default on an accelerator (and of the ratios in costs.json)


def default_seed_batch(cells: list, seeds: int) -> int:
    """`--seed-batch auto`: the sweep's seed count up to SEED_BATCH_MAX where its cells train on an accelerator
    (one vmapped step for the group), 1 on CPU, where a group measured no faster than its cells one after
    another (the loop, ~1.0x; vmap slower: scripts/bench_seeds.py, in costs.json) and would hold its K models
    at once and finish none of its cells before the last; also 1 for cells captured as CUDA graphs
    (train.cuda_graph), which seed groups do not run (and which were faster alone: results/gpu)."""
    from relreason.models.build import resolve_device

    if not cells or resolve_device(cells[0].config.train.device).type == "cpu" or cells[0].config.train.cuda_graph:
        return 1  # CPU: no faster; train.cuda_graph: a captured single run outran every group on the H200
    return min(seeds, SEED_BATCH_MAX)


def parse_seed_batch(text: str | int | None) -> int | None:
    """`--seed-batch`: "auto" (None) or a group size of at least 1."""
    if text is None or str(text).strip() == "auto":
        return None
    try:
        k = int(str(text).strip())
    except ValueError:
        k = 0
    if k < 1:
        raise RelreasonError(f"--seed-batch {text} must be auto or a number of seeds of at least 1",
                             "e.g. --seed-batch 4, or --seed-batch 1 to train each cell alone")
    return k


def check_seed_strategy(text: str) -> str:
    """`--seed-strategy`: one of relreason.train.seed_group.Strategy's values."""
    from relreason.train.seed_group import Strategy

    choices = [s.value for s in Strategy]
    if text not in choices:
        raise RelreasonError(f"--seed-strategy {text!r} is not one of {', '.join(choices)}",
                             "e.g. --seed-strategy auto")
    return text


def _lower_is_better(tasks: list[str]) -> bool:
    return TASKS.get(tasks[0]).lower_is_better


@dataclass(frozen=True)
class Sweep:
    """What a command's sweep left: the study, its result, and where its tables are."""

    study: Study
    result: dict  # run_study's
    tables: Path  # the directory of the study's tables
    stem: str | None  # the tables written there (results or results.partial); None: held back, cells missing


def _not_under_torchrun(command: str) -> None:
    if int(os.environ.get("WORLD_SIZE") or 1) > 1:
        raise RelreasonError(f"{command} starts its own processes; it does not run under torchrun",
                             "run it directly, with --jobs N (one machine) or --shard I/K (several)")


def run_ablation(name: str, tasks: str | None, seeds: int, recipe: str | None = None, out: Path = Path("ablations"),
                 sets: list[str] | None = None, *, partial: bool = False, show_progress: bool = True,
                 log: Callable[[str], None] = print, rerun_stale: bool = False, jobs: int = 1,
                 shard: str | None = None, margin: float | None = None, launcher: str = "local",
                 slurm: str | None = None, wait: bool = False, seed_batch: str | int | None = None,
                 seed_strategy: str = "auto") -> Sweep:
    """`relreason ablate`: the ablation `name` on `tasks` (a comma list or group; None: the ablation's
    own) swept by `run_study` (`shard`: "I/K"), its tables written under OUT/<name> once every cell has
    results (while some are missing, only with `partial`, as results.partial.*). `margin`: the
    equivalence margin of the verdicts instead of the ablation's own. `launcher` other than local: the
    cells are submitted (`slurm`: "key=value,..."; `wait`: until their jobs end), job files in OUT/jobs/<name>.
    `seed_batch` ("auto", None or K) and `seed_strategy`: the seed groups of `run_study`."""
    study = ABLATIONS.get(name)
    margin = check_margin(margin) if margin is not None else None
    _not_under_torchrun("ablate")
    launch = launch_for(launcher, slurm, wait, Path(out) / "jobs" / name, jobs, shard, cli_command())
    result = run_study(study, expand_tasks(tasks if tasks is not None else study.tasks), seeds, recipe, out, sets,
                       show_progress=show_progress, log=log, rerun_stale=rerun_stale, jobs=jobs,
                       shard=parse_shard(shard) if shard is not None else None, launch=launch,
                       seed_batch=parse_seed_batch(seed_batch), seed_strategy=seed_strategy)
    if margin is not None:
        result["margin"] = margin
    base = Path(out) / name
    stem = write_tables(result, base) if partial or not result["missing"] else None
    return Sweep(study, result, base, stem)


def run_table(table: str, tasks: str | None, seeds: int, recipe: str | None = None, out: Path = Path("reproduce"),
              sets: list[str] | None = None, *, models: str | None = None, train: bool = True,
              log: Callable[[str], None] = print, rerun_stale: bool = False, jobs: int = 1,
              shard: str | None = None, margin: float | None = None, launcher: str = "local",
              slurm: str | None = None, wait: bool = False, seed_batch: str | int | None = None,
              seed_strategy: str = "auto", committed: Path | None = None) -> Sweep:
    """`relreason reproduce`: the published table `table` on `tasks` (None: the table's own) and the
    columns of `models` (a comma list; None: every column) swept by `run_study` (with `train` False,
    only read back), its tables written under OUT/tables/<table>, partial ones while cells are missing.
    `margin`: the equivalence margin of the verdicts instead of the table's own. `launcher` other than
    local: the cells are submitted (`slurm`: "key=value,..."; `wait`: until their jobs end), job files in
    OUT/jobs/<table>. `seed_batch` ("auto", None or K) and `seed_strategy`: the seed groups of `run_study`.
    `committed`: cells finished there count as done (`run_study`)."""
    study = TABLES.get(table)
    margin = check_margin(margin) if margin is not None else None
    _not_under_torchrun("reproduce")
    model_list = parse_models(models)
    launch = launch_for(launcher, slurm, wait, Path(out) / "jobs" / table, jobs, shard, cli_command())
    result = run_study(study, expand_tasks(tasks if tasks is not None else study.tasks), seeds, recipe, out, sets,
                       log=log, rerun_stale=rerun_stale, jobs=jobs,
                       shard=parse_shard(shard) if shard is not None else None, models=model_list, train=train,
                       launch=launch, seed_batch=parse_seed_batch(seed_batch), seed_strategy=seed_strategy,
                       committed=committed)
    if margin is not None:
        result["margin"] = margin
    base = Path(out) / "tables" / table
    return Sweep(study, result, base, write_tables(result, base))


def parse_models(models: str | None) -> list[str] | None:
    """`--models "rt, mpnn"` -> ["rt", "mpnn"] (None: every column); a list naming nothing is an error."""
    model_list = [m.strip() for m in models.split(",") if m.strip()] if models is not None else None
    if model_list is not None and not model_list:
        raise RelreasonError(f"--models {models!r} names no model", "e.g. --models rt,mpnn")
    return model_list


def sweep_status(kind: str, name: str, tasks: str | None, seeds: int, recipe: str | None = None,
                 out: Path = Path("reproduce"), sets: list[str] | None = None, models: str | None = None) -> list[dict]:
    """`reproduce TABLE --status` (`kind` "table") and `ablate NAME --status` (`kind` "ablation"): each planned
    cell's status (relreason.studies.launch.cell_status: done, running with its job, partial, missing, stale)."""
    study = TABLES.get(name) if kind == "table" else ABLATIONS.get(name)
    cells = plan_cells(study, expand_tasks(tasks if tasks is not None else study.tasks), seeds, recipe, out, sets,
                       parse_models(models))
    return [cell_status(c) for c in cells]


def costs_file() -> Path:
    """The measured cell costs shipped with relreason (relreason/studies/costs.json, package data, written
    by scripts/bench_reproduce.py), so that `reproduce --list` shows them from any directory."""
    import importlib.resources

    return Path(str(importlib.resources.files("relreason.studies") / "costs.json"))


def table_costs(costs: Path | None = None, table: str | None = None, tasks: str | None = None,
                seeds: int | None = None) -> tuple[list[dict], list[str]]:
    """`relreason reproduce --list`: one row per table (its cells per seed, the papers' seed counts, the
    measured cost of its cheapest and dearest cell from the `costs` file of scripts/bench_reproduce.py,
    by default the one shipped with relreason, the whole table's at its paper's seed counts, and the same
    trained in seed groups of up to SEED_BATCH_MAX seeds from the group ratios scripts/bench_seeds.py
    recorded there), and the machines the costs and ratios were measured on.

    `table` (with `tasks`, a comma list or group, and `seeds`): that table alone, on those tasks (default:
    its own) at that seed count for every column (default: its paper's)."""
    costs = costs_file() if costs is None else Path(costs)
    measured = {}
    if costs.is_file():
        try:
            measured = read_json(costs, follow=True)
        except RelreasonError:
            raise RelreasonError(f"{costs} is not a readable costs file",
                                 "measure again: python scripts/bench_reproduce.py") from None
    elif costs != costs_file():
        raise RelreasonError(f"--costs {costs} does not exist", "give the file scripts/bench_reproduce.py wrote, "
                                                                "or leave --costs out for the measured costs shipped")
    groups = measured.get("seed_groups") or {}
    ratios = groups.get("ratios") or {}
    rows, machines = [], set()
    if ratios:
        machines.add(f"{groups.get('hardware', '?')}, {groups.get('date', '?')} (seed group ratios): "
                     + "; ".join(groups.get("commands") or ["?"]))
    studies = [(table, TABLES.get(table))] if table is not None else list(TABLES.items())
    for name, study in studies:
        table_tasks = expand_tasks(tasks if tasks is not None and table is not None else study.tasks)
        paper = sorted({p.seeds for p in [*study.figures.values(), *study.averages.values()] if p.seeds})
        entry = measured.get(name) or {}
        cells = entry.get("cells") or {}
        cost = "not measured (scripts/bench_reproduce.py)"
        if cells:
            lo = min(cells.items(), key=lambda kv: kv[1]["seconds"])
            hi = max(cells.items(), key=lambda kv: kv[1]["seconds"])
            cost = f"{_hours(lo[1]['seconds'])} ({lo[0]})" + ("" if lo[0] == hi[0] else
                                                              f" to {_hours(hi[1]['seconds'])} ({hi[0]})")
            machines.add(f"{entry.get('hardware', '?')}, {entry.get('date', '?')}: {entry.get('command', '?')}")
        rows.append({"table": name, "what": study.description, "columns": len(study.variants),
                     "tasks": len(table_tasks),
                     "cells per seed": len(study.variants) * len(table_tasks),
                     "paper seeds": ", ".join(map(str, paper)) or "-", "seeds": seeds,
                     "one cell (measured)": cost, "measured": cells,
                     **_table_total(study, table_tasks, cells, ratios, seeds if table is not None else None)})
    return rows, sorted(machines)


def column_seeds(study: Study, v) -> int | None:
    """The seed count the paper ran column `v` with (the largest of its figures'), or None if not known."""
    return max((p.seeds for (label, _), p in study.figures.items() if label == v.label and p.seeds),
               default=study.averages[v.label].seeds if v.label in study.averages else None)


def group_sizes(seeds: int, batch: int) -> list[int]:
    """The sizes of the seed groups `--seed-batch batch` forms of `seeds` seeds: 10, 4 -> [4, 4, 2]."""
    return [min(batch, seeds - i) for i in range(0, seeds, batch)]


def column_key(v) -> str:
    """A column's configuration, as scripts/bench_seeds.py keys its measured group ratios: "model recipe" and
    "+delta" where the column has one (columns of one configuration share their ratios)."""
    return f"{v.model} {v.recipe or 'paper'}" + (f"+{delta_slug(v.delta)}" if v.delta else "")


def _column_costs(study: Study, cells: dict) -> dict:
    """{column label: {task: measured cell}} of the measured cells ("label on task" keys)."""
    out: dict[str, dict] = {}
    for key, c in cells.items():
        label, _, task = key.partition(" on ")
        out.setdefault(label, {})[task] = c
    return out


def _table_total(study: Study, tasks: list[str], cells: dict, ratios: dict | None = None,
                 seeds: int | None = None) -> dict:
    """The predicted cost of the whole table at its paper's seed counts (or `seeds` for every column): per
    column, the mean of its measured cells (on the tasks measured) times its tasks times its seeds; None where
    a column is not measured or its paper's seed count is not known. And the same in seed groups of up to
    SEED_BATCH_MAX seeds (`seed_groups`), per strategy: each group's training time over its measured ratio
    `ratios["COLUMN K=k"]` (group examples/s over its cells' one after another, scripts/bench_seeds.py),
    its cells' validations, test and start-up as alone; None where a column's ratio is not measured."""
    total, measured_on, why = 0.0, set(), ""
    grouped = {"loop": 0.0, "vmap": 0.0}
    why_grouped = ""
    by_column = _column_costs(study, cells)
    for v in study.variants:
        n = seeds or column_seeds(study, v)
        mine = by_column.get(v.label) or {}
        if not n:
            why = "the paper's seed count is not known"
            break
        if not mine:
            why = f"{v.label} not measured"
            break
        measured_on.update(mine)
        seconds = sum(c["seconds"] for c in mine.values()) / len(mine)
        train = sum(c.get("train_s", 0.0) for c in mine.values()) / len(mine)
        total += seconds * len(tasks) * n
        for k in group_sizes(n, SEED_BATCH_MAX):
            ratio = (ratios or {}).get(f"{column_key(v)} K={k}")
            if k == 1:
                ratio = {"group_loop": 1.0, "group_vmap": 1.0}  # a group of one is the single run
            if not ratio or "train_s" not in next(iter(mine.values())):
                why_grouped = why_grouped or f"{v.label}: group of {k} not measured (scripts/bench_seeds.py)"
                continue
            for strategy in grouped:
                grouped[strategy] += (seconds - train + train / ratio[f"group_{strategy}"]) * k * len(tasks)
    if why:
        return {"at paper seeds (predicted)": f"- ({why})", "total_seconds": None,
                "in seed groups (predicted)": f"- ({why})", "grouped_seconds": None}
    out = {"at paper seeds (predicted)": f"{_hours(total)} (each column's {', '.join(sorted(measured_on))} cell "
                                         f"for all {len(tasks)} tasks)", "total_seconds": round(total, 1)}
    if why_grouped:
        return {**out, "in seed groups (predicted)": f"- ({why_grouped})", "grouped_seconds": None}
    text = ", ".join(f"{s} {_hours(t)} ({total / t:.2f}x)" for s, t in grouped.items())
    return {**out, "in seed groups (predicted)": text,
            "grouped_seconds": {s: round(t, 1) for s, t in grouped.items()}}


def _hours(seconds: float) -> str:
    if seconds >= 100 * 3600:
        return f"{seconds / 3600:,.0f} h"
    return f"{seconds / 3600:.1f} h" if seconds >= 5400 else f"{seconds / 60:.0f} min"
