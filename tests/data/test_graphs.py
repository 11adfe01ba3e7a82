"""Graph algorithms against independent textbook code written here: a queue BFS, Bellman-Ford
rounds, a heap Dijkstra, union-find Kruskal and array Prim for minimum spanning weights. Plus hint
invariants, small hand-traced runs, the reference's tie rules (extract-min = argsort, Kruskal's
edge order) and the exactness of the fast Bernoulli draw behind every Erdos-Renyi sampler.

Weights on a coarse integer grid make ties common, which is where ports usually go wrong.

The DFS-based graph algorithms (the second half) against their own references: a recursive textbook
DFS, topological-order checks, Bellman-Ford, brute-force cut vertices and bridges (remove, count
components), and SCCs from the transitive closure; plus hint invariants and hand-checked runs.
"""

from __future__ import annotations

import heapq
import math
from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graph_references import bellman_ford_distances
from relreason.data import generate, parse_graph, run_algorithm
from relreason.data.algorithms.graphs import KruskalPhase, _extract_min, _sorted_edges
from relreason.data import samplers
from relreason.data.algorithms import ALGORITHMS
from relreason.data.probes import ProbeError, Recorder
from relreason.data.samplers import RandomState

# ---------------------------------------------------------------- independent reference code


def bfs_levels(A: np.ndarray, s: int) -> np.ndarray:
    """Hop distance from s along edges A[i, j] > 0 (-1 where unreachable)."""
    level = np.full(len(A), -1)
    level[s] = 0
    queue = deque([s])
    while queue:
        i = queue.popleft()
        for j in np.flatnonzero(A[i] > 0):
            if level[j] < 0:
                level[j] = level[i] + 1
                queue.append(j)
    return level


def heap_dijkstra(A: np.ndarray, s: int) -> np.ndarray:
    dist = np.full(len(A), np.inf)
    dist[s] = 0.0
    heap = [(0.0, s)]
    while heap:
        d, u = heapq.heappop(heap)
        if d > dist[u]:
            continue
        for v in np.flatnonzero(A[u]):
            if d + A[u, v] < dist[v]:
                dist[v] = d + A[u, v]
                heapq.heappush(heap, (dist[v], v))
    return dist


def restricted_distances(A: np.ndarray, i: int, allowed: int) -> np.ndarray:
    """Shortest i -> j distances through intermediate nodes < `allowed` only (Floyd-Warshall's D_k)."""
    dist = np.full(len(A), np.inf)
    heap = [(0.0, i)]
    done = set()
    while heap:
        d, u = heapq.heappop(heap)
        if u in done:
            continue
        done.add(u)
        if u != i and u >= allowed:
            continue  # may end a path here, not pass through
        for v in np.flatnonzero(A[u]):
            if d + A[u, v] < dist[v]:
                dist[v] = d + A[u, v]
                heapq.heappush(heap, (dist[v], v))
    return dist


def components(A: np.ndarray) -> list[list[int]]:
    """Connected components of the undirected graph with edges A[i, j] != 0."""
    linked = ((A != 0) | (A != 0).T).astype(float)
    seen, comps = set(), []
    for s in range(len(A)):
        if s not in seen:
            comp = [int(v) for v in np.flatnonzero(bfs_levels(linked, s) >= 0)]
            seen.update(comp)
            comps.append(comp)
    return comps


def kruskal_weight(A: np.ndarray, nodes: list[int]) -> float:
    """Minimum spanning weight of the component `nodes` (union-find by size, no path compression)."""
    root = {v: v for v in nodes}
    size = {v: 1 for v in nodes}

    def find(v):
        while root[v] != v:
            v = root[v]
        return v

    total = 0.0
    for w, i, j in sorted((A[i, j], i, j) for i in nodes for j in nodes if i < j and A[i, j] > 0):
        ri, rj = find(i), find(j)
        if ri != rj:
            if size[ri] < size[rj]:
                ri, rj = rj, ri
            root[rj], size[ri] = ri, size[ri] + size[rj]
            total += w
    return total


def prim_weight(A: np.ndarray, nodes: list[int]) -> float:
    """Minimum spanning weight of the component `nodes` (O(n^2) array Prim)."""
    best = {v: np.inf for v in nodes}
    best[nodes[0]] = 0.0
    todo, total = set(nodes), 0.0
    while todo:
        u = min(todo, key=best.__getitem__)
        todo.remove(u)
        total += best[u]
        for v in todo:
            if A[u, v] > 0:
                best[v] = min(best[v], A[u, v])
    return total


