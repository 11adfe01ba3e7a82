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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from relreason.config import to_plain
from relreason.errors import RelreasonError
from relreason.rundir import read_object
from relreason.runs.stats import STD_KIND, check_margin
from relreason.runtime import cli_command, cpu_kernels, kernels_hint
from relreason.studies.ablations import ABLATIONS
from relreason.studies.cells import (cell_label, cell_state, collect, committed_path, committed_result, delta_slug,
                                     is_held, nar_cells, parse_shard, plan_cells, seed_groups, shard_cells)
from relreason.studies.costs import costs_file, estimate_cells, hours, read_costs  # noqa: F401 (costs_file: scripts)
from relreason.studies.launch import Launch, cell_status, launch_for
from relreason.studies.report import write_tables
from relreason.studies.results import device_kind, first_kernels, first_torch, other_torch, remade_difference
from relreason.studies.tables import TABLES
from relreason.studies.training import pack_size, run_cells
from relreason.studies.variants import Study
from relreason.tasks import TASKS, expand_tasks


@dataclass(frozen=True)
class SweepOptions:
    """What a sweep is asked for: the options `ablate` and `reproduce` share, built once by the command from
    its command line and passed down to `run_ablation` / `run_table` / `run_study` (and `sweep_status`).
    Text options are kept as typed (`run_study` parses and checks them, each with a one-line error)."""

    tasks: str | None = None  # a comma list of tasks or groups; None: the study's own
    seeds: tuple[int, ...] = (0, 1, 2)  # the seeds of every (column, task), each its cell seed<k>
    recipe: str | None = None  # replaces every column's protocol recipe (its cells are then not comparable)
    out: Path = Path("ablations")  # where cells, tables and job files are written
    sets: tuple[str, ...] = ()  # --set items, on every cell
    models: str | None = None  # a comma list of the study's models (its columns); None: every column
    train: bool = True  # False: train nothing, read back the cells finished so far
    rerun_stale: bool = False  # move cells computed under another configuration aside and train them again
    jobs: int = 1  # worker processes, each training one seed group at a time
    shard: str | None = None  # "I/K": this call trains seed groups I, I+K, ... (1-based)
    seed_batch: str | int | None = "auto"  # seed group size: "auto" (or None: `default_seed_batch`) or K >= 1
    seed_strategy: str = "auto"  # how a seed group shares its step (relreason.train.seed_group.Strategy)
    committed: Path | None = None  # a `relreason results` directory whose finished cells count as done
    margin: float | None = None  # the verdicts' equivalence margin instead of the study's own
    partial: bool = False  # ablate: write the tables while cells are missing (results.partial.*)
    launcher: str = "local"  # local, slurm or local-submitit (relreason.studies.launch)
    slurm: str | None = None  # "key=value,..." of each job (relreason.studies.launch.parse_slurm)
    wait: bool = False  # with a submitit launcher: wait for the jobs to end
    pack: str = "auto"  # auto | on | off: cells in packs of any column and task, one process each (auto: none yet)
    show_progress: bool = field(default=True, compare=False)  # progress bars on stderr


