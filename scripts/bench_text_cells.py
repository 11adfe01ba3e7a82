"""The predicted cost of one text cell of a study (a benchmark, not a test): what scripts/bench_reproduce.py
records in relreason/studies/costs.json for the columns of a table whose tasks are CLRS-Text tasks
(`reproduce transnar-ood`).

    .venv/bin/python scripts/bench_reproduce.py --tables transnar-ood      # calls `predict` per column and task

Per (column, text task) it builds the cell's config exactly as the study plans it and measures, one torch
thread, CPU time of this process (the wall clock the cell takes alone on one core):
- training: a few full optimizer steps (the workload's own batches and loss, backward, clipping, Adam) after
  one warm-up step, the median step times the cell's steps (train_examples / batch_size);
- validation and test: one greedy decoding of the whole split (`evaluate`, the cell's own counts and sizes;
  an untrained model decodes up to its cap, so this is an upper bound), the validation times the cell's
  validations, each with a checkpoint write;
- start-up: scripts/bench_quick.py's (imports) and the workload's build.
A column that reads a NAR the study pre-trains (`Variant.nar`: TransNAR) is measured with a NAR of that
recipe's shape trained for one step in a temporary directory (the cost does not depend on its weights), and
its cell's cost adds the NAR cell's own, predicted by scripts/bench_quick.py (`nar_s`): every TransNAR cell
has a NAR cell of its own algorithm and seed, so the column's cost is the study's whole cost per cell.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import numpy as np
import torch

import bench_quick  # a sibling script: its clock, start-up and checkpoint cost, and the NAR cells' prediction

from relreason.config import build_config
from relreason.studies.variants import Variant
from relreason.tasks import task_entries
from relreason.train.optimizer import adam, clip_grad_norm


def _tiny_nar(nar: Variant, algorithm: str, where: Path) -> Path:
    """A NAR run of `nar`'s recipe and shape on `algorithm`, trained for one step (its weights do not matter)."""
    from relreason.train.loop import run

    cfg = build_config(nar.model, algorithm, nar.recipe, {"train": {"train_examples": 32, "eval_every_examples": 32,
                                                                    "device": "cpu"},
                                                          "data": {"val_num": 4, "test_num": 4}},
                       ablation=("bench", nar.delta) if nar.delta else None)
    run(cfg, out=where, name="nar", show_progress=False, log=lambda m: None)
    return where / "nar"


def _train_seconds(wl, steps: int) -> float:
    """Median CPU seconds of one optimizer step of the workload (after a warm-up step)."""
    t = wl.cfg.train
    opt = adam(wl.model.parameters(), t.lr)
    wl.model.train()
    times = []
    for step in range(steps + 1):
        t0 = bench_quick.clock()
        for part in wl.step_batches(step):
            loss, _ = wl.loss(wl.model, part, step)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if t.grad_clip is not None:
                clip_grad_norm(wl.model, t.grad_clip)
            opt.step()
        if step > 0:
            times.append(bench_quick.clock() - t0)
    return float(np.median(times))


def _eval_seconds(wl, split: str) -> float:
    t0 = bench_quick.clock()
    wl.evaluate(split)
    return bench_quick.clock() - t0


def predict(v: Variant, task: str, data_dir: str, train_steps: int) -> dict:
    """The predicted cost of one cell of column `v` on text task `task` (module docstring): its parts in
    seconds, their sum "total_s", and the budget behind them."""
    from relreason.models.build import resolve_device
    from relreason.train.workloads import build_workload

    over: dict = {"train": {"device": "cpu"}}
    nar_s = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        if v.nar is not None:
            algorithm = task_entries(task)[0].algorithm
            over["model"] = {"nar": str(_tiny_nar(v.nar, algorithm, Path(tmp)))}
            nar_s = bench_quick.predict(v.nar.model, algorithm, data_dir, train_steps, 2, [], recipe=v.nar.recipe,
                                        delta=v.nar.delta)["total_s"]
        cfg = build_config(v.model, task, v.recipe, over, ablation=("bench", v.delta) if v.delta else None)
        t = cfg.train
        t0 = bench_quick.clock()
        wl = build_workload(cfg, resolve_device("cpu"))
        build_s = bench_quick.clock() - t0
        try:
            step_s = _train_seconds(wl, train_steps)
            val_once, test_s = _eval_seconds(wl, "val"), _eval_seconds(wl, "test")
            ckpt_s = bench_quick.checkpoint_cost(wl, cfg)
        finally:
            wl.close()
    validations = 1 + math.ceil(t.train_examples / t.eval_every_examples)
    parts = {"train_s": step_s * math.ceil(t.train_examples / t.batch_size),
             "val_s": validations * (val_once + ckpt_s), "test_s": test_s,
             "startup_s": bench_quick.STARTUP_S + build_s, "nar_s": nar_s}
    return {**parts, "total_s": sum(parts.values()), "examples": t.train_examples, "batch": t.batch_size}