def graphs(symmetric: bool, max_n: int = 9, weights=(0, 1, 2, 3)):
    """Hypothesis strategy: small graphs on an integer weight grid (0 = no edge)."""

    def build(args):
        n, flat = args
        A = np.array(flat, float).reshape(n, n)
        return np.triu(A, 1) + np.triu(A, 1).T if symmetric else A

    return st.integers(1, max_n).flatmap(
        lambda n: st.tuples(st.just(n), st.lists(st.sampled_from(weights), min_size=n * n, max_size=n * n))
    ).map(build)


def samples(name: str, num: int, size: int, seed: int):
    """The trajectories of a generated split, with the source as an int where there is one."""
    ds = generate(name, num=num, size=size, seed=seed)
    for b in range(len(ds)):
        t = ds.trajectory(b)
        s = int(t.inputs["s"].argmax()) if "s" in t.inputs else None
        yield t.inputs["A"], s, t


# ---------------------------------------------------------------- BFS


def check_bfs(A: np.ndarray, s: int, t) -> None:
    level = bfs_levels(A, s)
    pi = t.outputs["pi"]
    for v in range(len(A)):
        if v == s or level[v] < 0:
            assert pi[v] == v
        else:  # the lowest-numbered neighbour one level closer to s
            assert pi[v] == min(u for u in range(len(A)) if level[u] == level[v] - 1 and A[u, v] > 0)
    reach = t.hints["reach_h"]
    assert len(reach) == level.max() + 1
    for step, r in enumerate(reach):
        np.testing.assert_array_equal(r, (level >= 0) & (level <= step))
    np.testing.assert_array_equal(t.hints["pi_h"][-1], pi)


def test_bfs_on_sampled_graphs():
    for A, s, t in samples("bfs", num=40, size=12, seed=5):
        check_bfs(A, s, t)


@settings(max_examples=80, deadline=None)
@given(graphs(symmetric=False, weights=(-1, 0, 0, 1, 2)), st.integers(0, 8))
def test_bfs_on_directed_graphs(A, s):
    s %= len(A)
    check_bfs(A, s, run_algorithm("bfs", A, s))


def test_bfs_hand_traced_path():
    A = np.zeros((4, 4))
    for i, j in ((0, 1), (1, 2), (2, 3)):
        A[i, j] = A[j, i] = 1
    t = run_algorithm("bfs", A, 1)
    np.testing.assert_array_equal(t.hints["reach_h"], [[0, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]])
    np.testing.assert_array_equal(t.hints["pi_h"], [[0, 1, 2, 3], [1, 1, 1, 3], [1, 1, 1, 2]])
    np.testing.assert_array_equal(t.outputs["pi"], [1, 1, 1, 2])


# ---------------------------------------------------------------- Dijkstra and Prim


def check_dijkstra(A: np.ndarray, s: int, t) -> None:
    dist = bellman_ford_distances(A, s)
    reach = dist < np.inf
    pi, d, u = t.outputs["pi"], t.hints["d"][-1], t.hints["u"].argmax(-1)
    np.testing.assert_allclose(d[reach], dist[reach])
    for v in range(len(A)):
        if v == s or not reach[v]:
            assert pi[v] == v
        else:  # a shortest-path tree edge
            assert A[pi[v], v] != 0 and np.isclose(dist[pi[v]] + A[pi[v], v], dist[v])
    assert len(u) == 1 + reach.sum()  # the initial state, then one hint per extracted node
    assert u[0] == s and sorted(u[1:]) == sorted(np.flatnonzero(reach))
    assert np.all(np.diff(dist[u[1:]]) >= -1e-12)  # extracted in order of distance
    np.testing.assert_array_equal(t.hints["mark"][-1], reach)
    assert not t.hints["in_queue"][-1].any()
    first_to_reach(A, u, pi, lambda w, v: dist[w] + A[w, v] == dist[v])


def first_to_reach(A: np.ndarray, order: np.ndarray, pi: np.ndarray, best) -> None:
    """The reference's tie rule: a value changes only on a strict improvement, so a node's parent is
    the earliest extracted node that offers its final value (`best(parent, node)`). Checked where
    values are exact (integer weights)."""
    if not np.array_equal(A, np.round(A)):
        return
    extracted = list(order[1:])
    for k, v in enumerate(extracted):
        offers = [w for w in extracted[:k] if A[w, v] != 0 and best(w, v)]
        if offers:
            assert pi[v] == offers[0]


def test_dijkstra_on_sampled_graphs():
    for A, s, t in samples("dijkstra", num=40, size=12, seed=5):
        check_dijkstra(A, s, t)


@settings(max_examples=80, deadline=None)
@given(graphs(symmetric=False), st.integers(0, 8))
def test_dijkstra_on_directed_graphs_with_ties(A, s):
    s %= len(A)
    check_dijkstra(A, s, run_algorithm("dijkstra", A, s))