def run_study(study: Study, options: SweepOptions = SweepOptions(), log: Callable[[str], None] = print) -> dict:
    """Trains the cells that have no results yet (unless `options.train` is False) and reads back every
    finished one; returns the study's result: {"study", "description", "variants", "tasks", "seeds" (how
    many), "seed_list", "cells" (records of the finished ones), "missing", "planned", "figures", "paper_line",
    ...}.

    `options.jobs`: cells train in that many worker processes (torch threads divided between them unless
    train.threads is set). `options.shard` "I/K": this call trains only the seed groups j with j % K == I - 1
    (with seed_batch 1 the groups are the cells), so K machines (a SLURM array) can share one sweep
    directory. Either way a cell is claimed with its run lock; a cell whose lock another process holds is
    being trained there and is skipped. `options.launcher` other than local (relreason.studies.launch): the
    groups to train are submitted as a job array instead (one element per group; `slurm`: "key=value,...";
    `wait`: until their jobs end; job files in OUT/jobs/<study>), their jobs listed under "jobs" in the result.

    `options.seed_batch` (auto: `default_seed_batch`): the cells of one (column, task) train as seed groups of
    up to that many seeds (relreason.studies.cells.seed_groups, relreason.train.seed_group, `seed_strategy`),
    each cell's run directory as if trained alone; the units of `jobs`, `shard` and the launcher are then
    those groups.

    `options.committed` (a `relreason results` directory): a cell whose finished result is committed there
    under the cell's config (relreason.studies.cells.committed_result) counts as done: it is not trained again
    (its run directory under `out` is left as it is), and its record is read from there.

    `options.pack` (auto | on | off, relreason.studies.training.pack_size): the cells train in packs of cells of
    any column and task, one process each (relreason.train.pack), instead of seed groups; auto packs nowhere yet.

    A column that reads a NAR the study pre-trains (`Variant.nar`, TransNAR) has its NAR cells (one per
    algorithm and seed, relreason.studies.cells.nar_cells) trained first, by the same rules; its own cells
    are then planned again to read them, and a cell whose NAR is not done (held by another process, or
    submitted without --wait) waits for a later call."""
    o = options
    if o.jobs < 1:
        raise RelreasonError(f"--jobs {o.jobs} must be at least 1", "e.g. --jobs 2")
    tasks = expand_tasks(o.tasks if o.tasks is not None else study.tasks)
    shard = parse_shard(o.shard) if o.shard is not None else None
    launch = launch_for(o.launcher, o.slurm, o.wait, Path(o.out) / "jobs" / study.name, o.jobs, o.shard,
                        cli_command())
    out, committed = o.out, o.committed
    cells = plan_cells(study, tasks, o.seeds, o.recipe, out, list(o.sets), parse_models(o.models))
    strategy = check_seed_strategy(o.seed_strategy)
    seed_batch = parse_seed_batch(o.seed_batch)
    batch = default_seed_batch(cells, len(o.seeds)) if seed_batch is None else seed_batch
    groups = seed_groups(cells, batch)
    if launch is not None and pack_size(o.pack, cells):
        raise RelreasonError("--pack trains its cells in this process; a launcher submits them as jobs",
                             "give --pack off with --launcher, or train here (--launcher local)")
    submitted: list[dict] = []
    if o.train:
        mine_groups = shard_cells(groups, shard)
        nars = nar_cells([c for g in mine_groups for c in g])
        if nars:  # first the NARs that this shard's TransNAR cells read, then those cells, planned again to read them
            # a committed NAR whose checkpoint is not here (a fresh checkout: weights are not committed) is trained
            # again when a cell still to train reads it, and must then score as committed
            def to_train(c) -> bool:
                return cell_state(c) != "done" and committed_result(c, out, committed) is None

            to_read = {c.nar.directory for g in mine_groups for c in g if c.nar is not None and to_train(c)}
            remade = [n for n in nars if n.directory in to_read and cell_state(n) != "done"
                      and committed_result(n, out, committed) is not None]
            if launch is None:
                _check_remade_start(remade, out, committed)
            submitted += _train_groups(study, seed_groups(nars, batch), o, strategy, launch, log,
                                       remake={n.directory for n in remade})
            if launch is None:
                _check_remade(remade, out, committed)
            cells = plan_cells(study, tasks, o.seeds, o.recipe, out, list(o.sets), parse_models(o.models))
            mine_groups = shard_cells(seed_groups(cells, batch), shard)
            waiting = [c for g in mine_groups for c in g if c.nar is not None and cell_state(c.nar) != "done"
                       and to_train(c)]  # a committed cell needs no NAR
            if waiting:
                log(f"{len(waiting)} cell(s) wait for their NAR, not trained yet ({cell_label(waiting[0])} reads "
                    f"{waiting[0].nar.run_dir}): run the same command again once it is trained")
            held_back = {c.directory for c in waiting}
            mine_groups = [g for g in ([c for c in g if c.directory not in held_back] for g in mine_groups) if g]
        submitted += _train_groups(study, mine_groups, o, strategy, launch, log)
    records, missing = collect(cells, out, committed)
    whole = set(tasks) == set(expand_tasks(study.tasks))
    first = cells[0].config
    variants = list(dict.fromkeys(c.variant.label for c in cells))
    return {"study": study.name, "ablation": study.name, "description": study.description, "variants": variants,
            "tasks": tasks, "seeds": len(o.seeds), "seed_list": list(o.seeds), "cells": records, "missing": missing,
            "planned": len(cells),
            "recipe": first.recipe, "train_examples": first.train.train_examples,
            "not_comparable": sorted({c.why_not for c in cells if c.why_not}),
            "figures": [{"variant": v, "task": t, **to_plain(p)} for (v, t), p in study.figures.items()
                        if v in variants and t in tasks],
            # the published averages are over the study's own tasks: beside ours only when we ran those
            "averages": [{"variant": v, **to_plain(p)} for v, p in study.averages.items() if v in variants and whole],
            "paper": [{"variant": v, "value": p.mean, "source": study.source} for v, p in study.averages.items()
                      if v in variants and whole],
            "paper_line": study.paper_line(), "paper_scope": study.paper_scope, "source": study.source,
            "note": study.note, "std": STD_KIND, "lower_is_better": _lower_is_better(tasks),
            "margin": study.margin if o.margin is None else o.margin,
            **({"jobs": submitted} if launch is not None else {})}


