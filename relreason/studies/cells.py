"""A study's cells: planned before anything trains, their state on disk, and the finished ones read back.

`plan_cells` builds every cell's resolved config (a bad key fails at once) and marks each cell
comparable with the paper or not: a recipe other than the column's protocol, a `--set` that changes
the protocol, a column or task the study declares as not the paper's protocol. A cell that is not
comparable is printed, marked, and never enters a verdict. `cell_state` says whether a cell has
results under the same configuration (`result_identity`: machine-only keys never count), a checkpoint
to resume, or another configuration's run; `collect` reads every finished cell into one result format.

Cell directories: an ablation keeps `OUT/<ablation>/<variant>/<task>/seed<k>/run`; a published table
keys cells by what they compute, `OUT/cells/<model>/<recipe>[+<delta>]/<task>/seed<k>/run`, so the tables
that share a configuration (the RT of Tables 13 to 19) share its cells.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from relreason.config import Config, build_config, config_from_dict, keys_of, merge, parse_overrides
from relreason.errors import RelreasonError
from relreason.protocol import MACHINE_KEYS, run_identity
from relreason.rundir import CELL_RUN, RunDir, read_results, read_run_record, seed_dir
from relreason.runtime import lock_holder
from relreason.studies.variants import Study, Variant
from relreason.tasks import task_entries


@dataclass(frozen=True)
class Cell:
    variant: Variant
    task: str
    seed: int
    directory: Path  # the cell; the run itself is directory / "run"
    config: Config
    why_not: str = ""  # non-empty: the cell is not the paper's protocol, and why
    study: str = ""  # the study that planned it (trackers group a study's cells by it)
    nar: "Cell | None" = None  # the NAR cell this (TransNAR) cell reads as model.nar, trained before it

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
        return _protocol_dir(out, variant, task, seed, recipe_label)
    return Path(out) / study.name / variant.label.replace(" ", "_") / task / seed_dir(seed)


def _protocol_dir(out: Path, variant: Variant, task: str, seed: int, recipe_label: str) -> Path:
    """OUT/cells/<model>/<recipe>[+<delta>]/<task>/seed<k>: keyed by what the cell computes."""
    setting = recipe_label + (f"+{delta_slug(variant.delta)}" if variant.delta else "")
    return Path(out) / "cells" / variant.model / setting / task / seed_dir(seed)


def result_identity(plain: dict) -> dict:
    """A stored config (Config.to_dict()) without the keys that do not change what a run computes
    (relreason.protocol.run_identity: device, threads, kernels..., but the seed stays): two runs with the same
    identity are the same cell, whichever machine and thread count computed them. A TransNAR's frozen NAR
    (model.nar_config) counts by its own identity: not by where its run lies, nor by the machine it ran on.

    The stored config is first resolved again by today's code, so a key added since the run was
    stored counts with its default (options are added with the default that keeps what ran before);
    a stored config today's code refuses is kept as it is (and so never equals a planned cell). The same
    holds for a TransNAR's NAR config (stored whole inside the TransNAR's)."""
    identity = run_identity(_resolved(plain))
    nar = (identity.get("model") or {}).get("nar_config")
    if isinstance(nar, dict) and isinstance(nar.get("config"), dict):  # a TransNAR: the NAR it reads counts by what
        identity["model"]["nar_config"] = run_identity(_resolved(nar["config"]))  # it computed, not where it is or ran
    return identity


def _resolved(plain: dict) -> dict:
    """A stored config (Config.to_dict()) as today's code resolves it (keys added since at their defaults), or
    as it is where today's code refuses it."""
    try:
        return config_from_dict(plain).to_dict()
    except (RelreasonError, KeyError, TypeError):
        return plain


def config_differences(a: dict, b: dict) -> list[str]:
    """The "section.key" names whose values differ between two config dicts (sections one level deep)."""
    out = []
    for section in sorted(set(a) | set(b)):
        x, y = a.get(section), b.get(section)
        if isinstance(x, dict) and isinstance(y, dict):
            out += [f"{section}.{k}" for k in sorted(set(x) | set(y)) if x.get(k) != y.get(k)]
        elif x != y:
            out.append(section)
    return out


