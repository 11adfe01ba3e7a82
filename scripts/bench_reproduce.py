"""The measured cost of one cell of each published table (a benchmark, not a test), for
`relreason reproduce --list`.

    .venv/bin/python scripts/bench_reproduce.py                       # bellman_ford, every table's columns
    .venv/bin/python scripts/bench_reproduce.py --tables rt-table19 --tasks bellman_ford,insertion_sort

For each table and each of its columns (model, protocol recipe, delta) it predicts the wall clock of
one cell on each task given (a table of text tasks: on each of its own, by scripts/bench_text_cells.py,
a TransNAR column's cost with its NAR cell's pre-training), with scripts/bench_quick.py's method: a few
real optimizer steps and evaluation batches of the cell's own config on its own data, extrapolated to the
full budget (training examples x hint steps, every validation, the final test, start-up and checkpoints), one torch thread,
CPU time (the wall clock the cell takes alone on one core of this machine). It writes
relreason/studies/costs.json ({table: {"hardware", "command", "cells": {"model on task": {"seconds", ...}}}}),
package data that ships with relreason, so `relreason reproduce --list` shows it from any directory; a
measured cell keeps its figure until measured again.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_quick  # noqa: E402  (a sibling script: its measuring and extrapolation)
import bench_text_cells  # noqa: E402  (the same for the cells of text tables)

from relreason.runtime import hardware, keep_freed_memory  # noqa: E402
from relreason.studies.sweep import costs_file  # noqa: E402
from relreason.studies.tables import TABLES  # noqa: E402
from relreason.tasks import TASKS, expand_tasks  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tables", default=",".join(TABLES.names()), help="comma list (default: every table)")
    p.add_argument("--tasks", default="bellman_ford", help="comma list of tasks to measure a cell on (a table of "
                                                           "text tasks: its own, always)")
    p.add_argument("--data-dir", default="data", help="where splits are cached (shared with `train`)")
    p.add_argument("--train-steps", type=int, default=3, help="timed training steps (after one warm-up)")
    p.add_argument("--eval-steps", type=int, default=2, help="hint steps of the timed evaluation batches")
    p.add_argument("--out", default=str(costs_file()), help="the costs file to update (default: the one relreason "
                                                           "ships, relreason/studies/costs.json)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    keep_freed_memory()
    torch.manual_seed(0)
    bench_quick.STARTUP_S = bench_quick.startup_seconds(False)
    out = Path(args.out)
    costs = json.loads(out.read_text()) if out.is_file() else {}
    seen: dict[tuple, dict] = {}  # the same (model, recipe, delta, task) is measured once for every table
    print(f"# 1 thread, CPU time, load1={os.getloadavg()[0]:.1f}, {hardware('cpu')}", flush=True)
    for name in args.tables.split(","):
        study = TABLES.get(name)
        entry = costs.setdefault(name, {})
        entry.update({"hardware": hardware("cpu"), "command": "python scripts/bench_reproduce.py " +
                      " ".join(argv if argv is not None else sys.argv[1:]), "date": time.strftime("%Y-%m-%d")})
        cells = entry.setdefault("cells", {})
        own = expand_tasks(study.tasks)
        text = TASKS.get(own[0]).kind == "text"  # a text table: its own tasks (a text cell trains no graph task)
        for task in own if text else args.tasks.split(","):
            for v in study.variants:
                key = (v.model, v.recipe, json.dumps(v.delta, sort_keys=True), task,
                       (v.nar.model, v.nar.recipe, json.dumps(v.nar.delta, sort_keys=True)) if v.nar else None)
                if key not in seen:
                    seen[key] = (bench_text_cells.predict(v, task, args.data_dir, args.train_steps) if text else
                                 bench_quick.predict(v.model, task, args.data_dir, args.train_steps, args.eval_steps,
                                                     [], recipe=v.recipe, delta=v.delta))
                r = seen[key]
                cells[f"{v.label} on {task}"] = {"seconds": round(r["total_s"], 1), "train_s": round(r["train_s"], 1),
                                                 "val_s": round(r["val_s"], 1), "test_s": round(r["test_s"], 1),
                                                 "examples": r["examples"], "batch": r["batch"],
                                                 **({"nar_s": round(r["nar_s"], 1)} if r.get("nar_s") else {})}
                print(f"{name:<16}{v.label:<28}{task:<24}{r['total_s'] / 60:9.1f} min  (train {r['train_s'] / 60:.1f}, "
                      f"validations {r['val_s'] / 60:.1f}, test {r['test_s'] / 60:.1f})", flush=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(costs, indent=1, sort_keys=True) + "\n")
        tmp.replace(out)


if __name__ == "__main__":
    main()