def _check_remade_start(remade: list, out: Path, committed: Path | None) -> None:
    """Raises before any training where a NAR cell in `remade` (committed, to train again here for its checkpoint)
    would start from other weights than it did, or train on this CPU under other kernels than its first session
    recorded: a CPU trajectory is bit-exact only under the same kernels (scripts/cpu_kernels.py), so
    _check_remade would refuse it after the training. The start: where the record has the digest of its initial
    weights, this process's draw from the cell's seed is compared with it (any torch release that draws the same
    weights will do); a record without one is refused when it was made under another torch release (2.11.0 and
    2.13.0 draw other initial weights from one seed)."""
    from relreason.models.build import resolve_device  # CLI start-up: torch loads on use
    from relreason.train.workloads import initial_weights_digest  # CLI start-up: torch loads on use

    here = cpu_kernels()
    for n in remade:
        record = read_object(committed_path(n, out, committed))
        release = first_torch(record.get("hardware") or [])
        stored = record.get("init_weights")
        must = f"the NAR cell {n.run_dir} must be trained again (its checkpoint is not here) and score as committed"
        if stored is not None and n.config.train.init is None:
            now = initial_weights_digest(n.config)
            if now != stored:
                raise RelreasonError(f"{must}, but it started from initial weights {stored} and this process draws "
                                     f"{now} from its seed: it would start elsewhere",
                                     f"run the same command under the torch release that made it ({release}): "
                                     f"scripts/torch_release_venv.sh {release} makes a virtualenv with it"
                                     if release is not None else "run the same command under the torch release "
                                     "that made it (its record names none)")
        else:
            why = other_torch(release)  # the initial weights are drawn on the CPU, whatever the device
            if why is not None:
                raise RelreasonError(f"{must}, but it was {why}",
                                     f"run the same command under torch {release}: scripts/torch_release_venv.sh "
                                     f"{release} makes a virtualenv with it")
        made = first_kernels(record.get("hardware") or [])
        if made is None or made == here or device_kind(record.get("hardware") or []) != "cpu" or \
                resolve_device(n.config.train.device).type != "cpu":
            continue  # kernels not recorded (the check after training decides), the same, or a GPU on either side
        raise RelreasonError(f"{must}, but it was made with {made} CPU kernels and this process computes with {here}: "
                             "it would train otherwise", f"run the same command again: {kernels_hint(made)}")


