"""The DFS-based graph algorithms against independent references written here: a recursive textbook
DFS, topological-order checks, Bellman-Ford, brute-force cut vertices and bridges (remove, count
components), and SCCs from the transitive closure; plus hint invariants and hand-checked runs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graph_references import bellman_ford_distances
from relreason.data import run_algorithm
from relreason.data.algorithms import ALGORITHMS
from relreason.data.probes import ProbeError, Recorder
from relreason.data.samplers import RandomState

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


def components(adj: np.ndarray, alive: np.ndarray) -> int:
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
        is_cut = components(adj, without) > components(adj, everyone)
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
                assert out[u, v] == (components(cut, everyone) > components(adj, everyone)), (u, v)
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
