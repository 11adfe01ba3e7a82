"""A sweep: a study's cells trained and read back, and the core functions of `ablate` and `reproduce`.

`run_study` plans every cell (relreason.studies.cells), trains the cells without results (here, in
`--jobs` worker processes, or the shard `--shard I/K` of them; relreason.studies.training), resuming
partial ones and refusing cells computed under another configuration, and reads every finished cell
back into the study's result. `run_ablation` and `run_table` are what the two commands call: a study
by name, swept, its tables written (relreason.studies.report); `table_costs` is `reproduce --list`.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from relreason.config import to_plain
from relreason.errors import RelreasonError
from relreason.eval.stats import STD_KIND, check_margin
from relreason.runtime import cli_command
from relreason.studies.ablations import ABLATIONS
from relreason.studies.cells import cell_state, collect, is_held, parse_shard, plan_cells, shard_cells
from relreason.studies.launch import Launch, cell_status, launch_for
from relreason.studies.report import write_tables
from relreason.studies.tables import TABLES
from relreason.studies.training import run_cells
from relreason.studies.variants import Study
from relreason.tasks import TASKS, expand_tasks


def run_study(study: Study, tasks: list[str], seeds: int, recipe: str | None = None, out: Path = Path("ablations"),
              sets: list[str] | None = None, show_progress: bool = True, log: Callable[[str], None] = print,
              rerun_stale: bool = False, jobs: int = 1, shard: tuple[int, int] | None = None,
              models: list[str] | None = None, train: bool = True, launch: Launch | None = None) -> dict:
    """Trains the cells that have no results yet (unless `train` is False) and reads back every
    finished one; returns the study's result: {"study", "description", "variants", "tasks", "seeds",
    "cells" (records of the finished ones), "missing", "planned", "figures", "paper_line", ...}.

    `jobs`: cells train in that many worker processes (torch threads divided between them unless
    train.threads is set). `shard` (i, k): this call trains only the cells j with j % k == i - 1 (i is
    1-based), so k machines (a SLURM array) can share one sweep directory. Either way a cell is claimed
    with its run lock; a cell whose lock another process holds is being trained there and is skipped.
    `launch` (relreason.studies.launch): the cells to train are submitted as a job array instead, their jobs
    listed under "jobs" in the result."""
    if jobs < 1:
        raise RelreasonError(f"--jobs {jobs} must be at least 1", "e.g. --jobs 2")
    cells = plan_cells(study, tasks, seeds, recipe, out, sets, models)
    submitted: list[dict] = []
    if train:
        mine = shard_cells(cells, shard)
        states = {c.directory: cell_state(c) for c in mine}
        stale = [c for c in mine if states[c.directory] == "stale" and not is_held(c)]
        if stale and not rerun_stale:
            raise RelreasonError(f"{len(stale)} cell(s) were computed under another configuration or another "
                                 f"version of a plugin (e.g. {stale[0].run_dir}); their results would mix budgets, "
                                 "settings or code",
                                 "pass --rerun-stale to move them aside (as run.stale-<time>) and train them again")
        for c in stale:
            c.run_dir.rename(c.directory / f"run.stale-{time.strftime('%Y%m%d-%H%M%S')}-{c.seed}")
            states[c.directory] = "new"
        todo = [c for c in mine if states[c.directory] not in ("done", "stale")]
        if launch is None:
            run_cells(study.name, todo, len(mine), jobs, show_progress, log)
        else:
            submitted = launch.submit(study.name, todo, log)
    records, missing = collect(cells)
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
                 slurm: str | None = None, wait: bool = False) -> Sweep:
    """`relreason ablate`: the ablation `name` on `tasks` (a comma list or group; None: the ablation's
    own) swept by `run_study` (`shard`: "I/K"), its tables written under OUT/<name> once every cell has
    results (while some are missing, only with `partial`, as results.partial.*). `margin`: the
    equivalence margin of the verdicts instead of the ablation's own. `launcher` other than local: the
    cells are submitted (`slurm`: "key=value,..."; `wait`: until their jobs end), job files in OUT/jobs/<name>."""
    study = ABLATIONS.get(name)
    margin = check_margin(margin) if margin is not None else None
    _not_under_torchrun("ablate")
    launch = launch_for(launcher, slurm, wait, Path(out) / "jobs" / name, jobs, shard, cli_command())
    result = run_study(study, expand_tasks(tasks if tasks is not None else study.tasks), seeds, recipe, out, sets,
                       show_progress=show_progress, log=log, rerun_stale=rerun_stale, jobs=jobs,
                       shard=parse_shard(shard) if shard is not None else None, launch=launch)
    if margin is not None:
        result["margin"] = margin
    base = Path(out) / name
    stem = write_tables(result, base) if partial or not result["missing"] else None
    return Sweep(study, result, base, stem)


def run_table(table: str, tasks: str | None, seeds: int, recipe: str | None = None, out: Path = Path("reproduce"),
              sets: list[str] | None = None, *, models: str | None = None, train: bool = True,
              log: Callable[[str], None] = print, rerun_stale: bool = False, jobs: int = 1,
              shard: str | None = None, margin: float | None = None, launcher: str = "local",
              slurm: str | None = None, wait: bool = False) -> Sweep:
    """`relreason reproduce`: the published table `table` on `tasks` (None: the table's own) and the
    columns of `models` (a comma list; None: every column) swept by `run_study` (with `train` False,
    only read back), its tables written under OUT/tables/<table>, partial ones while cells are missing.
    `margin`: the equivalence margin of the verdicts instead of the table's own. `launcher` other than
    local: the cells are submitted (`slurm`: "key=value,..."; `wait`: until their jobs end), job files in
    OUT/jobs/<table>."""
    study = TABLES.get(table)
    margin = check_margin(margin) if margin is not None else None
    _not_under_torchrun("reproduce")
    model_list = _model_list(models)
    launch = launch_for(launcher, slurm, wait, Path(out) / "jobs" / table, jobs, shard, cli_command())
    result = run_study(study, expand_tasks(tasks if tasks is not None else study.tasks), seeds, recipe, out, sets,
                       log=log, rerun_stale=rerun_stale, jobs=jobs,
                       shard=parse_shard(shard) if shard is not None else None, models=model_list, train=train,
                       launch=launch)
    if margin is not None:
        result["margin"] = margin
    base = Path(out) / "tables" / table
    return Sweep(study, result, base, write_tables(result, base))


def _model_list(models: str | None) -> list[str] | None:
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
                       _model_list(models))
    return [cell_status(c) for c in cells]


def costs_file() -> Path:
    """The measured cell costs shipped with relreason (relreason/studies/costs.json, package data, written
    by scripts/bench_reproduce.py), so that `reproduce --list` shows them from any directory."""
    import importlib.resources

    return Path(str(importlib.resources.files("relreason.studies") / "costs.json"))


def table_costs(costs: Path | None = None) -> tuple[list[dict], list[str]]:
    """`relreason reproduce --list`: one row per table (its cells per seed, the papers' seed counts, the
    measured cost of its cheapest and dearest cell from the `costs` file of scripts/bench_reproduce.py,
    by default the one shipped with relreason, and the whole table's at its paper's seed counts), and the
    machines the costs were measured on."""
    costs = costs_file() if costs is None else Path(costs)
    measured = {}
    if costs.is_file():
        try:
            measured = json.loads(costs.read_text())
        except (OSError, ValueError):
            raise RelreasonError(f"{costs} is not a readable costs file",
                                 "measure again: python scripts/bench_reproduce.py") from None
    elif costs != costs_file():
        raise RelreasonError(f"--costs {costs} does not exist", "give the file scripts/bench_reproduce.py wrote, "
                                                                "or leave --costs out for the measured costs shipped")
    rows, machines = [], set()
    for name, study in TABLES.items():
        tasks = expand_tasks(study.tasks)
        seeds = sorted({p.seeds for p in [*study.figures.values(), *study.averages.values()] if p.seeds})
        entry = measured.get(name) or {}
        cells = entry.get("cells") or {}
        cost = "not measured (scripts/bench_reproduce.py)"
        if cells:
            lo = min(cells.items(), key=lambda kv: kv[1]["seconds"])
            hi = max(cells.items(), key=lambda kv: kv[1]["seconds"])
            cost = f"{_hours(lo[1]['seconds'])} ({lo[0]})" + ("" if lo[0] == hi[0] else
                                                              f" to {_hours(hi[1]['seconds'])} ({hi[0]})")
            machines.add(f"{entry.get('hardware', '?')}, {entry.get('date', '?')}: {entry.get('command', '?')}")
        rows.append({"table": name, "what": study.description, "columns": len(study.variants), "tasks": len(tasks),
                     "cells per seed": len(study.variants) * len(tasks),
                     "paper seeds": ", ".join(map(str, seeds)) or "-", "one cell (measured)": cost,
                     "measured": cells, **_table_total(study, tasks, cells)})
    return rows, sorted(machines)


def _table_total(study: Study, tasks: list[str], cells: dict) -> dict:
    """The predicted cost of the whole table at its paper's seed counts: per column, the mean of its measured
    cells (on the tasks measured) times its tasks times the seeds its paper ran; None where a column is not
    measured or its paper's seed count is not known."""
    total, measured_on, why = 0.0, set(), ""
    for v in study.variants:
        seeds = max((p.seeds for (label, _), p in study.figures.items() if label == v.label and p.seeds),
                    default=study.averages[v.label].seeds if v.label in study.averages else None)
        mine = {key.split(" on ", 1)[1]: c["seconds"] for key, c in cells.items() if key.split(" on ", 1)[0] == v.label}
        if not seeds:
            why = "the paper's seed count is not known"
            break
        if not mine:
            why = f"{v.label} not measured"
            break
        measured_on.update(mine)
        total += sum(mine.values()) / len(mine) * len(tasks) * seeds
    if why:
        return {"at paper seeds (predicted)": f"- ({why})", "total_seconds": None}
    return {"at paper seeds (predicted)": f"{_hours(total)} (each column's {', '.join(sorted(measured_on))} cell "
                                          f"for all {len(tasks)} tasks)", "total_seconds": round(total, 1)}


def _hours(seconds: float) -> str:
    if seconds >= 100 * 3600:
        return f"{seconds / 3600:,.0f} h"
    return f"{seconds / 3600:.1f} h" if seconds >= 5400 else f"{seconds / 60:.0f} min"