def test_dijkstra_hand_traced_triangle():
    A = np.zeros((3, 3))
    for i, j, w in ((0, 1, 1.0), (1, 2, 1.0), (0, 2, 3.0)):
        A[i, j] = A[j, i] = w
    t = run_algorithm("dijkstra", A, 0)
    np.testing.assert_array_equal(t.hints["u"].argmax(-1), [0, 0, 1, 2])
    np.testing.assert_array_equal(t.hints["d"], [[0, 0, 0], [0, 1, 3], [0, 1, 2], [0, 1, 2]])
    np.testing.assert_array_equal(t.hints["in_queue"], [[1, 0, 0], [0, 1, 1], [0, 0, 1], [0, 0, 0]])
    np.testing.assert_array_equal(t.outputs["pi"], [0, 0, 1])


def check_prim(A: np.ndarray, s: int, t) -> None:
    comp = next(c for c in components(A) if s in c)
    pi, key = t.outputs["pi"], t.hints["key"][-1]
    for v in range(len(A)):
        if v not in comp or v == s:
            assert pi[v] == v
        else:
            assert A[pi[v], v] != 0 and pi[v] in comp and key[v] == A[pi[v], v]
            w, hops = v, 0  # the tree edges lead every node of the component to s
            while w != s and hops <= len(A):
                w, hops = pi[w], hops + 1
            assert w == s
    assert np.isclose(sum(A[pi[v], v] for v in comp if v != s), kruskal_weight(A, comp))
    order = t.hints["u"].argmax(-1)
    assert len(order) == 1 + len(comp)
    first_to_reach(A, order, pi, lambda w, v: A[w, v] == key[v])


def test_prim_on_sampled_graphs():
    for A, s, t in samples("mst_prim", num=40, size=12, seed=6):
        check_prim(A, s, t)


@settings(max_examples=80, deadline=None)
@given(graphs(symmetric=True), st.integers(0, 8))
def test_prim_on_graphs_with_tied_weights(A, s):
    s %= len(A)
    check_prim(A, s, run_algorithm("mst_prim", A, s))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0.0, 1.0, 2.0, 1e9, 1e9 + 1.0]), min_size=6, max_size=6),
                min_size=1, max_size=5))
def test_extract_min_is_the_references_argsort(rows):
    keys = np.array(rows)
    in_queue = keys < 1e9
    u = _extract_min(keys - 1e9 * ~in_queue, in_queue)  # the value and queue behind each reference key
    for row, pick in zip(keys, u):
        if row.min() < 1e9:  # a row with nothing queued stops its sample: any pick will do
            assert pick == np.argsort(row)[0]


# ---------------------------------------------------------------- Floyd-Warshall


def check_floyd_warshall(A: np.ndarray, t) -> None:
    n = len(A)
    Pi = t.outputs["Pi"]
    for i in range(n):
        dist = heap_dijkstra(A, i)
        for j in range(n):
            if i == j:
                continue
            if dist[j] == np.inf:
                assert Pi[i, j] == i
                continue
            length, w, hops = 0.0, j, 0  # walk the predecessors back from j to i
            while w != i and hops <= n:
                length, w, hops = length + A[Pi[i, w], w], Pi[i, w], hops + 1
            assert w == i and np.isclose(length, dist[j])
    D, msk, k = t.hints["D"], t.hints["msk"], t.hints["k"]
    assert len(D) == n
    np.testing.assert_array_equal(k, np.eye(n))
    np.testing.assert_array_equal(D[0], A)
    np.testing.assert_array_equal(msk[0], (A != 0) | np.eye(n, dtype=bool))
    for step in range(n):  # D before step k: shortest paths through nodes < k, known where msk is set
        for i in range(n):
            dist = restricted_distances(A, i, step)
            off = np.arange(n) != i
            np.testing.assert_array_equal(msk[step][i][off], dist[off] < np.inf)
            np.testing.assert_allclose(D[step][i][off & (dist < np.inf)], dist[off & (dist < np.inf)])


def test_floyd_warshall_on_sampled_graphs():
    for A, _, t in samples("floyd_warshall", num=12, size=8, seed=7):
        check_floyd_warshall(A, t)


@settings(max_examples=50, deadline=None)
@given(graphs(symmetric=False, max_n=7))
def test_floyd_warshall_on_directed_graphs_with_ties(A):
    check_floyd_warshall(A, run_algorithm("floyd_warshall", A))


def test_floyd_warshall_hand_traced_path():
    A = np.zeros((3, 3))
    A[0, 1] = A[1, 0] = 1.0
    A[1, 2] = A[2, 1] = 2.0
    t = run_algorithm("floyd_warshall", A)
    np.testing.assert_array_equal(t.outputs["Pi"], [[0, 0, 1], [1, 1, 1], [1, 2, 2]])
    assert t.hints["msk"][1][0, 2] == 0 and t.hints["msk"][2][0, 2] == 1  # known only once k = 1 was used
    assert t.hints["D"][2][0, 2] == 3.0


