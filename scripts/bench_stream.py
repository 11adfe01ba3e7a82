#!/usr/bin/env python
"""Training-stream speed: batches/s made in this process, and how long a training loop waits for them.

    .venv/bin/python scripts/bench_stream.py                                  # bellman_ford, batch 32
    .venv/bin/python scripts/bench_stream.py --algorithms all --steps 20      # one step of all 30 (multi-task)
    .venv/bin/python scripts/bench_stream.py --train-seconds 0.1 --steps 100  # consumer burning 0.1 s of CPU per step

Prints, per stream set: `inline` = batches (steps) per second of `TrainingStream.batch` called in this
process over consecutive steps (so every size of the schedule, in its proportion), with the time per
size; then `prefetch` = a `MultiPrefetcher` (one spawned worker) feeding a consumer that burns
`--train-seconds` of CPU per step (a stand-in for an MPNN training step at batch 32), and the
consumer's mean wait for data per step after the first (the worker's start-up is reported apart).
A benchmark, not a test: numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import time

from relreason.data import ALGORITHMS
from relreason.data.stream import MultiPrefetcher, TrainingStream


def burn(seconds: float) -> None:
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--algorithms", default="bellman_ford", help="comma-separated, or 'all'")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--train-seconds", type=float, default=0.1)
    ap.add_argument("--depth", type=int, default=8)
    args = ap.parse_args()
    names = ALGORITHMS.names() if args.algorithms == "all" else args.algorithms.split(",")
    streams = [TrainingStream(n, seed=0, batch_size=args.batch_size) for n in names]

    per_size: dict[int, list[float]] = {}
    start = time.perf_counter()
    for step in range(args.steps):
        t = time.perf_counter()
        for s in streams:
            s.batch(step)
        per_size.setdefault(streams[0].size(step), []).append(time.perf_counter() - t)
    inline = args.steps / (time.perf_counter() - start)
    sizes = " ".join(f"n={n}:{1e3 * sum(v) / len(v):.1f}ms" for n, v in sorted(per_size.items()))
    print(f"{','.join(names) if len(names) < 4 else f'{len(names)} algorithms'} batch={args.batch_size} "
          f"inline={inline:.1f} steps/s ({sizes})")

    t0 = time.perf_counter()
    waits = []
    with MultiPrefetcher(streams, start_step=0, depth=args.depth, stop_step=args.steps) as batches:
        t = time.perf_counter()
        for step, _ in batches:
            waits.append(time.perf_counter() - t)
            burn(args.train_seconds)
            t = time.perf_counter()
    total = time.perf_counter() - t0
    rest = waits[1:] or [0.0]
    print(f"prefetch: first batch after {waits[0]:.2f}s (worker start-up), then mean wait "
          f"{1e3 * sum(rest) / len(rest):.2f}ms per {1e3 * args.train_seconds:.0f}ms step, "
          f"median {1e3 * sorted(rest)[len(rest) // 2]:.2f}ms, max {1e3 * max(rest):.1f}ms; "
          f"{args.steps} steps in {total:.1f}s "
          f"(ideal {args.steps * args.train_seconds:.1f}s)")


if __name__ == "__main__":
    main()
