"""CLRS-Text generation speed: examples per second (sample + run + render), printed per configuration.

    taskset -c 0 .venv/bin/python scripts/bench_text_data.py            # one core, as training would use it
    .venv/bin/python scripts/bench_text_data.py --num 20000 --repeats 5

Configurations are interleaved across repeats (the machine is shared: compare within a run) and the best
repeat is reported. The goal: rendering is never the bottleneck of text training (>= 2,000 examples/s
for insertion_sort at length 12 without hints).
"""

from __future__ import annotations

import argparse
import time

from relreason.data.text import text_batches, text_examples

CONFIGS = [  # (algorithm, length, hints, per-example objects)
    ("insertion_sort", 12, False, False),
    ("insertion_sort", 12, False, True),
    ("insertion_sort", 12, True, False),
    ("bellman_ford", 12, False, False),
    ("naive_string_matcher", 12, True, False),
    ("floyd_warshall", 12, True, False),
]


def rate(algorithm: str, length: int, hints: bool, per_example: bool, num: int) -> float:
    start = time.perf_counter()
    if per_example:
        count = sum(1 for _ in text_examples(algorithm, length, 0, num, hints))
    else:
        count = sum(len(b) for b in text_batches(algorithm, length, 0, num, hints=hints))
    return count / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num", type=int, default=5000, help="examples per measurement")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    best = {c: 0.0 for c in CONFIGS}
    for _ in range(args.repeats):
        for c in CONFIGS:
            best[c] = max(best[c], rate(*c, args.num))
    for (alg, n, hints, per_example), r in best.items():
        form = "text_examples" if per_example else "text_batches"
        print(f"{alg:22s} n={n:<3d} hints={str(hints):5s} {form:13s} {r:9.0f} examples/s")


if __name__ == "__main__":
    main()
