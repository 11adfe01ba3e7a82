"""Benchmark of the sparse form (relreason/models/sparse.py): peak memory and time of one evaluation
pass, dense node pairs vs edge lists, on large sparse graphs. Prints figures; it is not a test.

    .venv/bin/python scripts/bench_sparse.py          # bfs, bellman_ford; n = 256, 1600; dense and sparse
    .venv/bin/python scripts/bench_sparse.py --algorithms bfs --sizes 1600 --models pgn,gat --family ws

Every case runs in a fresh process with one torch thread (`--threads`), as `relreason eval` runs: it
generates `--num` graphs of the family, runs the algorithm on them (numpy, dense [N, N] inputs, as the
data side does), builds the model (`--hidden`, CLRS default 128; untrained weights: the cost does not
depend on them) and scores the graphs with `relreason.eval.evaluate.evaluate_dataset` at batch
`--batch`, under `model.sparse: never` (dense) or `always` (sparse). Figures: the process's peak
resident set (resource.getrusage ru_maxrss, Python + torch + data included; beside it the peak after
the imports, and after generating the data and building the model), the evaluation's wall and CPU
time (user + system of the process, generation excluded; on a shared machine the CPU time is the
steadier figure), the graphs' entries (edges both ways + self-loops) and the FLOPs of the dominant
products (below).

A dense case is refused, with its estimate, when the estimate exceeds the memory this machine has
available: DENSE_PAIR_BUFFERS (B, N, N, H) float buffers alive at once, measured with PGN at n = 256
here (scripts/bench_sparse.py --sizes 256), on top of the sparse case's figure.

Families (until `relreason.data.families` lands, where `--graph er:p=..|ws:k=4,p=0.1|delaunay` will
supply them): `er`, G(n, p) with p = 2 ln n / n, the middle of SALSA-CLRS's test range
[ln n / n, 3 ln n / n]; `ws`, Watts-Strogatz with k = 4 and rewiring p = 0.1 (SALSA-CLRS: k in 4..8,
p in 0.05..0.2). Undirected, except for dfs (each edge keeps one random direction); the weighted
algorithms' weights U[0.1, 1), symmetric.

FLOPs (PGN/MPNN only, else "-"): the matrix products of the evaluation, per processor step over P
pairs (dense P = N^2, sparse P = E per graph): the message MLP 2 P H^2 x msg_mlp_layers, the edge
columns' map 2 P F H, and per node-pointer feature the decoder's 2 P H; plus the per-node products
(the update's m1, m2, o1, o2 and the pointer decoders' p1, p2). Elementwise work is not counted.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time

WEIGHTED = ("dijkstra", "mst_prim", "bellman_ford")  # the reference samples weighted graphs for these
LABELS = {"always": "sparse", "never": "dense"}  # model.sparse -> the column's word
DENSE_PAIR_BUFFERS = 6  # (B, N, N, H) float32 buffers alive at once in a dense PGN evaluation (measured)


def peak_rss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2 ** 20 if sys.platform == "darwin" else peak / 1024


def family_graph(rng, family: str, n: int):
    """An undirected graph [N, N] without self-loops (0/1)."""
    import numpy as np

    if family == "er":
        p = 2 * math.log(n) / n
        up = np.triu(rng.random_sample((n, n)) < p, 1)
        return (up | up.T).astype(float)
    if family == "ws":
        k, p = 4, 0.1
        A = np.zeros((n, n), dtype=bool)
        idx = np.arange(n)
        for d in range(1, k // 2 + 1):  # ring lattice, then each lattice edge's far end rewired with prob. p
            far = (idx + d) % n
            rewire = rng.random_sample(n) < p
            far = np.where(rewire, rng.randint(0, n, n), far)
            ok = far != idx
            A[idx[ok], far[ok]] = True
        return (A | A.T).astype(float)
    raise SystemExit(f"unknown family {family!r}: use er or ws")


def dataset(algorithm: str, family: str, n: int, num: int, seed: int):
    import numpy as np

    from relreason.data import ALGORITHMS
    from relreason.data.generate import run_samples

    rng = np.random.RandomState(seed)
    samples = []
    for _ in range(num):
        A = family_graph(rng, family, n)
        if algorithm == "dfs":  # the reference runs dfs on directed graphs: each edge keeps one direction
            A = A * np.where(rng.random_sample((n, n)) < 0.5, np.triu(np.ones((n, n))), np.tril(np.ones((n, n))))
            samples.append((A,))
            continue
        if algorithm in WEIGHTED:
            w = np.triu(rng.uniform(0.1, 1.0, (n, n)), 1)
            A = A * (w + w.T)
        samples.append((A, rng.randint(n)))
    return run_samples(ALGORITHMS.get(algorithm), samples)


def flops(model: str, net, spec, pairs: int, nodes: int) -> float | None:
    """FLOPs of the dominant products of one processor step and its decoding over `pairs` node pairs
    or entries and `nodes` nodes (module docstring); None for processors it does not model."""
    if model not in ("pgn", "pgn_masked", "mpnn"):
        return None
    from relreason.data.specs import Location, Stage
    from relreason.models.sparse import entrywise

    H, L = net.cfg.hidden, net.processor.cfg.msg_mlp_layers
    F = sum(1 for f in spec.values() if f.stage is not Stage.OUTPUT and (f.location is Location.EDGE or entrywise(f)))
    pointers = sum(1 for f in spec.values() if f.stage is not Stage.INPUT and entrywise(f))
    per_pair = L * H * H + F * H + pointers * H
    per_node = 3 * (2 * H) * H + H * H + pointers * 2 * (3 * H) * H  # m1, m2, o1 on z; o2; pointer p1, p2 on h
    return 2.0 * (pairs * per_pair + nodes * per_node)


def run_case(args) -> dict:
    """One case in this process; returns its figures."""
    import numpy as np
    import torch

    from relreason.eval.evaluate import evaluate_dataset
    from relreason.models import ModelConfig, build_model, prepare_spec
    from relreason.models.batch import Batch
    from relreason.models.processors import PROCESSORS
    from relreason.models.sparse import SparseGraph
    from relreason.runtime import keep_freed_memory

    keep_freed_memory()  # as `relreason eval` does
    torch.set_num_threads(args.threads)
    base = peak_rss_mb()
    ds = dataset(args.algorithm, args.family, args.n, args.num, args.seed)
    cfg = ModelConfig(hidden=args.hidden, sparse=args.mode)
    spec = prepare_spec(ds.spec, cfg, args.algorithm)
    torch.manual_seed(0)
    net = build_model(spec, cfg, args.model, PROCESSORS.get(args.model).config())
    data = peak_rss_mb()
    start, cpu = time.perf_counter(), time.process_time()
    scores = evaluate_dataset(net, ds, spec, cfg, torch.device("cpu"), batch_size=args.batch)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    peak = peak_rss_mb()
    total, entries = 0.0, 0
    for i in range(len(ds)):  # per graph: its pairs (dense) or entries (sparse) x the steps it runs
        graph = SparseGraph.from_batch(Batch.from_dataset(ds.take(np.array([i])), cfg, spec))
        entries += graph.entries
        f = flops(args.model, net, spec, graph.entries if args.mode == "always" else args.n ** 2, args.n)
        total = None if f is None else total + f * max(1, int(ds.lengths[i]) - 1)
    return {"peak_mb": peak, "base_mb": base, "data_mb": data, "seconds": seconds, "cpu": cpu, "entries": entries,
            "gflop": None if total is None else total / 1e9, "score": scores.score}


def estimate_dense_mb(n: int, batch: int, hidden: int, sparse_peak_mb: float) -> float:
    return sparse_peak_mb + DENSE_PAIR_BUFFERS * batch * n * n * hidden * 4 / 2 ** 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algorithms", default="bfs,bellman_ford")
    parser.add_argument("--sizes", default="256,1600")
    parser.add_argument("--models", default="pgn", help="processors (comma list); pgn: CLRS-30's baseline")
    parser.add_argument("--modes", default="sparse,dense", help="sparse, dense or both")
    parser.add_argument("--family", default="er", choices=["er", "ws"])
    parser.add_argument("--num", type=int, default=1, help="graphs evaluated")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--case", help=argparse.SUPPRESS)  # internal: run one case, print JSON
    args = parser.parse_args()
    if args.case:
        args.algorithm, n, args.mode, args.model = args.case.split(":")
        args.n = int(n)
        print(json.dumps(run_case(args)))
        return

    from relreason.models.processors import PROCESSORS
    from relreason.models.sparse import SparseForm
    from relreason.runtime import available_memory

    room_mb = available_memory() / 2 ** 20
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "RELREASON_PROGRESS": "0"}
    print(f"one evaluation of {args.num} graph(s), batch {args.batch}, H {args.hidden}, {args.threads} thread(s), "
          f"family {args.family}; available memory {room_mb / 1024:.1f} GB")
    print(f"{'algorithm':<13}{'n':>6}  {'model':<15}{'mode':<7}{'entries':>9}{'peak RSS':>11}{'imports':>10}"
          f"{'+ data':>10}"
          f"{'wall':>9}{'CPU':>9}{'GFLOP':>9}")
    models = args.models.split(",")
    modes = [m for m in ("always", "never") if LABELS[m] in args.modes.split(",")]
    for algorithm in args.algorithms.split(","):
        for n in map(int, args.sizes.split(",")):
            for model in models:
                sparse_peak = 0.0
                for mode in modes:  # sparse first: the dense estimate builds on its figure
                    label = LABELS[mode]
                    head = f"{algorithm:<13}{n:>6}  {model:<15}{label:<7}"
                    if mode == "never":
                        need = estimate_dense_mb(n, args.batch, args.hidden, sparse_peak)
                        if need > room_mb:
                            print(f"{head}{'':>9}  refused: needs ~{need / 1024:.1f} GB "
                                  f"(> {room_mb / 1024:.1f} GB available)")
                            continue
                    cmd = [sys.executable, __file__, "--case", f"{algorithm}:{n}:{mode}:{model}",
                           *[f"--{k}={getattr(args, k)}" for k in ("family", "num", "batch", "hidden", "threads",
                                                                    "seed")]]
                    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
                    if done.returncode:
                        print(f"{head}  failed: {done.stderr.strip().splitlines()[-1]}")
                        continue
                    r = json.loads(done.stdout.strip().splitlines()[-1])
                    if mode == "always":
                        sparse_peak = r["peak_mb"]
                    entries = "-" if r["entries"] is None else f"{r['entries']:,}"
                    gflop = "-" if r["gflop"] is None else f"{r['gflop']:.1f}"
                    print(f"{head}{entries:>9}{r['peak_mb']:>8.0f} MB{r['base_mb']:>7.0f} MB{r['data_mb']:>7.0f} MB"
                          f"{r['seconds']:>8.2f}s{r['cpu']:>8.2f}s{gflop:>9}", flush=True)
    other = [m for m in models if PROCESSORS.get(m).cls.sparse_form is SparseForm.EDGES]
    if other:
        print(f"{', '.join(other)}: the sparse form passes messages along the edges where the dense one uses "
              "all node pairs: another model with the same weights (relreason/models/sparse.py)")


if __name__ == "__main__":
    main()