# ---------------------------------------------------------------- Kruskal


def check_kruskal(A: np.ndarray, t) -> None:
    n = len(A)
    in_mst = t.outputs["in_mst"].astype(bool)
    edges = (np.triu(A, 1) > 0) | (np.triu(A, 1) > 0).T
    np.testing.assert_array_equal(in_mst, in_mst.T)
    assert not (in_mst & ~edges).any()
    comps = components(np.where(edges, A, 0))
    assert in_mst.sum() // 2 == n - len(comps)  # a spanning forest: n - #components edges...
    for comp in comps:  # ...with no edge between components and a minimum weight in each
        assert not in_mst[np.ix_(comp, [v for v in range(n) if v not in comp])].any()
        assert np.isclose(np.triu(np.where(in_mst, A, 0))[np.ix_(comp, comp)].sum(), prim_weight(A, comp))
    grown = t.hints["in_mst_h"]
    assert not grown[0].any() and np.all(np.diff(grown, axis=0) >= 0)
    np.testing.assert_array_equal(grown[-1], in_mst)
    phase = t.hints["phase"].argmax(-1)
    assert phase[0] == KruskalPhase.UNION and phase[-1] == KruskalPhase.UNION
    assert (phase == KruskalPhase.UNION).sum() == 1 + edges.sum() // 2  # one union step per edge
    pi = t.hints["pi"][-1]  # the final union-find: one root per component

    def root(v):
        while pi[v] != v:
            v = pi[v]
        return v

    assert sorted({root(c[0]) for c in comps}) == sorted(root(v) for v in range(n) if pi[v] == v)
    assert all(len({root(v) for v in comp}) == 1 for comp in comps)


def test_kruskal_on_sampled_graphs():
    for A, _, t in samples("mst_kruskal", num=40, size=12, seed=8):
        check_kruskal(A, t)


@settings(max_examples=80, deadline=None)
@given(graphs(symmetric=True))
def test_kruskal_on_graphs_with_tied_weights(A):
    check_kruskal(A, run_algorithm("mst_kruskal", A))


def test_kruskal_hand_traced_triangle():
    """Edges by weight (0,1), (1,2), (0,2): the third finds 0 -> 1 -> 2 (compressing the path) and
    2 as the root of both ends, so it is left out."""
    A = np.zeros((3, 3))
    for i, j, w in ((0, 1, 0.1), (1, 2, 0.2), (0, 2, 0.3)):
        A[i, j] = A[j, i] = w
    t = run_algorithm("mst_kruskal", A)
    h = {k: (v.argmax(-1) if k not in ("pi", "in_mst_h", "mask_u", "mask_v") else v) for k, v in t.hints.items()}
    np.testing.assert_array_equal(h["phase"], [0, 1, 0, 1, 0, 1, 1, 1, 0])
    np.testing.assert_array_equal(h["u"], [0, 0, 0, 1, 1, 0, 0, 0, 0])
    np.testing.assert_array_equal(h["v"], [0, 1, 1, 2, 2, 2, 2, 2, 2])
    np.testing.assert_array_equal(h["root_u"], [0, 0, 0, 1, 1, 0, 1, 2, 2])
    np.testing.assert_array_equal(h["pi"], [[0, 1, 2], [0, 1, 2], [1, 1, 2], [1, 1, 2], [1, 2, 2],
                                            [1, 2, 2], [1, 2, 2], [2, 2, 2], [2, 2, 2]])
    np.testing.assert_array_equal(h["mask_u"][7], [1, 1, 1])
    np.testing.assert_array_equal(t.outputs["in_mst"], [[0, 1, 0], [1, 0, 1], [0, 1, 0]])


@settings(max_examples=40, deadline=None)
@given(st.lists(graphs(symmetric=True, max_n=6, weights=(0, 1, 1, 2)), min_size=1, max_size=4))
def test_kruskal_edge_order_is_the_references(batch):
    """Row-major edge list i < j with A[i, j] > 0, then the reference's np.argsort on the weights."""
    n = max(len(A) for A in batch)
    A = np.stack([np.pad(a, (0, n - len(a))) for a in batch])
    heads, tails, counts = _sorted_edges(A)
    for b, a in enumerate(A):
        pairs = [(i, j) for i in range(n) for j in range(i + 1, n) if a[i, j] > 0]
        order = np.argsort([a[i, j] for i, j in pairs])
        assert counts[b] == len(pairs)
        assert list(zip(heads[b, : counts[b]], tails[b, : counts[b]])) == [pairs[k] for k in order]


