#!/usr/bin/env python
"""Graph family generation time: milliseconds per graph for every family, at sizes up to SALSA-CLRS's 1,600.

    .venv/bin/python scripts/bench_families.py                          # every family, n = 16, 64, 400, 1600
    .venv/bin/python scripts/bench_families.py --graphs ws:k=4,p=0.1,delaunay --sizes 1600 --repeat 10
    .venv/bin/python scripts/bench_families.py --input dijkstra         # the whole input: weights, source too

One line per (graph, size): the median and fastest milliseconds per graph over `--repeat` graphs
(each from its own seed), the mean number of undirected edges, and the fraction of connected graphs.
Times are the process's CPU time (user + system; on a machine shared with other jobs, CPU time is
what stays comparable) unless `--clock wall`. `--input ALG` times the algorithm's whole sampled input
instead of the bare graph (direction, weights and source as that algorithm's sampler draws them).
A benchmark, not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from relreason.data.algorithms import ALGORITHMS  # noqa: E402
from relreason.data.families import FAMILIES, graph_name, is_connected, parse_graphs  # noqa: E402
from relreason.data.generate import family_sampler  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", default=",".join(FAMILIES.names()), help="comma list of graphs, as --graph takes them")
    ap.add_argument("--sizes", default="16,64,400,1600", help="comma list of node counts")
    ap.add_argument("--repeat", type=int, default=5, help="graphs per (graph, size)")
    ap.add_argument("--input", default=None, help="time this graph algorithm's whole sampled input instead")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    args = ap.parse_args()
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    sizes = [int(x) for x in args.sizes.split(",")]
    specs = [s for s in parse_graphs(args.graphs) if s is not None]
    sample = ALGORITHMS.get(args.input) if args.input else None
    print(f"# ms per graph ({args.clock} time), {args.repeat} graphs each"
          + (f"; whole {args.input} input" if sample else ""))
    for spec in specs:
        for n in sizes:
            if n < spec.min_size():
                print(f"{str(spec):36s} n={n:5d}  (needs at least {spec.min_size()} nodes)")
                continue
            draw = family_sampler(sample, spec) if sample else None
            times, edge_counts, connected = [], [], []
            for seed in range(args.repeat):
                rng = np.random.RandomState(seed)
                start = clock()
                out = draw(rng, n) if draw else spec.adjacency(rng, n)
                times.append(1000 * (clock() - start))
                adj = (np.asarray(out[0] if draw else out) != 0)
                adj = adj | adj.T
                edge_counts.append(int(np.triu(adj, 1).sum()))
                connected.append(is_connected(adj))
            print(f"{graph_name(spec):36s} n={n:5d}  median {statistics.median(times):8.1f} ms  "
                  f"min {min(times):8.1f} ms  edges {statistics.mean(edge_counts):9.0f}  "
                  f"connected {sum(connected) / len(connected):.0%}", flush=True)


if __name__ == "__main__":
    main()