def _check_remade(remade: list, out: Path, committed: Path | None) -> None:
    """Raises unless every NAR cell in `remade` (committed, and trained again here for its checkpoint) that
    finished scores as its committed result (relreason.studies.results.remade_difference)."""
    for n in remade:
        if cell_state(n) != "done":
            continue
        record, now = read_object(committed_path(n, out, committed)), read_object(n.run_dir / "results.json")
        across = device_kind(record.get("hardware") or []) != device_kind(now.get("hardware") or [])
        difference = remade_difference(record, now, across)
        if difference is not None:
            raise RelreasonError(f"the NAR cell {n.run_dir}, trained again because its checkpoint was not here, "
                                 f"differs from its result committed under {committed}: {difference}",
                                 "the cells that read it would read another NAR than the committed one; find out "
                                 "why it trains otherwise (another torch or machine?) before training them")


def _train_groups(study: Study, mine_groups: list[list], o: SweepOptions, strategy: str, launch: Launch | None,
                  log: Callable[[str], None], remake: set[Path] = frozenset()) -> list[dict]:
    """Trains (or submits, with `launch`) the seed groups `mine_groups` of `study`: stale cells refused unless
    --rerun-stale (then moved aside), cells committed under --committed kept (except those whose directory is
    in `remake`, trained again), finished ones skipped. Returns the jobs submitted (none without `launch`)."""
    out, committed = o.out, o.committed
    mine = [c for g in mine_groups for c in g]
    states = {c.directory: cell_state(c) for c in mine}
    stale = [c for c in mine if states[c.directory] == "stale" and not is_held(c)
             and committed_result(c, out, committed) is None]
    if stale and not o.rerun_stale:
        raise RelreasonError(f"{len(stale)} cell(s) were computed under another configuration or another "
                             f"version of a plugin (e.g. {stale[0].run_dir}); their results would mix budgets, "
                             "settings or code",
                             "pass --rerun-stale to move them aside (as run.stale-<time>) and train them again")
    for c in stale:
        c.run_dir.rename(c.directory / f"run.stale-{time.strftime('%Y%m%d-%H%M%S')}-{c.seed}")
        states[c.directory] = "new"
    kept = [c for c in mine if states[c.directory] != "done" and c.directory not in remake
            and committed_result(c, out, committed) is not None]
    again = [c for c in mine if states[c.directory] != "done" and c.directory in remake]
    if again:
        log(f"{len(again)} cell(s) committed under {committed} trained again: cells still to train read their "
            f"checkpoints, which are not here ({', '.join(cell_label(c) for c in again[:3])}"
            f"{', ...' if len(again) > 3 else ''})")
    if kept:
        log(f"{len(kept)} cell(s) already committed under {committed}: not trained again "
            f"({', '.join(cell_label(c) for c in kept[:3])}{', ...' if len(kept) > 3 else ''})")
        for c in kept:
            states[c.directory] = "done"
    todo = [g for g in ([c for c in g if states[c.directory] not in ("done", "stale")] for g in mine_groups) if g]
    if todo:
        log(estimate_cells([c for g in todo for c in g]).line(
            study.name, _device_text(todo[0][0]) if launch is None else f"{o.launcher} jobs"))
    if launch is not None:
        return launch.submit(study.name, todo, log, strategy)
    try:
        run_cells(study.name, todo, len(mine), o.jobs, o.show_progress, log, strategy, pack_size(o.pack, mine))
    except KeyboardInterrupt:
        log(f"{study.name}: interrupted; {resume_text()}")
        raise
    return []


def resume_text() -> str:
    """How to resume the sweep this process runs: its own command again (finished cells are kept, partial
    ones resume from their checkpoint)."""
    command = cli_command()
    if command is None:
        return "run the same sweep again (the same options) to resume it"
    return f"resume the study with the same command: {command}"