def picks(v: Variant, models: list[str]) -> bool:
    """Whether `--models` keeps column `v`: it names the column's model (every column of that model) or its label
    (that column alone: TransNAR's study has two columns of model transnar, "transnar" and "text transformer")."""
    return v.model in models or v.label in models


def check_models(study: Study, models: list[str]) -> None:
    """`--models`: every name must be the model or the label of one of the study's columns."""
    unknown = [m for m in models if not any(picks(v, [m]) for v in study.variants)]
    if unknown:
        labels = [v.label for v in study.variants if v.label != v.model]
        raise RelreasonError(f"--models {','.join(unknown)}: not a column of {study.name}",
                             f"its models: {', '.join(dict.fromkeys(v.model for v in study.variants))}"
                             + (f"; its columns' labels: {', '.join(dict.fromkeys(labels))}" if labels else ""))


def plan_cells(study: Study, tasks: list[str], seeds: tuple[int, ...], recipe: str | None = None,
               out: Path = Path("ablations"),
               sets: list[str] | None = None, models: list[str] | None = None) -> list[Cell]:
    """Every cell's resolved config, built before anything trains (a bad key fails at once).

    `recipe` replaces every column's protocol recipe (the cells are then not comparable unless it
    resolves to the protocol's own recipe name); `models` keeps the columns of those models or labels. `seeds`: the
    seeds of every (column, task), each its cell `seed<k>`."""
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise RelreasonError(f"seeds {list(seeds)}: give distinct seeds >= 0, at least one", "e.g. --seeds 3")
    variants = list(study.variants)
    if models is not None:
        check_models(study, models)
        variants = [v for v in variants if picks(v, models)]
    text_sets, nar_sets = split_nar_sets(list(sets or []))
    reads_nar = any(v.nar is not None for v in variants)
    if nar_sets and not reads_nar:
        raise RelreasonError(f"--set {NAR_PREFIX}...: no column of {study.name} reads a NAR the study pre-trains",
                             f"drop the {NAR_PREFIX} prefix to set the study's own cells")
    user, nar_user = parse_overrides(text_sets), parse_overrides(nar_sets)
    nar_user = merge(_machine_keys(user), nar_user)  # where and how cells run (threads, device...): the NARs' too
    own = {"train.seed"} | ({"model.nar", "model.nar_config"} if reads_nar else set())
    clash = sorted((keys_of(user) | ({"train.seed"} if "seed" in user.get("train", {}) else set())) &
                   (study.varied_keys | own))
    clash += [NAR_PREFIX + "train.seed"] if "seed" in nar_user.get("train", {}) else []
    if clash:
        raise RelreasonError(f"--set {', '.join(clash)}: {study.name} sets {'it' if len(clash) == 1 else 'them'} "
                             "itself (the variants' keys, the seed of each cell and the NAR a column reads)",
                             "drop that --set (use --seeds for seeds)")
    cells: list[Cell] = []
    nars: dict[Path, Cell] = {}  # the NAR cells planned so far, shared by every column and table that reads them
    for task in tasks:
        for v in variants:
            # the column's protocol: its recipe and delta, nothing else (compared value by value, so a recipe
            # file or a --set that resolves to the protocol's values is the protocol; machine keys never count)
            protocol = build_config(v.model, task, v.recipe, {}, ablation=(study.name, v.delta))
            for seed in seeds:
                over = {s: dict(vals) for s, vals in user.items()}
                over.setdefault("train", {})["seed"] = seed
                nar = None
                if v.nar is not None:  # the cell reads the NAR cell of its algorithm and seed; so does its protocol
                    nar = _nar_cell(study, v.nar, task, seed, out, nar_user, nars)
                    over["model"] = {**over.get("model", {}), "nar": str(nar.run_dir), "nar_config": nar_record(nar)}
                    protocol = build_config(v.model, task, v.recipe,
                                            {"model": protocol_nar(study, v, task, seed, str(nar.run_dir))},
                                            ablation=(study.name, v.delta))
                want = result_identity(protocol.to_dict())
                cfg = build_config(v.model, task, recipe if recipe is not None else v.recipe, over,
                                   ablation=(study.name, v.delta))
                why = [v.caveat] if v.caveat else []
                got = result_identity(cfg.to_dict())
                want["train"]["seed"] = seed
                if cfg.recipe != protocol.recipe:
                    why.append(f"recipe {cfg.recipe}, not the protocol's {protocol.recipe}")
                elif got != want:
                    why.append(_differ(got, want, protocol.recipe))
                if task in study.not_comparable:
                    why.append(study.not_comparable[task])
                cells.append(Cell(v, task, seed, cell_dir(out, study, v, task, seed, cfg.recipe), cfg, "; ".join(why),
                                  study.name, nar))
    return cells


