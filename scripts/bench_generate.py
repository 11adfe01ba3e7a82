#!/usr/bin/env python
"""Data generation speed: samples/s per algorithm and size (all hints included), plus peak memory.

    python scripts/bench_generate.py                       # every algorithm at n=16 and n=64
    python scripts/bench_generate.py --algorithms bfs,dfs --sizes 16
    python scripts/bench_generate.py --memory bubble_sort  # peak traced memory of its canonical test split

Prints one line per (algorithm, size): `name n samples_per_s=... ref=... speedup=...`, where `ref` is
the reference sampler (google-deepmind/clrs 2.0.3) measured on a 2-core CPU with the same sizes.
A benchmark, not a test: the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

from relreason.data import ALGORITHMS, generate

# Reference sampler samples/s measured on the 2-core development machine (n=16, n=64).
REFERENCE = {
    "insertion_sort": (3672, 615), "bubble_sort": (700, 20.5), "heapsort": (670, 60.5), "quicksort": (1263, 125),
    "minimum": (4594, 890), "binary_search": (6009, 3790), "bfs": (2906, 348), "dfs": (874, 136),
    "topological_sort": (1138, 194), "bellman_ford": (1862, 180), "dijkstra": (2312, 420),
    "dag_shortest_paths": (1203, 212), "floyd_warshall": (345, 4.1),
}


def measure(name: str, size: int, budget: float) -> float:
    """Samples/s, growing the sample count until one run takes at least `budget` seconds."""
    num = 8
    while True:
        start = time.perf_counter()
        generate(name, num=num, size=size, seed=1)
        took = time.perf_counter() - start
        if took >= budget or num >= 20000:
            return num / took
        num = min(20000, int(num * max(2.0, 1.2 * budget / max(took, 1e-3))))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--algorithms", default=",".join(ALGORITHMS.names()))
    p.add_argument("--sizes", default="16,64")
    p.add_argument("--budget", type=float, default=1.0, help="seconds per measurement")
    p.add_argument("--memory", default=None, help="measure peak memory of this algorithm's test split instead")
    a = p.parse_args()
    if a.memory:
        tracemalloc.start()
        start = time.perf_counter()
        ds = generate(a.memory, split="test")
        took = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
        print(f"{a.memory} test split: {len(ds)} samples, n={ds.n}, T max={ds.max_length}, {took:.2f} s, "
              f"peak_traced_mb={peak / 2**20:.1f}")
        return
    for name in a.algorithms.split(","):
        for size in (int(s) for s in a.sizes.split(",")):
            rate = measure(name, size, a.budget)
            ref = REFERENCE.get(name, (None, None))[(16, 64).index(size)] if size in (16, 64) else None
            extra = f" ref={ref} speedup={rate / ref:.1f}x" if ref else ""
            print(f"{name:30s} n={size:<3d} samples_per_s={rate:.0f}{extra}", flush=True)


if __name__ == "__main__":
    main()