# ---------------------------------------------------------------- samplers


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([0.0, 1e-9, 0.01, 0.2, 0.3, 0.5, 0.5000001, 0.7, 0.99, 1.0]) | st.floats(0, 1),
       st.integers(1, 40), st.integers(1, 40), st.integers(0, 2**32 - 1))
def test_bernoulli_equals_numpy_binomial(p, rows, cols, seed):
    a, b = RandomState(seed), RandomState(seed)
    expected = a.binomial(1, p, size=(rows, cols))
    got = samplers.bernoulli(b, p, (rows, cols))
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
    assert a.random_sample() == b.random_sample()  # the same number of draws


def inversion_draws(rng: RandomState, p: float, count: int, exp) -> tuple[list[int], int]:
    """numpy's scalar binomial inversion loop for n = 1, one draw at a time; also counts redraws."""
    flip = p > 0.5
    p1 = 1.0 - p if flip else p
    q = 1.0 - p1
    qn = exp(math.log(q))
    bound = min(1, int(p1 + 10.0 * math.sqrt(p1 * q + 1)))
    out, redraws = [], 0
    for _ in range(count):
        x, px, u = 0, qn, rng.random_sample()
        while u > px:
            x += 1
            if x > bound:
                x, px, u, redraws = 0, qn, rng.random_sample(), redraws + 1
            else:
                u -= px
                px = ((1 - x + 1) * p1 * px) / (x * q)
        out.append(1 - x if flip else x)
    return out, redraws


@pytest.mark.parametrize("p", [0.2, 0.5, 0.8])
def test_bernoulli_redraws_as_numpy_does(p, monkeypatch):
    """With exact libm the redraw branch is (nearly) unreachable; a slightly low exp makes it
    frequent, and the vectorized draw must still follow the scalar loop draw for draw."""
    true_exp = math.exp
    monkeypatch.setattr(math, "exp", lambda x: true_exp(x) * (1 - 1e-2))
    expected, redraws = inversion_draws(RandomState(3), p, 4000, math.exp)
    rng = RandomState(3)
    got = samplers.bernoulli(rng, p, (40, 100))
    assert redraws > 0
    np.testing.assert_array_equal(got.ravel(), expected)


@pytest.mark.parametrize("weighted, source", [(False, True), (True, True), (True, False)])
@pytest.mark.parametrize("p, n", [(0.5, 5), (0.2, 16), (0.5, 40)])
def test_graph_sampler_draws_as_the_reference(p, n, weighted, source):
    """The reference's calls, written out: choice over the p's, binomial, uniform weights, choice
    of the source."""
    ref, rng = RandomState(9), RandomState(9)
    for _ in range(3):
        p_drawn = ref.choice((p,))
        mat = ref.binomial(1, p_drawn, size=(n, n))
        mat *= mat.T
        if weighted:
            w = ref.uniform(low=0.0, high=1.0, size=(n, n))
            w *= w.T
            mat = mat.astype(float) * np.sqrt(w + 1e-3)
        got = samplers.graph_sampler(p, weighted=weighted, source=source)(rng, n)
        np.testing.assert_array_equal(got[0], mat)
        if source:
            assert got[1] == ref.choice(n)
        assert len(got) == 1 + source


def graph_samplers() -> list[str]:
    return [n for n in ALGORITHMS.names() if isinstance(ALGORITHMS.get(n).sample, samplers.GraphSampler)]


def assert_batch_equals_calls(sample: samplers.GraphSampler, n: int, count: int, seed: int) -> None:
    """`batch` gives the stacked inputs of `count` calls and leaves the generator where they leave it."""
    one, many = RandomState(seed), RandomState(seed)
    calls = [sample(one, n) for _ in range(count)]
    got = sample.batch(many, n, count)
    assert len(got) == len(calls[0])
    for i, stacked in enumerate(got):
        want = np.stack([np.asarray(c[i]) for c in calls])
        assert stacked.dtype == want.dtype
        np.testing.assert_array_equal(stacked, want)
    assert one.random_sample() == many.random_sample()


@pytest.mark.parametrize("name", graph_samplers())
@pytest.mark.parametrize("n, count", [(2, 3), (7, 9), (16, 5), (33, 70)])  # 70 at n = 33: several blocks
def test_graph_sampler_batch_equals_its_calls(name, n, count):
    assert_batch_equals_calls(ALGORITHMS.get(name).sample, n, count, seed=n)


