"""Lobster graphs: end-to-end shortest-path distance with size generalization (Tang et al. 2020,
the second benchmark of the Relational Transformer paper).

A lobster is a backbone path of n nodes; L1 ~ Binomial(n, 0.2) first-level leaves, each attached to
a uniformly drawn backbone node; L2 ~ Binomial(L1, 0.2) second-level leaves, each attached to a
uniformly drawn first-level leaf; undirected. Node labels are shuffled by a random permutation so
that node order carries no structure. A source and a destination are drawn from all nodes (distinct,
so that the relative loss |y - y_hat| / |y| is defined); the target is their shortest-path distance
(hops, or the sum of U[0.5, 1.5) edge weights for `lobster_weighted`). There are no hints.

Features: `node_type` (node, categorical: source / destination / other), `A` (edge, scalar: 1 for
an edge or its weight), `adj` (edge, mask: A != 0 plus self loops), `distance` (graph, scalar).
Graphs of one split differ in size: they are padded to the split's largest and `Dataset.sizes`
gives each graph's real node count.
"""

from __future__ import annotations

from types import MappingProxyType

import numpy as np

from relreason import __version__
from relreason.data.probes import graph_adjacency
from relreason.data.specs import Feature, Location, Stage, Type, spec_hash, spec_to_json
from relreason.data.trajectory import Dataset
from relreason.errors import RelreasonError

LOBSTER_SPEC = MappingProxyType({
    "node_type": Feature("node_type", Stage.INPUT, Location.NODE, Type.CATEGORICAL, 3),
    "A": Feature("A", Stage.INPUT, Location.EDGE, Type.SCALAR),
    "adj": Feature("adj", Stage.INPUT, Location.EDGE, Type.MASK),
    "distance": Feature("distance", Stage.OUTPUT, Location.GRAPH, Type.SCALAR),
})

TRAIN_BACKBONES = (4, 34)  # backbone lengths drawn uniformly from [4, 34) for train and validation
TEST_BACKBONE = 100  # the OOD test backbone
MAX_BACKBONE = 2000  # beyond this the padded [B, N, N] features do not fit a CPU's memory
SPLITS = {"train": (1, 2000), "val": (2, 200), "test": (3, 200)}  # seed, default sample count
SOURCE, DESTINATION, OTHER = 0, 1, 2


def lobster_graph(rng: np.random.RandomState, backbone: int, weighted: bool) -> tuple[np.ndarray, int, int, float]:
    """One lobster: (A [M, M] symmetric weights, source, destination, distance)."""
    l1 = rng.binomial(backbone, 0.2)
    l2 = rng.binomial(l1, 0.2) if l1 else 0
    m = backbone + l1 + l2
    parent = np.empty(m - 1, dtype=np.int64)  # the tree's edges: node k+1 -- parent[k]
    parent[: backbone - 1] = np.arange(backbone - 1)  # backbone path i+1 -- i
    parent[backbone - 1: backbone - 1 + l1] = rng.randint(0, backbone, size=l1)
    if l2:
        parent[backbone - 1 + l1:] = backbone + rng.randint(0, l1, size=l2)
    child = np.arange(1, m)
    w = rng.uniform(0.5, 1.5, size=m - 1) if weighted else np.ones(m - 1)
    perm = rng.permutation(m)  # relabel nodes: order carries no structure
    a = np.zeros((m, m))
    a[perm[child], perm[parent]] = w
    a[perm[parent], perm[child]] = w
    src, dst = rng.choice(m, size=2, replace=False)
    return a, int(src), int(dst), tree_distance(a, int(src), int(dst))


def tree_distance(a: np.ndarray, src: int, dst: int) -> float:
    """Weighted path length between two nodes of a tree (one traversal from src)."""
    dist = np.full(a.shape[0], -1.0)
    dist[src] = 0.0
    frontier = [src]
    while frontier:
        nxt = []
        for u in frontier:
            for v in np.flatnonzero(a[u]):
                if dist[v] < 0:
                    dist[v] = dist[u] + a[u, v]
                    nxt.append(v)
        frontier = nxt
    return float(dist[dst])


def generate_lobster(num: int, seed: int, backbone: int | tuple[int, int], weighted: bool = False,
                     name: str = "lobster", split: str = "custom") -> Dataset:
    """A split of `num` lobsters; `backbone` is a fixed length or a [lo, hi) range drawn per graph."""
    if num <= 0:
        raise RelreasonError(f"num {num} must be a positive number of samples", "e.g. --num 200")
    lo, hi = (backbone, backbone + 1) if isinstance(backbone, int) else backbone
    if not 2 <= lo < hi <= MAX_BACKBONE + 1:
        raise RelreasonError(f"backbone length {backbone} is out of range", f"use 2 <= size <= {MAX_BACKBONE}")
    rng = np.random.RandomState(seed)
    graphs = [lobster_graph(rng, int(rng.randint(lo, hi)), weighted) for _ in range(num)]
    sizes = np.array([g[0].shape[0] for g in graphs], dtype=np.int64)
    n = int(sizes.max())
    A = np.zeros((num, n, n))
    node_type = np.zeros((num, n, 3), dtype=np.float32)
    node_type[:, :, OTHER] = 1.0
    for b, (a, src, dst, _) in enumerate(graphs):
        m = a.shape[0]
        A[b, :m, :m] = a
        node_type[b, src] = np.eye(3, dtype=np.float32)[SOURCE]
        node_type[b, dst] = np.eye(3, dtype=np.float32)[DESTINATION]
    node_type[np.arange(n)[None, :] >= sizes[:, None]] = 0.0  # padded nodes have no type
    adj = graph_adjacency(A)
    adj[np.arange(n)[None, :] >= sizes[:, None]] = 0.0  # no self loop on padding
    distance = np.array([g[3] for g in graphs])
    meta = {"algorithm": name, "split": split, "size": lo if hi == lo + 1 else [lo, hi], "num": num, "seed": seed,
            "spec": spec_to_json(LOBSTER_SPEC), "spec_hash": spec_hash(LOBSTER_SPEC), "relreason": __version__}
    return Dataset(name, LOBSTER_SPEC, {"node_type": node_type, "A": A, "adj": adj}, {}, {"distance": distance},
                   np.ones(num, dtype=np.int64), meta, sizes)


def lobster_split(name: str, weighted: bool, split: str | None, size: int | None = None, num: int | None = None,
                  seed: int | None = None) -> Dataset:
    """A canonical split (train/val: backbones in [4, 34); test: backbone 100) or a custom one.

    `size` fixes the backbone length (e.g. the OOD test size); `num`/`seed` override the split's."""
    if split is not None and split not in SPLITS:
        raise RelreasonError(f"unknown split {split!r}", "use one of: " + ", ".join(SPLITS))
    default_seed, default_num = SPLITS[split or "test"]
    if split is None and (size is None or num is None or seed is None):
        raise RelreasonError("a custom lobster split needs --size, --num and --seed", "or pass --split train|val|test")
    backbone: int | tuple[int, int] = size if size is not None else (TEST_BACKBONE if split == "test"
                                                                     else TRAIN_BACKBONES)
    seed = default_seed if seed is None else seed
    num = default_num if num is None else num
    custom = split is None or size is not None and backbone != (TEST_BACKBONE if split == "test" else None) \
        or seed != default_seed or num != default_num
    label = split if not custom else f"custom_n{size}_s{seed}_k{num}"
    return generate_lobster(num, seed, backbone, weighted, name, label)