def _differ(got: dict, want: dict, recipe: str) -> str:
    keys = config_differences(got, want)
    return f"{', '.join(keys[:4])}{', ...' if len(keys) > 4 else ''} differ{'s' * (len(keys) == 1)} from the " \
           f"protocol ({recipe})"


# --set nar.SECTION.KEY=VALUE: a setting of the NAR cells a study pre-trains for its TransNAR columns
NAR_PREFIX = "nar."


def _machine_keys(tree: dict) -> dict:
    """The `--set` tree's keys that say where and how a cell runs, not what it computes (relreason.protocol's
    MACHINE_KEYS): a study's NAR cells run on the same machine settings as its own."""
    keep = {tuple(k.split(".")) for k in MACHINE_KEYS}
    out: dict = {}
    for section, values in tree.items():
        for key, value in values.items():
            if (section, key) in keep:
                out.setdefault(section, {})[key] = value
    return out


def split_nar_sets(sets: list[str]) -> tuple[list[str], list[str]]:
    """The `--set` items of a study's own cells, and those (prefix NAR_PREFIX removed) of its NAR cells."""
    own = [s for s in sets if not s.strip().startswith(NAR_PREFIX)]
    return own, [s.strip()[len(NAR_PREFIX):] for s in sets if s.strip().startswith(NAR_PREFIX)]


def _nar_cell(study: Study, v: Variant, task: str, seed: int, out: Path, sets: dict, planned: dict) -> Cell:
    """The NAR cell (column `v`: a NAR model and its recipe) that a TransNAR cell on text task `task` reads:
    `v` trained on the task's algorithm with the same seed, under OUT/cells/<model>/<recipe>/<algorithm>/seed<k>
    (the protocol layout: every study of the same NAR configuration shares it). `sets`: the NAR cells' --set
    (a cell under them is not the protocol); `planned`: the NAR cells planned so far, by directory."""
    entries = task_entries(task)
    if len(entries) != 1 or entries[0].algorithm is None:
        raise RelreasonError(f"{study.name} pre-trains one NAR per algorithm; {task} is not one algorithm's text task",
                             "give text tasks of one algorithm each, e.g. --tasks text:insertion_sort,text:bfs")
    algorithm = entries[0].algorithm
    over = {s: dict(vals) for s, vals in sets.items()}
    over.setdefault("train", {})["seed"] = seed
    cfg = build_config(v.model, algorithm, v.recipe, over, ablation=(study.name, v.delta))
    directory = _protocol_dir(out, v, algorithm, seed, cfg.recipe)
    if directory not in planned:
        protocol = build_config(v.model, algorithm, v.recipe, {"train": {"seed": seed}}, ablation=(study.name, v.delta))
        got, want = result_identity(cfg.to_dict()), result_identity(protocol.to_dict())
        why = "" if got == want else _differ(got, want, protocol.recipe)
        planned[directory] = Cell(v, algorithm, seed, directory, cfg, why, study.name)
    return planned[directory]


