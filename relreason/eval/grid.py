"""Scores by graph family and size: one model evaluated on every (family, size) cell, shown as one table.

    rows = grid_rows(score, ["clrs", "ws:k=4,p=0.1", "delaunay"], [16, 64])
    table, columns = grid_table(rows)      # a row per family, a column per size

`score(graph, size)` is any evaluation of one cell returning {"score", "size", "num", "label", "graph",
"outputs"} (`relreason.train.evaluation.evaluate_grid` passes a checkpoint's); this module only loops
and tabulates, so a list of families and a list of sizes compose into one table.
"""

from __future__ import annotations

from typing import Callable, Sequence

from relreason.data.families import graph_name


def grid_rows(score: Callable[[str, int | None], dict], graphs: Sequence[str],
              sizes: Sequence[int | None]) -> list[dict]:
    """One row per (graph, size), graphs outer: graph (canonical text; "clrs" for the benchmark's
    sampler), size (nodes evaluated), score, num (samples), label, outputs (per-feature scores)."""
    rows = []
    for graph in graphs:
        for size in sizes:
            res = score(graph, size)
            rows.append({"graph": graph_name(res["graph"]), "size": res["size"], "score": res["score"],
                         "num": res["num"], "label": res["label"], "outputs": res["outputs"]})
    return rows


def grid_table(rows: list[dict]) -> tuple[list[dict], list[str]]:
    """(table rows, columns) of grid rows: a row per graph, a column per size (`n=64`), in first-seen order."""
    table: dict[str, dict] = {}
    columns: dict[str, None] = {}
    for r in rows:
        column = f"n={r['size']}"
        columns[column] = None
        table.setdefault(r["graph"], {"graph": r["graph"]})[column] = r["score"]
    return list(table.values()), ["graph", *columns]