@pytest.mark.parametrize("p", [0.2, 0.5, 0.8])
@pytest.mark.parametrize("directed, acyclic", [(False, False), (True, False), (True, True)])
def test_graph_sampler_batch_redraws_as_its_calls(p, directed, acyclic, monkeypatch):
    """A slightly low exp makes the binomial's redraws frequent (see test_bernoulli_redraws_as_numpy_does):
    the batch must take each redraw's uniforms where a call takes them, before the rest of its sample."""
    true_exp = math.exp
    monkeypatch.setattr(math, "exp", lambda x: true_exp(x) * (1 - 1e-2))
    sample = samplers.graph_sampler(p, directed=directed, acyclic=acyclic, weighted=True, source=True)
    assert_batch_equals_calls(sample, 12, 6, seed=4)


def test_graph_sampler_batch_leaves_graph_families_to_the_calls():
    sample = samplers.with_options(ALGORITHMS.get("bfs").sample, graph=parse_graph("ws:k=4,p=0.1"))
    assert sample.batch(RandomState(0), 8, 2) is None


# ---------------------------------------------------------------- the DFS family: DFS, topological sort,
# articulation points, bridges, strongly connected components (and Bellman-Ford from the same sampler)

TICK = 0.01


def sampled(name: str, n: int, seed: int) -> tuple:
    return ALGORITHMS.get(name).sample(RandomState(seed), n)


def random_graph(seed: int, n: int, p: float, *, undirected: bool = False) -> np.ndarray:
    """A graph from a generator other than the samplers (self-loops included)."""
    rng = np.random.default_rng(seed)
    A = (rng.random((n, n)) < p).astype(float)
    return np.maximum(A, A.T) if undirected else A