def protocol_nar(study: Study, v: Variant, task: str, seed: int, run: str) -> dict:
    """The model section (nar, nar_config) of column `v`'s protocol cell on `task` with `seed` that reads the NAR
    run at `run`: that NAR at its column's protocol (the NAR cells' --set not applied). A cell whose NAR was
    trained otherwise differs from it in model.nar_config, and is not the protocol."""
    planned = _nar_cell(study, v.nar, task, seed, Path(), {}, {})
    return {"nar": run, "nar_config": {"run": run, "checkpoint": str(RunDir(Path(run)).best.path),
                                       "config": planned.config.to_dict()}}


def nar_record(nar: Cell) -> dict:
    """The model.nar_config of a cell that reads the NAR cell `nar` (relreason.models.text.read_nar_record's
    form): once `nar` is done, the record read from its checkpoint; before, the one it will store (a run
    stores the config it was planned with), so the reading cell's config is the same either way."""
    from relreason.models.text import read_nar_record  # CLI start-up: torch loads on use

    if cell_state(nar) == "done":
        return read_nar_record(str(nar.run_dir))
    return {"run": str(nar.run_dir), "checkpoint": str(RunDir(nar.run_dir).best.path), "config": nar.config.to_dict()}


def nar_cells(cells: list[Cell]) -> list[Cell]:
    """The NAR cells that `cells` read, each once, in plan order."""
    return list({c.nar.directory: c.nar for c in cells if c.nar is not None}.values())


def cell_state(cell: Cell) -> str:
    """"done" (results under the same config), "stale" (results or a checkpoint under another config, or
    made with a plugin installed here at another version), "partial" (a checkpoint to resume under the same
    config) or "new". Configs are compared by `result_identity`: a cell computed with other threads or on
    another device is the same cell."""
    from relreason.train.checkpoint import plugin_changes  # CLI start-up: torch loads on use
    from relreason.train.claim import has_progress  # CLI start-up: torch loads on use
    from relreason.train.resume import stored_config  # CLI start-up: torch loads on use

    want = result_identity(cell.config.to_dict())
    files = RunDir(cell.run_dir)
    if files.results.is_file():
        try:
            data = read_results(files.results)
        except RelreasonError:
            return "stale"
        return "done" if result_identity(data.config) == want and not plugin_changes(data.plugins) else "stale"
    if files.last.trainer_state.exists():
        try:
            same = result_identity(stored_config(cell.run_dir, warn=False).to_dict()) == want
            return "partial" if same and not plugin_changes(read_run_record(cell.run_dir).plugins) else "stale"
        except RelreasonError:
            return "stale"
    return "stale" if has_progress(cell.run_dir) else "new"


def is_held(c: Cell) -> bool:
    """Whether another process holds the cell's run lock (it trains the cell there)."""
    return lock_holder(c.run_dir) is not None


def seed_groups(cells: list[Cell], batch: int) -> list[list[Cell]]:
    """The planned cells as seed groups: the cells of one (column, task), in seed order, cut into groups of
    `batch` consecutive seeds (the last may be smaller); `batch` 1 gives one cell per group. The groups
    depend on the plan alone, not on what is on disk, so every shard and every later call forms the same."""
    if batch < 1:
        raise RelreasonError(f"--seed-batch {batch} must be at least 1", "e.g. --seed-batch 4, or 1 to train each "
                                                                         "cell alone")
    groups: list[list[Cell]] = []
    for c in cells:
        last = groups[-1] if groups else None
        if last and len(last) < batch and (last[0].variant, last[0].task) == (c.variant, c.task):
            last.append(c)
        else:
            groups.append([c])
    return groups


