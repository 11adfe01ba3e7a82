"""How much of the hint loop is padding, before and after, per task (a benchmark, not a test).

    .venv/bin/python scripts/bench_padding.py --tasks bellman_ford insertion_sort dfs

A batch runs S = max(1, T - 1) processor steps, T its longest trajectory; a sample of L hint steps
needs only max(1, L - 1) of them. This script reports, per task and kind of batch, the fraction of
sample-steps that are padding:

- `dense`: every sample runs all S steps of its batch (a loop that does not shrink the batch);
- `net`: the sample-steps the network really computes, counted by wrapping the processor
  (relreason.models.net.Net computes only the samples still running: this must be 0);
- `calls`: the mean number of samples per processor call (the effective batch of its matmuls) and
  the fraction of steps that ran a subset of the batch (index_select / index_copy work).

Kinds of batch: `train` draws random batches with replacement from the train split, as training
does (never reordered: see relreason.eval.evaluate for why only evaluation sorts by length);
`eval` cuts the test split into consecutive batches in dataset order, `eval-sorted` in order of
trajectory length (what `relreason.eval.evaluate` does; the metric does not depend on the order).
With --time, the evaluation of the test split is also timed both ways (1 thread, process CPU time).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from relreason.config import build_config
from relreason.data import generate
from relreason.models import Batch, build_model, prepare_spec


def count_rows(net) -> list[int]:
    """Wraps net.processor so that every call appends its batch size to the returned list."""
    calls: list[int] = []
    proc = net.processor
    forward = proc.forward

    def counted(node_in, *args, **kwargs):
        calls.append(int(node_in.shape[0]))
        return forward(node_in, *args, **kwargs)

    proc.forward = counted
    return calls


def stats(batches: list[np.ndarray], lengths: np.ndarray, run=None) -> dict:
    """Padding figures of a list of batches (arrays of sample indices)."""
    needed = dense = subset_steps = steps = 0
    for idx in batches:
        need = np.maximum(1, lengths[idx] - 1)
        S = int(need.max())
        needed += int(need.sum())
        dense += len(idx) * S
        subset_steps += int(sum((need > s).sum() < len(idx) for s in range(S)))
        steps += S
    out = {"dense": 1 - needed / dense, "subset_steps": subset_steps / steps, "needed": needed}
    if run is not None:
        rows = run(batches)
        out["net"] = 1 - needed / sum(rows)
        out["rows_per_call"] = float(np.mean(rows))
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", nargs="+", default=["bellman_ford", "insertion_sort", "dfs"])
    p.add_argument("--batch-size", type=int, default=32, help="training batch")
    p.add_argument("--train-batches", type=int, default=200)
    p.add_argument("--eval-batch-size", type=int, default=8, help="evaluation batch (small, to show the sorting)")
    p.add_argument("--test-num", type=int, default=128, help="test samples at n = 64")
    p.add_argument("--time", action="store_true", help="also time the test evaluation in both orders")
    p.add_argument("--model", default="mpnn", help="model used to count and time (counts do not depend on it)")
    args = p.parse_args()
    torch.set_num_threads(1)

    for task in args.tasks:
        full = build_config(args.model, task, None, [])
        train = generate(task, split="train")
        test = generate(task, num=args.test_num, size=64, seed=2)
        spec = prepare_spec(train.spec, full.model, task)
        # a narrow model to count rows (what it computes does not depend on the width)
        tiny = build_model(spec, build_config(args.model, task, None, ["model.hidden=8"]).model, args.model)
        tiny.eval()
        calls = count_rows(tiny)

        def run(ds, batches, net=tiny, counted=calls):
            counted.clear()
            with torch.no_grad():
                for idx in batches:
                    net(Batch.from_dataset(ds.take(idx), full.model, spec), train=False)
            return list(counted)

        rng = np.random.default_rng(0)
        train_batches = [rng.integers(0, len(train), args.batch_size) for _ in range(args.train_batches)]
        order = np.argsort(test.lengths, kind="stable")
        eb = args.eval_batch_size
        plain = [np.arange(i, min(i + eb, len(test))) for i in range(0, len(test), eb)]
        ordered = [order[i:i + eb] for i in range(0, len(test), eb)]
        rows = {"train": stats(train_batches, train.lengths, lambda b: run(train, b)),
                "eval": stats(plain, test.lengths, lambda b: run(test, b)),
                "eval-sorted": stats(ordered, test.lengths, lambda b: run(test, b))}
        print(f"{task}: train L {train.lengths.min()}..{train.lengths.max()} (n=16), "
              f"test L {test.lengths.min()}..{test.lengths.max()} (n=64)")
        for kind, r in rows.items():
            print(f"  {kind:12s} padding dense={r['dense']:.3f} net={r['net']:.3f} "
                  f"rows_per_call={r['rows_per_call']:.1f} subset_steps={r['subset_steps']:.2f}")
        if args.time:
            net = build_model(spec, full.model, args.model)
            net.eval()
            for name, batches in (("eval", plain), ("eval-sorted", ordered)) * 2:
                t = time.process_time()
                with torch.no_grad():
                    for idx in batches:
                        net.predict(net(Batch.from_dataset(test.take(idx), full.model, spec), train=False))
                print(f"  time {name:12s} {time.process_time() - t:.2f} s cpu")


if __name__ == "__main__":
    main()