def textbook_dfs(A: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CLRS DFS (recursive DFS-VISIT, roots and neighbours in index order): parents, integer d, f."""
    n = len(A)
    pi, d, f = np.arange(n), np.zeros(n, int), np.zeros(n, int)
    clock = 0

    def visit(u: int) -> None:
        nonlocal clock
        clock += 1
        d[u] = clock
        for v in range(n):
            if A[u, v] and d[v] == 0:
                pi[v] = u
                visit(v)
        clock += 1
        f[u] = clock

    for u in range(n):
        if d[u] == 0:
            visit(u)
    return pi, d, f


def alive_components(adj: np.ndarray, alive: np.ndarray) -> int:
    """Connected components of the undirected graph adj restricted to the `alive` nodes."""
    seen, count = ~alive.copy(), 0
    for r in range(len(adj)):
        if not seen[r]:
            count += 1
            stack, seen[r] = [r], True
            while stack:
                u = stack.pop()
                for v in np.flatnonzero(adj[u] & ~seen):
                    seen[v] = True
                    stack.append(v)
    return count


def last(traj, name: str) -> np.ndarray:
    return traj.hints[name][-1]


# ---- dfs ----

@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(2, 12), p=st.sampled_from([0.1, 0.3, 0.5]))
def test_dfs_matches_textbook_dfs(seed, n, p):
    A = random_graph(seed, n, p)
    traj = run_algorithm("dfs", A)
    pi, d, f = textbook_dfs(A)
    np.testing.assert_array_equal(traj.outputs["pi"], pi)
    np.testing.assert_array_equal(np.round(last(traj, "d") / TICK), d)
    np.testing.assert_array_equal(np.round(last(traj, "f") / TICK), f)


@pytest.mark.parametrize("seed", range(5))
def test_dfs_forest_and_parenthesis_property(seed):
    A = sampled("dfs", 14, seed)[0]
    traj = run_algorithm("dfs", A)
    pi, d, f = traj.outputs["pi"], last(traj, "d"), last(traj, "f")
    n = len(A)
    assert np.all(d > 0) and np.all(f > d)
    for u in range(n):
        for v in range(n):
            if u == v:
                continue
            disjoint = f[u] < d[v] or f[v] < d[u]
            nested = d[u] < d[v] < f[v] < f[u] or d[v] < d[u] < f[u] < f[v]
            assert disjoint or nested, "intervals must be disjoint or nested"
            if A[u, v]:
                assert not f[u] < d[v], "an edge never leads to a node discovered after its tail finished"
        if pi[u] != u:
            assert A[pi[u], u] and d[pi[u]] < d[u] < f[u] < f[pi[u]], "tree edge nested in its parent"
    roots = np.flatnonzero(pi == np.arange(n))
    assert np.all(np.diff(d[roots]) > 0), "roots are taken in index order"


@pytest.mark.parametrize("seed", range(3))
def test_dfs_hint_invariants(seed):
    traj = run_algorithm("dfs", *sampled("dfs", 10, seed))
    color = traj.hints["color"].argmax(-1)  # [T, N]
    assert np.all(color[0] == 0) and np.all(color[-1] == 2)
    assert np.all(np.diff(color, axis=0) >= 0), "colors only move white -> gray -> black"
    d, f, time = traj.hints["d"], traj.hints["f"], traj.hints["time"]
    np.testing.assert_allclose(time, np.maximum(d.max(1), f.max(1)))  # the clock is the latest stamp
    # Gray nodes are exactly those on the stack: the s_prev chain from s_last down to the root s.
    for t in range(1, len(time)):
        s_prev, top, root = traj.hints["s_prev"][t], traj.hints["s_last"][t].argmax(), traj.hints["s"][t].argmax()
        chain = [top]
        while s_prev[chain[-1]] != chain[-1]:
            chain.append(s_prev[chain[-1]])
        if color[t, top] == 1:
            assert chain[-1] == root
            assert set(chain) == set(np.flatnonzero(color[t] == 1))


def test_dfs_on_a_path_by_hand():
    A = np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]], float)
    traj = run_algorithm("dfs", A)
    # root push; discover 0; edge 0->1; discover 1; edge 1->2; discover 2; finish 2, 1, 0.
    assert traj.length == 9
    np.testing.assert_array_equal(traj.hints["u"].argmax(-1), [0, 0, 0, 1, 1, 2, 2, 1, 0])
    np.testing.assert_array_equal(traj.hints["v"].argmax(-1), [0, 0, 1, 1, 2, 2, 2, 2, 2])
    np.testing.assert_array_equal(traj.hints["s_last"].argmax(-1), [0, 0, 1, 1, 2, 2, 2, 1, 0])
    np.testing.assert_array_equal(traj.outputs["pi"], [0, 0, 1])
    np.testing.assert_allclose(last(traj, "d"), [0.01, 0.02, 0.03])
    np.testing.assert_allclose(last(traj, "f"), [0.06, 0.05, 0.04])


# ---- topological_sort ----

def topo_order(topo: np.ndarray, head: int) -> list[int]:
    order = [head]
    while topo[order[-1]] != order[-1]:
        order.append(int(topo[order[-1]]))
    return order


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(2, 12))
def test_topological_sort_gives_a_topological_order(seed, n):
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    A = np.triu(rng.random((n, n)) < 0.4, k=1).astype(float)[perm][:, perm]
    traj = run_algorithm("topological_sort", A)
    order = topo_order(traj.outputs["topo"], int(traj.outputs["topo_head"].argmax()))
    assert sorted(order) == list(range(n))
    position = np.argsort(order)
    for u, v in zip(*np.nonzero(A)):
        assert position[u] < position[v]
    _, _, f = textbook_dfs(A)
    assert order == list(np.argsort(-f)), "decreasing finish time of the textbook DFS"


def test_topological_sort_by_hand():
    A = np.zeros((3, 3))
    A[2, 0] = A[0, 1] = 1
    traj = run_algorithm("topological_sort", A)
    assert topo_order(traj.outputs["topo"], int(traj.outputs["topo_head"].argmax())) == [2, 0, 1]
    # The final hint is the output.
    np.testing.assert_array_equal(last(traj, "topo_h"), traj.outputs["topo"])
    np.testing.assert_array_equal(last(traj, "topo_head_h"), traj.outputs["topo_head"])


# ---- dag_shortest_paths ----

@pytest.mark.parametrize("seed", range(8))
def test_dag_shortest_paths_match_bellman_ford(seed):
    A, s = sampled("dag_shortest_paths", 12, seed)
    traj = run_algorithm("dag_shortest_paths", A, s)
    pi, dist = traj.outputs["pi"], bellman_ford_distances(A, s)
    reach = np.isfinite(dist)
    np.testing.assert_allclose(last(traj, "d")[reach], dist[reach])
    np.testing.assert_array_equal(last(traj, "mark"), reach)
    for v in range(len(A)):
        if v == s or not reach[v]:
            assert pi[v] == v
        else:  # the parent lies on a shortest path
            assert A[pi[v], v] and np.isclose(dist[pi[v]] + A[pi[v], v], dist[v])
    phase = traj.hints["phase"]
    assert phase[0] == 0 and phase[-1] == 1 and np.all(np.diff(phase) >= 0)


# ---- articulation_points and bridges ----

@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(2, 12), p=st.sampled_from([0.15, 0.3, 0.5]))
def test_articulation_points_by_removal(seed, n, p):
    A = random_graph(seed, n, p, undirected=True)
    traj = run_algorithm("articulation_points", A)
    adj = A != 0
    everyone = np.ones(n, bool)
    for x in range(n):
        without = everyone.copy()
        without[x] = False
        is_cut = alive_components(adj, without) > alive_components(adj, everyone)
        assert traj.outputs["is_cut"][x] == is_cut, f"node {x}"
    np.testing.assert_array_equal(last(traj, "is_cut_h"), traj.outputs["is_cut"])


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(2, 12), p=st.sampled_from([0.15, 0.3, 0.5]))
def test_bridges_by_removal(seed, n, p):
    A = random_graph(seed, n, p, undirected=True)
    traj = run_algorithm("bridges", A)
    out = traj.outputs["is_bridge"]
    adj = A != 0
    everyone = np.ones(n, bool)
    for u in range(n):
        for v in range(n):
            if u == v:
                assert out[u, v] == 0
            elif not adj[u, v]:
                assert out[u, v] == -1, "non-edges are masked"
            else:
                cut = adj.copy()
                cut[u, v] = cut[v, u] = False
                assert out[u, v] == (alive_components(cut, everyone) > alive_components(adj, everyone)), (u, v)
    np.testing.assert_array_equal(last(traj, "is_bridge_h"), out)


def test_cut_vertex_and_bridges_on_a_path_by_hand():
    A = np.zeros((3, 3))
    A[0, 1] = A[1, 0] = A[1, 2] = A[2, 1] = 1
    np.testing.assert_array_equal(run_algorithm("articulation_points", A).outputs["is_cut"], [0, 1, 0])
    np.testing.assert_array_equal(run_algorithm("bridges", A).outputs["is_bridge"],
                                  [[0, 1, -1], [1, 0, 1], [-1, 1, 0]])


# ---- strongly_connected_components ----

def closure(A: np.ndarray) -> np.ndarray:
    reach = (A != 0) | np.eye(len(A), dtype=bool)
    for k in range(len(A)):  # Warshall
        reach |= reach[:, k:k + 1] & reach[k:k + 1, :]
    return reach


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("source", ["sampler", "random"])
def test_scc_match_mutual_reachability(seed, source):
    A = sampled("strongly_connected_components", 13, seed)[0] if source == "sampler" else random_graph(seed, 9, 0.2)
    traj = run_algorithm("strongly_connected_components", A)
    scc = traj.outputs["scc_id"]
    reach = closure(A)
    np.testing.assert_array_equal(scc[:, None] == scc[None, :], reach & reach.T)
    # Each component is named by its member that finished last in the first pass.
    first_pass = traj.hints["phase"] == 0
    f1 = traj.hints["f"][np.flatnonzero(first_pass)[-1]]
    for c in np.unique(scc):
        members = np.flatnonzero(scc == c)
        assert c == members[np.argmax(f1[members])]


def test_scc_by_hand():
    A = np.zeros((4, 4))
    A[0, 1] = A[1, 0] = A[1, 2] = A[3, 3] = 1
    scc = run_algorithm("strongly_connected_components", A).outputs["scc_id"]
    assert scc[0] == scc[1] != scc[2] and scc[3] == 3 and scc[2] == 2


# ---- the bulk recorder path these algorithms use ----

def test_hint_sequence_zeroes_padding_and_is_exclusive():
    rec = Recorder("dfs", 3, batch=2)
    A = np.zeros((2, 3, 3))
    rec.input(pos=np.zeros((2, 3)), A=A, adj=A)
    T = 4
    hints = {"pi_h": np.ones((2, T, 3), np.int32), "color": np.ones((2, T, 3), np.int64),
             "d": np.ones((2, T, 3)), "f": np.ones((2, T, 3)), "s_prev": np.ones((2, T, 3), np.int32),
             "s": np.ones((2, T), np.int64), "u": np.ones((2, T), np.int64), "v": np.ones((2, T), np.int64),
             "s_last": np.ones((2, T), np.int64), "time": np.ones((2, T))}
    rec.hint_sequence(np.array([4, 2]), **hints)
    with pytest.raises(ProbeError):
        rec.hint(**{k: v[:, 0] for k, v in hints.items()})
    rec.output(pi=np.zeros((2, 3)))
    ds = rec.finish()
    np.testing.assert_array_equal(ds.lengths, [4, 2])
    assert ds.hints["color"].shape == (2, T, 3, 3) and np.all(ds.hints["color"][1, 2:] == 0)
    assert np.all(ds.hints["d"][0] == 1) and np.all(ds.hints["d"][1, 2:] == 0)


def test_graphs_over_64_nodes():
    """Neighbour sets wider than one 64-bit word take another path; results must not change."""
    A = random_graph(3, 70, 0.05)
    traj = run_algorithm("dfs", A)
    pi, d, _ = textbook_dfs(A)
    np.testing.assert_array_equal(traj.outputs["pi"], pi)
    np.testing.assert_array_equal(np.round(last(traj, "d") / TICK), d)
    scc = run_algorithm("strongly_connected_components", A).outputs["scc_id"]
    reach = closure(A)
    np.testing.assert_array_equal(scc[:, None] == scc[None, :], reach & reach.T)