def shard_cells(cells: list, shard: tuple[int, int] | None) -> list:
    """The units of shard (i, k), i in 1..k: every k-th unit starting at the i-th (index % k == i - 1). The
    sweep's units are its seed groups (`seed_groups`; with --seed-batch 1, its cells)."""
    if shard is None:
        return list(cells)
    i, k = shard
    if k < 1 or not 1 <= i <= k:
        raise RelreasonError(f"--shard {i}/{k}: the shard number must be in 1..{k}",
                             "e.g. --shard 1/4 ... --shard 4/4 (a SLURM array: --array=1-4 and "
                             "--shard $SLURM_ARRAY_TASK_ID/4)")
    return [c for j, c in enumerate(cells) if j % k == i - 1]


def parse_shard(text: str) -> tuple[int, int]:
    """"I/K" -> (I, K) (`shard_cells` checks the range)."""
    i, sep, k = text.partition("/")
    try:
        return int(i), int(k) if sep else int("")
    except ValueError:
        raise RelreasonError(f"--shard {text!r} is not I/K", "e.g. --shard 1/4 ... --shard 4/4 (a SLURM array: "
                             "--array=1-4 and --shard $SLURM_ARRAY_TASK_ID/4)") from None


def cell_label(c: Cell) -> str:
    return f"{c.variant.label} / {c.task} / seed {c.seed}"


def committed_path(c: Cell, out: Path, committed: Path | None) -> Path | None:
    """Where the cell's result would be committed under `committed` (COMMITTED/cells/<model>/<setting>/<task>/
    seed<k>.json); None without `committed` or for a cell outside `out`/cells."""
    if committed is None:
        return None
    try:
        rel = c.directory.relative_to(Path(out) / "cells")
    except ValueError:
        return None
    return Path(committed) / "cells" / rel.parent / f"{rel.name}.json"


def committed_result(c: Cell, out: Path, committed: Path | None):
    """The cell's finished result committed under `committed` (the directory `relreason results` writes:
    COMMITTED/cells/<model>/<setting>/<task>/seed<k>.json), when it was computed under the cell's config
    (`result_identity`) with the plugins installed here and records the code that made it (a cell without
    one cannot be verified: RESULTS.md keeps it out of every table, and it is trained again); else None. Only a
    table's cells have that layout."""
    from relreason.train.checkpoint import plugin_changes  # CLI start-up: torch loads on use

    path = committed_path(c, out, committed)
    if path is None or not path.is_file():
        return None
    try:
        data = read_results(path)
    except RelreasonError:
        return None
    same = result_identity(data.config) == result_identity(c.config.to_dict()) and not plugin_changes(data.plugins)
    return data if same and data.code else None


def cell_record(c: Cell, data=None, run: Path | None = None) -> dict:
    """A finished cell as the study's result files hold it: what ran, how it scored, on what hardware
    and how long, and whether it is comparable with the paper. `data`, `run`: its results read elsewhere
    (a committed result file) and where."""
    data = read_results(c.run_dir) if data is None else data
    return {"variant": c.variant.label, "model": c.variant.model, "task": c.task, "seed": c.seed,
            "score": data.test.score, "best_val": data.best_val, "examples": data.examples,
            "recipe": data.recipe, "comparable": c.comparable, "why_not": c.why_not,
            "seconds": data.seconds, "hardware": data.hardware or [],
            "processes": 1 if data.processes is None else data.processes, "command": data.command,
            "relreason": data.relreason, "run": str(c.run_dir if run is None else run), "per_task": data.per_task,
            "config": data.config}


def collect(cells: list[Cell], out: Path | None = None, committed: Path | None = None) -> tuple[list[dict], list[str]]:
    """(records of the finished cells, labels of the missing ones), over the whole sweep; a cell not finished
    under `out` but committed under `committed` (`committed_result`) is read from there."""
    records, missing = [], []
    for c in cells:
        kept = committed_result(c, out, committed) if committed is not None and cell_state(c) != "done" else None
        if kept is not None:
            records.append(cell_record(c, kept, Path(committed) / "cells" / c.directory.relative_to(Path(out) / "cells")))
            continue
        if cell_state(c) != "done":
            missing.append(cell_label(c))
            continue
        records.append(cell_record(c))
    return records, missing
