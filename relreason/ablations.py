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
                 rerun_stale: bool = False) -> dict:
    """Runs (or reads back) every cell; returns {"ablation", "variants", "tasks", "cells", "paper"}."""
    from relreason.runtime import progress
    from relreason.train import run

    abl = ABLATIONS.get(name)
    cells = plan_cells(name, tasks, seeds, recipe, out, sets)
    states = {c.directory: cell_state(c) for c in cells}
    stale = [c for c in cells if states[c.directory] == "stale"]
    if stale and not rerun_stale:
        raise RelreasonError(f"{len(stale)} cell(s) were computed under another configuration "
                             f"(e.g. {stale[0].run_dir}); their results would mix budgets or settings",
                             "pass --rerun-stale to move them aside (as run.stale-<time>) and train them again")
    for c in stale:
        c.run_dir.rename(c.directory / f"run.stale-{time.strftime('%Y%m%d-%H%M%S')}-{c.seed}")
        states[c.directory] = "new"
    todo = sum(1 for s in states.values() if s != "done")
    collected = []
    with progress(len(cells), f"ablate {name}", unit="cell", disable=not show_progress,
                  initial=len(cells) - todo) as bar:
        for c in cells:
            if states[c.directory] != "done":
                resume = states[c.directory] == "partial"
                log(f"{name}: {c.variant.label} / {c.task} / seed {c.seed}" + (" (resuming)" if resume else ""))
                res = run(c.config, out=c.directory, name="run", resume=resume, show_progress=show_progress)
                if res.interrupted:
                    raise KeyboardInterrupt
                bar.update(1)
            data = json.loads((c.run_dir / "results.json").read_text())
            collected.append({"variant": c.variant.label, "task": c.task, "seed": c.seed,
                              "score": data["test"]["score"], "best_val": data["best_val"],
                              "examples": data["examples"], "recipe": data.get("recipe")})
    first = cells[0].config
    return {"ablation": name, "description": abl.description, "variants": [v.label for v in abl.variants],
            "tasks": tasks, "seeds": seeds, "cells": collected, "recipe": first.recipe,
            "train_examples": first.train.train_examples,
            "paper": [{"variant": p.variant, "value": p.value, "source": p.source} for p in abl.paper],
            "paper_line": abl.paper_line(), "lower_is_better": _lower_is_better(tasks)}


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
    Scores in percent when `percent` (CLRS scores; relative losses are kept as they are)."""
    scale = 100.0 if percent and not result.get("lower_is_better") else 1.0
    variants, tasks = result["variants"], result["tasks"]
    by: dict[tuple[str, str], list[float]] = {}
    for c in result["cells"]:
        by.setdefault((c["task"], c["variant"]), []).append(c["score"] * scale)
    columns = ["task"] + variants + [f"diff ({v})" for v in variants[1:]]
    rows, means = [], {v: [] for v in variants}
    for task in tasks:
        row = {"task": task}
        for v in variants:
            m, s = _mean_std(by[(task, v)])
            means[v].append(m)
            row[v] = f"{m:.2f} ± {s:.2f}"
        for v in variants[1:]:
            row[f"diff ({v})"] = f"{means[v][-1] - means[variants[0]][-1]:+.2f}"
        rows.append(row)
    avg = {"task": "average (ours)"}
    for v in variants:
        avg[v] = f"{sum(means[v]) / len(means[v]):.2f}"
    for v in variants[1:]:
        avg[f"diff ({v})"] = f"{(sum(means[v]) - sum(means[variants[0]])) / len(tasks):+.2f}"
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