def _device_text(cell) -> str:
    """Where the cells of this process train, in words: "cpu (AVX2 kernels)", or "NVIDIA H100 80GB HBM3 (cuda:0)"."""
    from relreason.models.build import resolve_device  # CLI start-up: torch loads on use

    device = resolve_device(cell.config.train.device)
    if device.type == "cuda":
        import torch  # CLI start-up: torch loads on use

        return f"{torch.cuda.get_device_name(device.index or 0)} ({device})"
    return f"{device} ({cpu_kernels()} kernels)" if device.type == "cpu" else str(device)


SEED_BATCH_MAX = 4  # the group size of the default on an accelerator (and of the ratios in costs.json)


def default_seed_batch(cells: list, seeds: int) -> int:
    """`--seed-batch auto`: the sweep's seed count up to SEED_BATCH_MAX where its cells train on an accelerator
    (one vmapped step for the group), 1 on CPU, where a group measured no faster than its cells one after
    another (the loop, ~1.0x; vmap slower: scripts/bench_seeds.py, in costs.json) and would hold its K models
    at once and finish none of its cells before the last; also 1 for cells captured as CUDA graphs
    (train.cuda_graph): on the H200 a captured single run outran every uncaptured group (results/gpu), and
    captured seed groups are not measured yet, so the default keeps what was measured (`--pack` packs them)."""
    from relreason.models.build import resolve_device  # CLI start-up: torch loads on use

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
    from relreason.train.seed_group import Strategy  # CLI start-up: torch loads on use

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


def run_ablation(name: str, options: SweepOptions = SweepOptions(), log: Callable[[str], None] = print) -> Sweep:
    """`relreason ablate`: the ablation `name` swept by `run_study` on `options` (tasks None: the ablation's
    own), its tables written under OUT/<name> once every cell has results (while some are missing, only
    with `options.partial`, as results.partial.*)."""
    study = ABLATIONS.get(name)
    _check_sweep(options, "ablate")
    result = run_study(study, options, log)
    base = Path(options.out) / name
    stem = write_tables(result, base) if options.partial or not result["missing"] else None
    return Sweep(study, result, base, stem)


def run_table(table: str, options: SweepOptions = SweepOptions(out=Path("reproduce")),
              log: Callable[[str], None] = print) -> Sweep:
    """`relreason reproduce`: the published table `table` swept by `run_study` on `options` (tasks None: the
    table's own; models None: every column; train False: only read back), its tables written under
    OUT/tables/<table>, partial ones while cells are missing."""
    study = TABLES.get(table)
    _check_sweep(options, "reproduce")
    result = run_study(study, options, log)
    base = Path(options.out) / "tables" / table
    return Sweep(study, result, base, write_tables(result, base))


def _check_sweep(options: SweepOptions, command: str) -> None:
    """What a sweep checks before it plans: the margin, and that it does not run under torchrun."""
    if options.margin is not None:
        check_margin(options.margin)
    _not_under_torchrun(command)


def parse_models(models: str | None) -> list[str] | None:
    """`--models "rt, mpnn"` -> ["rt", "mpnn"] (None: every column); a list naming nothing is an error."""
    model_list = [m.strip() for m in models.split(",") if m.strip()] if models is not None else None
    if model_list is not None and not model_list:
        raise RelreasonError(f"--models {models!r} names no model", "e.g. --models rt,mpnn")
    return model_list


def sweep_status(kind: str, name: str, options: SweepOptions) -> list[dict]:
    """`reproduce TABLE --status` (`kind` "table") and `ablate NAME --status` (`kind` "ablation"): each planned
    cell's status (relreason.studies.launch.cell_status: done, running with its job, partial, missing, stale)."""
    study = TABLES.get(name) if kind == "table" else ABLATIONS.get(name)
    o = options
    cells = plan_cells(study, expand_tasks(o.tasks if o.tasks is not None else study.tasks), o.seeds, o.recipe,
                       o.out, list(o.sets), parse_models(o.models))
    return [cell_status(c) for c in [*nar_cells(cells), *cells]]


