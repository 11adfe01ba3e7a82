"""Synthetic run and ablation directories for the tests of `runs`, `compare` and `plot`.

They follow the run directory contract (config.json, metrics.jsonl, results.json, .lock) and the
ablation layout (`<ablation>/<variant>/<task>/seed<k>/run`), with scores chosen by the test, so
aggregates can be checked against hand-computed values without training anything.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from relreason.runtime import RunLock


def write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))


def make_run(root: Path, name: str, model: str = "mpnn", task: str = "bfs", seed: int = 0,
             vals: tuple = (0.2, 0.6, 0.7, 0.65), losses: tuple | None = None, test: float | None = 0.5,
             metric: str | None = "clrs", lower_is_better: bool | None = None, finished: bool = True,
             lock: dict | None = None, processor: dict | None = None, per_task: dict | None = None,
             every: int = 160, mtime: float | None = None) -> Path:
    """A run directory `root/name`; `vals` are the validation scores at 0, every, 2*every... examples.

    `metric=None` leaves "metric" out of results.json (runs written before the key existed)."""
    d = Path(root) / name
    cfg = {"model_name": model, "task": task, "recipe": None,
           "data": {"train_size": 16, "train_num": 1000, "val_size": 16, "test_size": 64, "data_dir": "data"},
           "model": {"hidden": 16}, "processor": dict(processor or {"layers": 3}),
           "train": {"batch_size": 32, "lr": 0.001, "train_examples": every * (len(vals) - 1),
                     "eval_every_examples": every, "eval_batch_size": 32, "seed": seed, "device": "cpu",
                     "threads": 0}}
    write_json(d / "config.json", {"relreason": "0.1.0", "config": cfg, "command": f"relreason train {model} {task}"})
    # checkpoints hold a config.json too: discovery must not take them for runs
    write_json(d / "best" / "config.json", {"format": 1, "config": cfg})
    (d / "best" / "model.safetensors").write_bytes(b"")
    losses = losses if losses is not None else tuple(None if i == 0 else 2.0 / i for i in range(len(vals)))
    lines = [{"event": "val", "step": i * every // 32, "examples": i * every, "loss": loss, "score": v,
              "outputs": {"pi": v}, "hints": {}, "time": float(i)} for i, (v, loss) in enumerate(zip(vals, losses))]
    if finished:
        lines.append({"event": "test", "size": 64, "num": 32, "score": test, "outputs": {"pi": test}, "hints": {}})
    (d / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    if finished:
        lower = lower_is_better if lower_is_better is not None else metric == "relative_loss"
        best = (min if lower else max)(vals)
        # results.json as the first relreason wrote it (schema version 1: no "schema_version" key)
        res = {"relreason": "0.1.0", "model": model, "task": task, "seed": seed, "recipe": None,
               "command": f"relreason train {model} {task}", "steps": every * (len(vals) - 1) // 32,
               "examples": every * (len(vals) - 1), "seconds": 1.0, "best_val": best,
               "best_examples": vals.index(best) * every, "test_size": 64,
               "test": {"score": test, "outputs": {"pi": test}, "hints": {}}, "config": cfg}
        if metric is not None:
            res.update(metric=metric, lower_is_better=lower)
        if per_task is not None:
            res["per_task"] = per_task
        write_json(d / "results.json", res)
    if lock is not None:
        if lock.get("pid") == os.getpid() and lock.get("host") == socket.gethostname():
            HELD.append(RunLock(d).acquire())  # a live holder: this test process, until it exits
        else:
            write_json(d / ".lock", lock)  # a record nobody holds (a dead or foreign process's)
    if mtime is not None:
        for p in d.iterdir():
            os.utime(p, (mtime, mtime))
    return d


HELD: list = []  # locks held by the test process for "running" fake runs


def results_json(config: dict, score: float = 0.5, **fields) -> str:
    """The results.json of a finished run with the stored config `config` (Config.to_dict()), as the loop
    writes it (relreason.rundir.RunResults, with the code that made it); `fields` replace any of its values
    (`code=None`: a run written before runs recorded their code)."""
    from relreason.rundir import RunResults, TestScores

    train = config["train"]
    base = dict(relreason="0.1.0", model=config["model_name"], task=config["task"], tasks=[config["task"]],
                seed=train["seed"], recipe=config["recipe"], deviation=None, command=None, metric="clrs",
                lower_is_better=False, steps=train["train_examples"] // train["batch_size"],
                examples=train["train_examples"], processes=1, seconds=1.0, hardware=["Test CPU"], train_seconds=1.0,
                best_val=0.5, best_examples=train["train_examples"], test_size=config["data"].get("test_size"),
                test_label=None, test=TestScores(score=score, outputs={"x": score}, hints={}), per_task={},
                config=config, code=[{"version": "0.1.0", "source": "test", "commit": None, "dirty": None}])
    return RunResults(**{**base, **fields}).to_json()


def live_lock() -> dict:
    return {"pid": os.getpid(), "host": socket.gethostname(), "started": 1.0}


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def make_ablation(root: Path, name: str, scores: dict, paper: str = "") -> Path:
    """`root/name` as `relreason ablate` leaves it; scores: {(variant, task): [score per seed]}.

    Variant "rt" is the RT; any other label is the RT without edge updates (a config delta)."""
    variants = list(dict.fromkeys(v for v, _ in scores))
    tasks = list(dict.fromkeys(t for _, t in scores))
    cells = []
    for (variant, task), per_seed in scores.items():
        for seed, score in enumerate(per_seed):
            proc = {"layers": 3, "edge_updates": variant == "rt"}
            make_run(Path(root) / name / variant.replace(" ", "_") / task / f"seed{seed}", "run", model="rt",
                     task=task, seed=seed, test=score, processor=proc)
            cells.append({"variant": variant, "task": task, "seed": seed, "score": score, "best_val": 0.7})
    write_json(Path(root) / name / "results.json",
               {"ablation": name, "variants": variants, "tasks": tasks, "seeds": len(next(iter(scores.values()))),
                "cells": cells, "paper": [], "paper_line": paper, "lower_is_better": False, "table": []})
    return Path(root) / name
