"""Named ablations from the papers: a base configuration plus a delta per variant.

    relreason ablate no-edge-updates --tasks core8 --seeds 3

runs every (variant, task, seed) cell through the same `relreason.train.run` that `train` uses,
stores each cell's `results.json` under `OUT/<ablation>/<variant>/<task>/seed<k>/`, reads finished
cells back instead of re-running them (so an interrupted ablation resumes), and aggregates test
scores as mean +- std per task, their average, and each variant's difference to the first.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from relreason.config import build_config, merge
from relreason.errors import RelreasonError
from relreason.registry import Registry


@dataclass(frozen=True)
class Variant:
    label: str
    model: str  # processor name
    delta: dict = field(default_factory=dict)  # config tree {section: {key: value}} applied over the base


@dataclass(frozen=True)
class Ablation:
    name: str
    description: str
    variants: tuple[Variant, ...]  # the first is the reference the others are compared with
    paper: str = ""  # published figures for comparison, shown under the table


ABLATIONS: Registry[Ablation] = Registry("ablation", "relreason list ablations")


def register_ablation(name: str, description: str, *variants: Variant, paper: str = "") -> None:
    ABLATIONS.register(name, Ablation(name, description, tuple(variants), paper))


_RT = Variant("rt", "rt")
register_ablation("no-edge-updates", "RT with vs without edge updates (Diao & Loynd 2023, Table 3)",
                  _RT, Variant("rt without edge updates", "rt", {"processor": {"edge_updates": False}}),
                  paper="8 core tasks: RT 81.30, without edge updates 53.99")
register_ablation("no-edges", "RT vs a standard transformer without edge vectors or edge features",
                  _RT, Variant("transformer", "transformer"),
                  paper="8 core tasks: RT 81.30, plain transformer 42.34")
register_ablation("single-layer", "RT with its 3 layers per step vs a single layer",
                  _RT, Variant("rt 1 layer", "rt", {"processor": {"layers": 1}}),
                  paper="8 core tasks: RT 81.30, single layer 70.44")
register_ablation("core-node", "RT global vector tiled onto inputs (cat) vs an extra core node",
                  _RT, Variant("rt core node", "rt", {"processor": {"global_vector": "core"}}))
register_ablation("node-ptr-decoding", "RT pointers decoded from edges vs from node pairs",
                  _RT, Variant("rt node pointers", "rt", {"model": {"pointer_decoding": "node"}}))
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
                  Variant("positional", "dat", {"processor": {"symbols": "positional"}}),
                  Variant("position-relative", "dat", {"processor": {"symbols": "position_relative"}}),
                  Variant("symbolic", "dat", {"processor": {"symbols": "symbolic"}}))
register_ablation("dat-relational-only", "Dual Attention Transformer vs relational heads only", _DAT,
                  Variant("dat relational only", "dat", {"processor": {"n_heads_sa": 0}}))
register_ablation("dat-sensory-only", "Dual Attention Transformer vs sensory heads only (a transformer)", _DAT,
                  Variant("dat sensory only", "dat", {"processor": {"n_heads_ra": 0}}))


def cell_dir(out: Path, ablation: str, variant: str, task: str, seed: int) -> Path:
    return Path(out) / ablation / variant.replace(" ", "_") / task / f"seed{seed}"


def check_ablation(abl: Ablation, tasks: list[str], recipe: str | None, sets: list[str] | None) -> None:
    """Builds every variant's config first, so a bad key fails before hours of training."""
    from relreason.config import parse_overrides

    for v in abl.variants:
        for task in tasks:
            build_config(v.model, task, recipe, merge(v.delta, parse_overrides(list(sets or []))))


def run_ablation(name: str, tasks: list[str], seeds: int, recipe: str | None = None, out: Path = Path("ablations"),
                 sets: list[str] | None = None, show_progress: bool = True, log=print) -> dict:
    """Runs (or reads back) every cell; returns {"ablation", "variants", "cells": [...]}."""
    from relreason.config import parse_overrides
    from relreason.train import run

    abl = ABLATIONS.get(name)
    if seeds < 1:
        raise RelreasonError(f"--seeds {seeds} must be at least 1", "e.g. --seeds 3")
    check_ablation(abl, tasks, recipe, sets)
    cells = []
    for task in tasks:
        for v in abl.variants:
            for seed in range(seeds):
                where = cell_dir(out, name, v.label, task, seed)
                results = where / "run" / "results.json"
                if not results.is_file():
                    overrides = merge(v.delta, parse_overrides(list(sets or []) + [f"train.seed={seed}"]))
                    cfg = build_config(v.model, task, recipe, overrides)
                    resume = (where / "run" / "last" / "trainer_state.json").exists()
                    log(f"[{name}] {v.label} / {task} / seed {seed}" + (" (resuming)" if resume else ""))
                    res = run(cfg, out=where, name="run", resume=resume, show_progress=show_progress)
                    if res.interrupted:
                        raise KeyboardInterrupt
                data = json.loads(results.read_text())
                cells.append({"variant": v.label, "task": task, "seed": seed, "score": data["test"]["score"],
                              "best_val": data["best_val"]})
    return {"ablation": name, "variants": [v.label for v in abl.variants], "tasks": tasks, "cells": cells,
            "paper": abl.paper}


def _mean_std(xs: list[float]) -> tuple[float, float]:
    m = sum(xs) / len(xs)
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs)) if len(xs) > 1 else 0.0


def aggregate(result: dict, percent: bool = True) -> tuple[list[dict], list[str]]:
    """Paper-style rows: per task mean +- std per variant, an `average` row, and `diff` columns
    (each later variant minus the first, on the means). Scores in percent when `percent`."""
    scale = 100.0 if percent else 1.0
    variants, tasks = result["variants"], result["tasks"]
    by = {}
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
    avg = {"task": "average"}
    for v in variants:
        avg[v] = f"{sum(means[v]) / len(means[v]):.2f}"
    for v in variants[1:]:
        avg[f"diff ({v})"] = f"{(sum(means[v]) - sum(means[variants[0]])) / len(tasks):+.2f}"
    rows.append(avg)
    return rows, columns
