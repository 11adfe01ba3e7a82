"""Scores by graph family and size: one model evaluated on every (family, size) cell, shown as one
table and kept as a sweep file.

    rows = grid_rows(score, ["clrs", "ws:k=4,p=0.1", "delaunay"], [16, 64])
    table, columns = grid_table(rows)      # a row per family, a column per size
    table, columns = size_table(rows)      # one family: a row per size (its seed, samples, score)
    write_sweep("runs/NAME", result)       # runs/NAME/ood_sweep.json, what `relreason plot --ood` reads
    sweep = read_sweep("runs/NAME")

`score(graph, size)` is any evaluation of one cell returning {"score", "size", "num", "label", "graph",
"outputs"} and optionally "seed" (`relreason.train.evaluation.evaluate_grid` passes a checkpoint's);
this module only loops, tabulates and stores, so a list of families and a list of sizes compose into
one table.

A sweep file is `evaluate_grid`'s result as JSON (written atomically) with `kind: "ood_sweep"` and a
schema version: the model, task, training seed (`train_seed`), metric, and a row per cell with the
cell's graph, size, split seed, samples, score and per-output scores.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable, Sequence

from relreason.data.families import graph_name
from relreason.data.store import atomic_path
from relreason.errors import RelreasonError
from relreason.files import read_json

SWEEP_FILE = "ood_sweep.json"  # a sweep's file when --save names a directory (a run's)
SWEEP_KIND = "ood_sweep"
SWEEP_VERSION = 1


def grid_rows(score: Callable[[str | None, int | None], dict], graphs: Sequence[str | None],
              sizes: Sequence[int | None]) -> list[dict]:
    """One row per (graph, size), graphs outer: graph (canonical text; "clrs" for the benchmark's
    sampler), size (as asked; a size None: the one evaluated), nodes (node slots evaluated: the size,
    or a lobster's padded graph), seed (of the split; None when the evaluation does not say), score,
    num (samples), label, outputs (per-feature scores)."""
    rows = []
    for graph in graphs:
        for size in sizes:
            res = score(graph, size)
            rows.append({"graph": graph_name(res["graph"]), "size": res["size"] if size is None else size,
                         "nodes": res["size"], "seed": res.get("seed"), "score": res["score"], "num": res["num"],
                         "label": res["label"], "outputs": res["outputs"]})
    return rows


def _column(row: dict) -> str:
    return f"n={row['size']}"


def grid_table(rows: list[dict], seeds: bool = False) -> tuple[list[dict], list[str]]:
    """(table rows, columns) of grid rows: a row per graph, a column per size (`n=64`), in first-seen
    order; `seeds`: a last row gives each size's split seed."""
    table: dict[str, dict] = {}
    columns: dict[str, None] = {}
    for r in rows:
        columns[_column(r)] = None
        table.setdefault(r["graph"], {"graph": r["graph"]})[_column(r)] = r["score"]
    out = list(table.values())
    if seeds:
        out.append({"graph": "split seed", **{_column(r): _seed_text(r.get("seed")) for r in rows}})
    return out, ["graph", *columns]


def size_table(rows: list[dict]) -> tuple[list[dict], list[str]]:
    """(table rows, columns) of the grid rows of one graph: a row per size with its split seed, samples
    and score (and its node count where a size is not one: lobsters)."""
    table = [{"size": r["size"], "nodes": r.get("nodes"), "seed": _seed_text(r.get("seed")), "samples": r["num"],
              "score": r["score"]} for r in rows]
    nodes = ["nodes"] if any(r.get("nodes", r["size"]) != r["size"] for r in rows) else []
    return table, ["size", *nodes, "seed", "samples", "score"]


def _seed_text(seed) -> str:
    if isinstance(seed, list):
        return "/".join(str(s) for s in seed)
    return "-" if seed is None else str(seed)


def sweep_path(path: Path) -> Path:
    """Where a sweep is read or written: `path` itself, or DIR/ood_sweep.json for a directory (a run's)."""
    path = Path(path)
    return path / SWEEP_FILE if path.is_dir() else path


def write_sweep(path: Path, result: dict) -> Path:
    """Writes an `evaluate_grid` result as a sweep file (atomically); returns the file written."""
    target = sweep_path(path)
    if target.suffix != ".json":
        raise RelreasonError(f"--save {path}: a sweep file ends with .json", f"e.g. --save sweep.json, or a run "
                                                                             f"directory (then DIR/{SWEEP_FILE})")
    doc = {"kind": SWEEP_KIND, "schema_version": SWEEP_VERSION, **result}
    try:
        with atomic_path(target) as tmp:
            tmp.write_text(json.dumps(doc, indent=1) + "\n")
    except OSError as e:
        raise RelreasonError(f"cannot write {target}: {e.strerror}", "choose a writable --save path") from None
    return target


def read_sweep(path: Path) -> dict:
    """A sweep file (or a directory's ood_sweep.json), checked: a one-line error names the file and what
    is wrong with it."""
    target = sweep_path(path)
    if not target.exists():
        hint = (f"save one with: relreason eval {path} --ood 16,32,64 --save {path}" if Path(path).is_dir()
                else "give a sweep file written by `relreason eval RUN --ood LIST --save FILE`, or its run directory")
        raise RelreasonError(f"{target} does not exist", hint)
    try:
        doc = read_json(target, follow=True)
    except RelreasonError as e:
        raise RelreasonError(f"{target} is not readable JSON ({e.message})",
                             "write it again with relreason eval --save") from None
    if not isinstance(doc, dict) or doc.get("kind") != SWEEP_KIND:
        raise RelreasonError(f"{target} is not a size sweep (no kind: {SWEEP_KIND})",
                             "give a file written by relreason eval --ood LIST --save")
    if doc.get("schema_version") != SWEEP_VERSION:
        raise RelreasonError(f"{target}: sweep schema version {doc.get('schema_version')!r}, this relreason reads "
                             f"{SWEEP_VERSION}", "evaluate the run again with relreason eval --save")
    rows = doc.get("rows")
    good = isinstance(rows, list) and rows and all(
        isinstance(r, dict) and isinstance(r.get("size"), int) and isinstance(r.get("graph"), str)
        and isinstance(r.get("score"), (int, float)) and not math.isnan(r["score"]) for r in rows)
    if not good:
        raise RelreasonError(f"{target}: rows must be a non-empty list of cells with graph, size and score",
                             "write it again with relreason eval --save")
    for key in ("model", "task", "metric"):
        if not isinstance(doc.get(key), str):
            raise RelreasonError(f"{target}: {key} is missing", "write it again with relreason eval --save")
    return doc