def ablation_costs(name: str | None, options: SweepOptions = SweepOptions()) -> list[dict]:
    """`relreason ablate --list`: one row per ablation (or the ablation `name` alone): its variants, tasks
    (`options.tasks`, default its own) and seeds (`options.seeds`), its cells, and their predicted cost one
    after another from the measured cells (relreason.studies.costs; None where none is measured)."""
    studies = [ABLATIONS.get(name)] if name is not None else [ABLATIONS.get(n) for n in ABLATIONS.names()]
    rows = []
    for study in studies:
        o = options
        tasks = expand_tasks(o.tasks if o.tasks is not None else study.tasks)
        row = {"ablation": study.name, "what": study.description, "variants": len(study.variants),
               "tasks": len(tasks), "seeds": len(o.seeds), "cells": len(study.variants) * len(tasks) * len(o.seeds)}
        try:
            one_seed = plan_cells(study, tasks, (0,), o.recipe, o.out, list(o.sets))  # the seeds cost alike
        except RelreasonError as e:
            if name is not None:
                raise
            rows.append({**row, "predicted_seconds": None, "measured_on": [],
                         "predicted": f"- (not planned on its tasks: {e.message})"})
            continue
        estimate = estimate_cells(one_seed * len(o.seeds))
        rows.append({**row, "predicted_seconds": None if estimate.unmeasured_cells else round(estimate.seconds, 1),
                     "measured_on": list(estimate.machines), "predicted": estimate.short()})
    return rows


def table_costs(costs: Path | None = None, table: str | None = None, tasks: str | None = None,
                seeds: int | None = None) -> tuple[list[dict], list[str]]:
    """`relreason reproduce --list`: one row per table (its cells per seed, the papers' seed counts, the
    measured cost of its cheapest and dearest cell from the `costs` file of scripts/bench_reproduce.py,
    by default the one shipped with relreason, the whole table's at its paper's seed counts, and the same
    trained in seed groups of up to SEED_BATCH_MAX seeds from the group ratios scripts/bench_seeds.py
    recorded there), and the machines the costs and ratios were measured on.

    `table` (with `tasks`, a comma list or group, and `seeds`): that table alone, on those tasks (default:
    its own) at that seed count for every column (default: its paper's)."""
    measured = read_costs(costs)
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
            cost = f"{hours(lo[1]['seconds'])} ({lo[0]})" + ("" if lo[0] == hi[0] else
                                                              f" to {hours(hi[1]['seconds'])} ({hi[0]})")
            machines.add(f"{entry.get('hardware', '?')}, {entry.get('date', '?')}: {entry.get('command', '?')}")
        rows.append({"table": name, "what": study.description, "columns": len(study.variants),
                     "tasks": len(table_tasks),
                     "cells per seed": len(study.variants) * len(table_tasks),
                     "paper seeds": ", ".join(map(str, paper)) or (f"- (study: {study.seeds})" if study.seeds else "-"),
                     "seeds": seeds,
                     "one cell (measured)": cost, "measured": cells,
                     **_table_total(study, table_tasks, cells, ratios, seeds if table is not None else None)})
    return rows, sorted(machines)


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
        n = seeds or study.column_seeds(v.label)
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
    out = {"at paper seeds (predicted)": f"{hours(total)} (each column's {', '.join(sorted(measured_on))} cell "
                                         f"for all {len(tasks)} tasks)", "total_seconds": round(total, 1)}
    if why_grouped:
        return {**out, "in seed groups (predicted)": f"- ({why_grouped})", "grouped_seconds": None}
    text = ", ".join(f"{s} {hours(t)} ({total / t:.2f}x)" for s, t in grouped.items())
    return {**out, "in seed groups (predicted)": text,
            "grouped_seconds": {s: round(t, 1) for s, t in grouped.items()}}

