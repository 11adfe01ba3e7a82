"""Predicted wall clock of `relreason train MODEL TASK --recipe quick` for every NAR model and graph
task (a benchmark, not a test): the quick recipe promises at most 5 minutes on a 2-core CPU, final
test included.

    .venv/bin/python scripts/bench_quick.py                      # every (NAR model, graph task) pair
    .venv/bin/python scripts/bench_quick.py --models rt,et --tasks bubble_sort,lobster

Per pair it builds the quick config exactly as `train` does, then measures, on the real data:
- training: a few full optimizer steps (forward with hints, loss, backward, clipping, Adam) after
  one warm-up step, as seconds per sample-step (the net runs a sample for max(1, L - 1) hint steps
  and drops finished samples from the batch, so the work of a batch is the sum of those counts);
- validation and the final test: one evaluation batch of the size `evaluate` picks, at the split's
  graph size, cut to a few hint steps, as seconds per sample-step.
It extrapolates: training sample-steps (the train split's mean steps x train_examples) x seconds
per sample-step, + validations x the validation split's sample-steps x its cost, + the test split's
sample-steps x its cost, + the measured start-up (imports, model build) and checkpoint writes. Data
generation is reported apart (`gen_s`: the first run on a machine generates the splits; later runs
read them from data/). One line per pair, then the pairs predicted slowest.

Clock: by default one torch thread and the CPU time of this process, i.e. the wall clock the run
would take alone on one core (2 cores, torch's default 2 threads, are faster when the machine is
idle). CPU time hardly changes with the machine's load, where wall-clock timings of 2-thread steps on
a shared machine are off by factors (threads wait for each other). `--wall --threads 2` measures the
wall clock instead: then predictions on a loaded machine are pessimistic.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from relreason.config import build_config
from relreason.data.trajectory import Dataset
from relreason.models.catalog import model_rows
from relreason.runtime import keep_freed_memory
from relreason.tasks import TASKS
from relreason.train.optimizer import adam, clip_grad_norm

BUDGET_S = 300.0  # the quick recipe's promise
clock = time.process_time  # CPU seconds of this process (see --wall)
REPEATS = 2  # timed evaluation batches per split; the median counts (the machine is shared: outliers)


def sample_steps(lengths: np.ndarray) -> int:
    """Work units of evaluating/training these samples: each runs max(1, L - 1) hint steps."""
    return int(np.maximum(1, np.asarray(lengths) - 1).sum())


def cut(ds: Dataset, steps: int) -> Dataset:
    """The dataset with every trajectory cut to at most `steps` + 1 hint steps (outputs unchanged:
    the cost of decoding and scoring is the same, only the number of steps shrinks)."""
    keep = steps + 1
    if ds.max_length <= keep:
        return ds
    hints = {k: np.ascontiguousarray(v[:, :keep]) for k, v in ds.hints.items()}
    return Dataset(ds.algorithm, ds.spec, ds.inputs, hints, ds.outputs, np.minimum(ds.lengths, keep), dict(ds.meta),
                   ds.sizes)


def eval_cost(wl, split: str, eval_steps: int) -> tuple[float, int, int, int]:
    """(seconds per sample-step, sample-steps of the whole split, batch size, graph size) of evaluating `split`."""
    from relreason.eval.evaluate import evaluate_dataset
    from relreason.train.workloads import _pick_batch, validation_generator

    task = wl.tasks[0]
    ds = wl.dataset(0, split)
    net = wl.built.net(task.name)
    spec = wl.built.specs[task.name]
    bs = _pick_batch(None, wl.cfg.train.eval_batch_size, net, ds)
    part = cut(ds.take(slice(0, min(bs, len(ds)))), eval_steps)
    gen = validation_generator(wl.cfg.train.seed) if split == "val" and wl.cfg.model.random_pos else None
    times = []
    for _ in range(REPEATS):
        t0 = clock()
        evaluate_dataset(net, part, spec, wl.cfg.model, wl.device, bs, scorer=task.scorer(spec), generator=gen)
        times.append(clock() - t0)
    return float(np.median(times)) / sample_steps(part.lengths), sample_steps(ds.lengths), bs, ds.n


def cut_training_data(wl, max_steps: int) -> list[int]:
    """Makes the workload draw its usual training batches with trajectories cut to `max_steps` hint
    steps (a bubble sort batch has ~130; the cost per sample-step does not depend on the cut).
    Returns a list that collects the sample-steps of the uncut batches drawn (Ibarz streams)."""
    wl._training_data()
    full: list[int] = []
    if wl._streams is not None:
        draw = wl._streams.batches

        def cut_batches(step, rows=None):
            got = draw(step, rows)
            full.append(sum(sample_steps(d.lengths) for d in got))
            return tuple(cut(d, max_steps) for d in got)

        wl._streams.batches = cut_batches
    else:
        wl._train = {name: cut(ds, max_steps) for name, ds in wl._train.items()}
    return full


def train_cost(wl, steps: int, max_steps: int) -> tuple[float, float]:
    """(seconds per training sample-step, mean sample-steps per training example): the median over
    `steps` timed optimizer steps (after one warm-up) on the workload's own batches, cut to
    `max_steps` hint steps (cut_training_data). The median, because single steps stall at times."""
    model, t = wl.model, wl.cfg.train
    train = {name: ds for name, ds in (wl._train or {}).items()}  # before cutting
    opt = adam(model.parameters(), t.lr)
    model.train()
    full = cut_training_data(wl, max_steps)
    rates = []
    steps = min(steps, -(-t.train_examples // t.batch_size) - 1)  # a run of k steps has k (streams stop there)
    for step in range(steps + 1):
        parts = wl.step_batches(step)
        t0 = clock()
        for part in parts:
            loss, _ = wl.loss(model, part, step)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if t.grad_clip is not None:
                clip_grad_norm(model, t.grad_clip)
            opt.step()
        elapsed = clock() - t0
        if step > 0 or steps == 0:  # step 0 warms up (allocator, lazy initialisations), unless it is all
            rates.append(elapsed / sum(sample_steps(part[1].lengths.cpu().numpy()) for part in parts))
    if train:  # canonical split: its mean over every example
        per_example = float(np.mean([sample_steps(ds.lengths) / len(ds) for ds in train.values()]))
    else:
        per_example = float(np.mean(full)) / t.batch_size
    return float(np.median(rates)), per_example


def checkpoint_cost(wl, cfg) -> float:
    """Seconds to write best/ and last/ once (every validation writes last/, improving ones best/)."""
    from relreason.train import checkpoint as ckpt

    opt = torch.optim.Adam(wl.model.parameters())
    with tempfile.TemporaryDirectory() as tmp:
        t0 = clock()
        ckpt.save_checkpoint(Path(tmp) / "best", wl.model, cfg, "", {})
        ckpt.save_checkpoint(Path(tmp) / "last", wl.model, cfg, "", {}, opt, {"step": 0})
        return clock() - t0


def predict(model: str, task: str, data_dir: str, train_steps: int, eval_steps: int, sets: list[str],
            recipe: str | None = "quick", delta: dict | None = None) -> dict:
    """The predicted wall clock of one run of (model, task) under `recipe` (None: the model's paper
    recipe) with an ablation `delta` over it; the parts, and the measured costs behind them."""
    from relreason.models.build import resolve_device
    from relreason.train.workloads import build_workload

    over = [f"data.data_dir={data_dir}", "train.device=cpu", *sets]
    cfg = build_config(model, task, recipe, over, ablation=("bench", delta) if delta else None)
    t = cfg.train
    t0 = clock()
    wl = build_workload(cfg, resolve_device("cpu"))
    build_s = clock() - t0
    try:
        t0 = clock()
        wl._training_data()  # loaded again, cut, by train_cost (from the cache written now)
        for split in ("val", "test"):
            wl.dataset(0, split)
        data_s = clock() - t0
        train_c, per_example = train_cost(wl, train_steps, max(eval_steps, 4))
        val_c, val_work, val_bs, val_n = eval_cost(wl, "val", eval_steps)
        test_c, test_work, test_bs, test_n = eval_cost(wl, "test", eval_steps)
        ckpt_s = checkpoint_cost(wl, cfg)
    finally:
        wl.close()
    validations = 1 + math.ceil(t.train_examples / t.eval_every_examples)
    parts = {
        "train_s": train_c * per_example * t.train_examples,
        "val_s": validations * (val_c * val_work + ckpt_s),
        "test_s": test_c * test_work,
        "startup_s": STARTUP_S + build_s,
    }
    return {"model": model, "task": task, **parts, "total_s": sum(parts.values()), "data_s": data_s,
            "examples": t.train_examples, "batch": t.batch_size, "validations": validations,
            "val_bs": val_bs, "test_bs": test_bs, "test_n": test_n, "test_num": len(wl.dataset(0, "test")),
            "train_cost": train_c, "train_per_example": per_example, "val_cost": val_c, "val_work": val_work,
            "test_cost": test_c, "test_work": test_work, "checkpoint_s": ckpt_s}


def startup_seconds(wall: bool) -> float:
    """Time of importing the CLI in a fresh interpreter (every `relreason train` pays it)."""
    import subprocess

    def children() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.perf_counter() if wall else usage.ru_utime + usage.ru_stime

    t0 = children()
    subprocess.run([sys.executable, "-c", "import relreason.cli.main, relreason.train.workloads"], check=True)
    return children() - t0


STARTUP_S = 0.0


def main(argv: list[str] | None = None) -> None:
    global STARTUP_S
    nar = [r["name"] for r in model_rows() if r["family"] == "nar"]
    graph = [name for name in TASKS.names() if TASKS.get(name).kind in ("clrs", "lobster")]
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(nar), help="comma list (default: every NAR model)")
    p.add_argument("--tasks", default=",".join(graph), help="comma list (default: every graph task)")
    p.add_argument("--data-dir", default="data", help="where splits are cached (shared with `train`)")
    p.add_argument("--train-steps", type=int, default=3, help="timed training steps (after one warm-up)")
    p.add_argument("--eval-steps", type=int, default=2, help="hint steps of the timed evaluation batches")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1: see the module docstring)")
    p.add_argument("--wall", action="store_true", help="time with the wall clock instead of CPU time")
    p.add_argument("--set", dest="sets", action="append", default=[], help="extra --set items for every pair")
    p.add_argument("--worst", type=int, default=10, help="how many of the slowest pairs to repeat at the end")
    p.add_argument("--jsonl", default=None, help="also append every pair's measurements to this file")
    args = p.parse_args(argv)
    global clock
    clock = time.perf_counter if args.wall else time.process_time
    torch.set_num_threads(args.threads)
    keep_freed_memory()
    torch.manual_seed(0)
    STARTUP_S = startup_seconds(args.wall)
    load = os.getloadavg()[0]
    print(f"# threads={torch.get_num_threads()} clock={'wall' if args.wall else 'cpu'} load1={load:.1f} "
          f"startup={STARTUP_S:.1f}s budget={BUDGET_S:.0f}s",
          flush=True)
    header = (f"{'model':<14}{'task':<30}{'total_s':>8}{'train_s':>8}{'val_s':>7}{'test_s':>7}{'gen_s':>7}"
              f"  examples x batch, test n x num (eval batch)")
    print(header, flush=True)
    rows = []
    for task in args.tasks.split(","):
        for model in args.models.split(","):
            try:
                r = predict(model, task, args.data_dir, args.train_steps, args.eval_steps, args.sets)
            except Exception as e:  # noqa: BLE001 - a benchmark reports and goes on
                print(f"{model:<14}{task:<30} failed: {type(e).__name__}: {e}", flush=True)
                continue
            rows.append(r)
            if args.jsonl:
                with open(args.jsonl, "a") as f:
                    f.write(json.dumps(r) + "\n")
            flag = "  OVER" if r["total_s"] > BUDGET_S else ""
            print(f"{model:<14}{task:<30}{r['total_s']:8.0f}{r['train_s']:8.0f}{r['val_s']:7.0f}{r['test_s']:7.0f}"
                  f"{r['data_s']:7.0f}  {r['examples']} x {r['batch']}, n={r['test_n']} x {r['test_num']} "
                  f"({r['test_bs']}){flag}", flush=True)
    rows.sort(key=lambda r: -r["total_s"])
    print(f"\n# slowest {args.worst} (peak RSS of this process {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MB,"
          f" load1 now {os.getloadavg()[0]:.1f})")
    for r in rows[: args.worst]:
        print(f"{r['model']:<14}{r['task']:<30}{r['total_s']:8.0f} s  (train {r['train_s']:.0f}, "
              f"validations {r['val_s']:.0f}, test {r['test_s']:.0f}, start {r['startup_s']:.0f})")
    over = [r for r in rows if r["total_s"] > BUDGET_S]
    print(f"# {len(over)} of {len(rows)} pairs predicted over {BUDGET_S:.0f} s")


if __name__ == "__main__":
    main()
