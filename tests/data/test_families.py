"""Graph families (relreason.data.families): each family's defining property, the parser, the way a
family graph becomes every graph algorithm's input, and the benchmark's splits left untouched."""

from __future__ import annotations

import math

import numpy as np
import pytest

from relreason.data import generate
from relreason.data.algorithms import ALGORITHMS
from relreason.data.config import ClrsDataConfig, DataStream
from relreason.data.families import (BENCHMARK, FAMILIES, GraphSpec, OneOf, Uniform, ba_graph, block_sizes,
                                     components, delaunay_graph, delaunay_triangles, er_graph, family_names,
                                     graph_name, grid_graph, grid_shape, is_connected, orient, parse_graph,
                                     parse_graphs, sbm_graph, tree_graph, triangulation_adjacency, ws_graph)
from relreason.data.generate import (cached_split, dataset_path, family_sampler, graph_algorithms, resolve_split,
                                     run_samples)
from relreason.data.samplers import CommunitySampler, GraphSampler, with_options
from relreason.data.store import fingerprint, read_meta
from relreason.errors import RelreasonError

FAMILY_NAMES = FAMILIES.names()
# every family with parameters that fit small graphs (ws's default k reaches 8: 9 nodes)
SMALL = {"er": "er", "ws": "ws:k=4,p=0.2", "delaunay": "delaunay", "ba": "ba:m=2", "sbm": "sbm:blocks=2,p_in=0.6",
         "grid": "grid", "tree": "tree"}


def rng(seed: int = 0) -> np.random.RandomState:
    return np.random.RandomState(seed)


def edges(adj: np.ndarray) -> int:
    return int(np.triu(adj, 1).sum())


def clustering(adj: np.ndarray) -> float:
    """Average local clustering coefficient (nodes of degree < 2 count 0), computed independently of
    the families: triangles through i / pairs of i's neighbours."""
    a = adj.astype(np.int64)
    deg = a.sum(1)
    tri = np.diagonal(a @ a @ a) / 2
    pairs = deg * (deg - 1) / 2
    return float(np.mean(np.where(pairs > 0, tri / np.maximum(pairs, 1), 0.0)))


def hull_size(points: np.ndarray) -> int:
    """Number of convex-hull vertices (Andrew's monotone chain; collinear points left out)."""
    pts = sorted(map(tuple, points.tolist()))

    def cross(o, a, b):
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    def chain(seq):
        out = []
        for p in seq:
            while len(out) >= 2 and cross(out[-2], out[-1], p) <= 0:
                out.pop()
            out.append(p)
        return out

    return len(chain(pts)) + len(chain(reversed(pts))) - 2


# -- the registry and the parser ------------------------------------------------------------------

def test_the_families_the_issue_asks_for_are_registered_and_documented():
    assert set(FAMILY_NAMES) == {"er", "ws", "delaunay", "ba", "sbm", "grid", "tree"}
    assert family_names() == [BENCHMARK, *FAMILY_NAMES]
    for name, fam in FAMILIES.items():
        assert len(fam.doc) > 60, name
        for p in fam.params:
            assert p.doc and p.kind in (int, float, bool), (name, p.name)


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_canonical_text_reads_back_as_the_same_spec(name):
    spec = parse_graph(name)
    assert isinstance(spec, GraphSpec) and spec.family == name
    assert parse_graph(str(spec)) == spec
    assert [k for k, _ in spec.params] == [p.name for p in FAMILIES.get(name).params if p.name in spec.values]


def test_parser_fills_defaults_takes_ranges_and_choices():
    assert str(parse_graph("ws:k=4,p=0.1")) == "ws:k=4,p=0.1"
    assert parse_graph("ws:p=0.1") == GraphSpec("ws", (("k", OneOf((4, 6, 8))), ("p", 0.1)))
    assert parse_graph(" ws : k = 6|8 , p = 0.05..0.2 ") == GraphSpec("ws", (("k", OneOf((6, 8))),
                                                                           ("p", Uniform(0.05, 0.2))))
    assert str(parse_graph("er")) == "er:c=1..3,connected=1"
    assert str(parse_graph("er:p=0.25,connected=0")) == "er:p=0.25,connected=0"  # p replaces c
    assert str(parse_graph("grid:periodic=true")) == "grid:periodic=1"
    assert parse_graph(BENCHMARK) is None and graph_name(None) == BENCHMARK
    assert graph_name("ws:p=0.1,k=4") == "ws:k=4,p=0.1"  # the family's order, whatever the user's


def test_a_list_of_graphs_takes_parameters_after_their_family():
    got = parse_graphs("clrs,er,ws:k=4,p=0.1,delaunay")
    assert [graph_name(g) for g in got] == ["clrs", "er:c=1..3,connected=1", "ws:k=4,p=0.1", "delaunay"]


@pytest.mark.parametrize("text, message", [
    ("wss", "unknown graph family 'wss'"),
    ("", "names no family"),
    ("ws:q=1", "has no parameter 'q'"),
    ("ws:k", "is not NAME=VALUE"),
    ("ws:k=3", "must be an even integer"),
    ("ws:k=x", "is not an integer"),
    ("ws:p=1.5", "must be a probability"),
    ("ws:p=nan", "is not a finite number"),
    ("ws:k=4..8", "is a whole number"),
    ("ws:p=0.2..0.1", "empty range"),
    ("ws:k=4|4", "repeats a value"),
    ("ws:k=4,k=6", "given twice"),
    ("er:p=0.1,c=2", "give one of p or c"),
    ("er:c=0", "must be positive"),
    ("grid:periodic=2", "is not 0 or 1"),
    ("ba:m=0", "at least 1"),
    ("tree:x=1", "has no parameter"),
    ("clrs:p=0.5", "takes no parameters"),
])
def test_bad_graph_texts_are_one_line_errors(text, message):
    with pytest.raises(RelreasonError) as e:
        parse_graph(text)
    assert message in e.value.message and "\n" not in str(e.value) and e.value.hint


def test_a_list_naming_a_graph_twice_is_refused():
    with pytest.raises(RelreasonError, match="more than once"):
        parse_graphs("er,ws,er:c=1..3")


# -- every family: the invariants of its output --------------------------------------------------

@pytest.mark.parametrize("n", [2, 3, 9, 40])
@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_adjacency_is_symmetric_without_self_loops(name, n):
    spec = parse_graph(SMALL[name])
    if n < spec.min_size():
        with pytest.raises(RelreasonError, match="needs at least"):
            spec.adjacency(rng(), n)
        return
    adj = spec.adjacency(rng(n), n)
    assert adj.shape == (n, n) and adj.dtype == bool
    assert (adj == adj.T).all() and not adj.diagonal().any()


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_same_seed_same_graph_other_seed_other_graph(name):
    spec = parse_graph(SMALL[name])
    a, b, c = spec.adjacency(rng(1), 30), spec.adjacency(rng(1), 30), spec.adjacency(rng(2), 30)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_nodes_are_relabelled_so_pos_says_nothing(name):
    """A spec's graph is the family's own build (ring order, grid rows, arrival order) under a uniform
    random permutation drawn right after it: node 0 of the structure lands anywhere."""
    spec = parse_graph(SMALL[name])
    r = rng(5)
    raw = FAMILIES.get(name).build(r, 25, **spec.draw_params(r))
    perm = r.permutation(25)
    np.testing.assert_array_equal(spec.adjacency(rng(5), 25), raw[perm][:, perm])
    assert not np.array_equal(perm, np.arange(25))


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_every_family_builds_at_1600_nodes(name):
    """The sparse message-passing study runs at n = 1,600 (SALSA-CLRS's largest): every family builds
    there (scripts/bench_families.py prints the times)."""
    text = {"sbm": "sbm:p_in=0.01,p_out=0.0005"}.get(name, name)  # the benchmark's community p is dense
    adj = parse_graph(text).adjacency(rng(0), 1600)
    assert adj.shape == (1600, 1600) and (adj == adj.T).all()
    assert edges(adj) < 20 * 1600  # sparse: mean degree below 40


# a fixed-parameter spec of every family (its mean degree is then an expectation, not a bound)
FIXED = {"er": "er:c=2", "ws": "ws:k=6,p=0.1", "delaunay": "delaunay", "ba": "ba:m=3",
         "sbm": "sbm:blocks=3,p_in=0.2,p_out=0.02", "grid": "grid", "tree": "tree"}


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_mean_degree_is_what_the_family_draws_and_bounds_its_ranges(name):
    """`GraphSpec.mean_degree` (what sparse memory estimates read): the mean degree of drawn graphs, within
    sampling error for fixed parameters (delaunay's is an upper bound: 3N - 6 edges less the hull's), and at
    least the drawn one for the defaults' ranges and choices (taken at their densest)."""
    n, draws = 150, 8

    def drawn(text: str) -> float:
        spec = parse_graph(text)
        return float(np.mean([2 * edges(spec.adjacency(rng(seed), n)) / n for seed in range(draws)]))

    fixed = parse_graph(FIXED[name])
    assert fixed.mean_degree(n) == pytest.approx(drawn(FIXED[name]), rel=0.06 if name == "delaunay" else 0.04)
    assert parse_graph(name).mean_degree(n) >= drawn(name)


# -- the defining property of each family ---------------------------------------------------------

def test_er_has_density_p():
    n, p = 300, 0.1
    adj = er_graph(rng(0), n, p=p, connected=False)
    pairs = n * (n - 1) / 2
    assert abs(edges(adj) - p * pairs) < 4 * math.sqrt(pairs * p * (1 - p))


def test_er_default_is_salsas_sparse_connected_er():
    n = 200
    for seed in range(5):
        adj = parse_graph("er").adjacency(rng(seed), n)
        assert is_connected(adj)
        density = edges(adj) / (n * (n - 1) / 2)
        assert 0.8 * math.log(n) / n < density < 3.5 * math.log(n) / n


def test_er_connected_redraws_and_gives_up_with_a_one_line_error():
    assert not all(is_connected(er_graph(rng(s), 50, p=0.02, connected=False)) for s in range(5))
    assert all(is_connected(er_graph(rng(s), 50, p=0.08)) for s in range(5))
    with pytest.raises(RelreasonError, match="no connected graph"):
        parse_graph("er:p=0").adjacency(rng(), 20)


@pytest.mark.parametrize("k", [2, 4, 6, 8])
def test_ws_ring_lattice_has_mean_degree_k_and_the_lattice_clustering(k):
    adj = ws_graph(rng(0), 60, k=k, p=0.0)
    assert (adj.sum(1) == k).all()
    assert clustering(adj) == pytest.approx(3 * (k - 2) / (4 * (k - 1)))


@pytest.mark.parametrize("p", [0.1, 0.5, 1.0])
def test_ws_rewiring_keeps_mean_degree_k_and_moves_about_p_of_the_edges(p):
    n, k = 200, 6
    adj = ws_graph(rng(3), n, k=k, p=p)
    assert adj.sum() == n * k  # every rewiring moves an edge, none is lost or doubled
    lattice = ws_graph(rng(3), n, k=k, p=0.0)
    moved = edges(adj & ~lattice)
    expected = p * n * k / 2
    assert abs(moved - expected) < 5 * math.sqrt(n * k / 2 * p * (1 - p)) + 0.1 * expected
    assert clustering(adj) < clustering(lattice)


def test_delaunay_is_a_planar_connected_triangulation():
    for seed in range(20):
        r = rng(seed)
        n = int(r.randint(3, 80))
        points = r.random_sample((n, 2))
        tri = delaunay_triangles(points)
        adj = triangulation_adjacency(n, tri)
        h = hull_size(points)
        # Euler: a triangulation of n points with h on the hull has 2n - 2 - h triangles, 3n - 3 - h edges
        assert len(tri) == 2 * n - 2 - h and edges(adj) == 3 * n - 3 - h <= 3 * n - 6
        assert is_connected(adj)


def test_delaunay_triangles_have_empty_circumcircles():
    for seed in range(10):
        points = rng(seed).random_sample((25, 2))
        for t in delaunay_triangles(points):
            a, b, c = points[t]
            assert (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]) > 0  # counter-clockwise
            others = np.delete(points, t, axis=0)
            rows = np.stack([np.concatenate([v - others, ((v - others) ** 2).sum(1, keepdims=True)], 1)
                             for v in (a, b, c)], 1)  # [M, 3, 3] in-circle matrices
            assert (np.linalg.det(rows) < 0).all()  # every other point strictly outside


def test_delaunay_small_cases():
    assert edges(delaunay_graph(rng(), 2)) == 1
    assert edges(delaunay_graph(rng(), 3)) == 3
    square = np.array([[0, 0], [1, 0.1], [1.1, 1], [0.05, 0.9], [0.5, 0.45]])
    assert len(delaunay_triangles(square)) == 4  # the centre joined to the 4 corners
    assert len(delaunay_triangles(np.array([[0, 0], [1, 1], [2, 2.0]]))) == 0  # collinear: no triangle


@pytest.mark.parametrize("m", [1, 2, 3])
def test_ba_edge_count_min_degree_m_and_a_heavy_tail(m):
    n = 1000
    adj = ba_graph(rng(0), n, m=m)
    deg = adj.sum(1)
    assert edges(adj) == m * (m + 1) // 2 + m * (n - m - 1)
    assert deg.min() >= m and is_connected(adj)
    er = er_graph(rng(0), n, p=deg.mean() / (n - 1), connected=False)  # same mean degree, Poisson tail
    assert deg.max() > 5 * deg.mean() and deg.max() > 2 * er.sum(1).max()


def test_sbm_densities_are_p_in_inside_and_p_out_between_blocks():
    n, blocks, p_in, p_out = 240, 3, 0.3, 0.02
    adj = sbm_graph(rng(0), n, blocks=blocks, p_in=p_in, p_out=p_out)
    label = np.repeat(np.arange(blocks), block_sizes(n, blocks))
    same = (label[:, None] == label[None, :]) & ~np.eye(n, dtype=bool)
    other = label[:, None] != label[None, :]
    for mask, p in ((same, p_in), (other, p_out)):
        pairs = mask.sum() / 2
        assert abs(adj[mask].sum() / 2 - p * pairs) < 4 * math.sqrt(pairs * p * (1 - p))
    assert block_sizes(10, 3) == [4, 3, 3]


@pytest.mark.parametrize("n", [2, 5, 16, 17, 30, 64, 99, 1600])
def test_grid_is_near_square_with_degrees_up_to_4(n):
    rows, cols = grid_shape(n)
    assert (rows - 1) * cols < n <= rows * cols and cols - rows in (0, 1)
    adj = grid_graph(rng(), n)
    deg = adj.sum(1)
    assert edges(adj) == 2 * n - rows - cols and is_connected(adj)
    assert deg.max() <= 4 and deg.min() >= (2 if n == rows * cols and rows > 1 else 1)


def test_periodic_grid_is_a_torus_where_the_grid_is_full():
    adj = grid_graph(rng(), 36, periodic=True)
    assert (adj.sum(1) == 4).all() and edges(adj) == 72
    partial = grid_graph(rng(), 30, periodic=True)  # 5 x 6 minus nothing: full too
    assert (partial.sum(1) == 4).all()
    short = grid_graph(rng(), 34, periodic=True)  # 6 columns, last row of 4: still degrees 2..4
    assert 2 <= short.sum(1).min() and short.sum(1).max() <= 4 and (short == short.T).all()


@pytest.mark.parametrize("n", [2, 3, 10, 200])
def test_tree_is_connected_with_n_minus_1_edges(n):
    adj = tree_graph(rng(n), n)
    assert edges(adj) == n - 1 and is_connected(adj)


def test_tree_is_uniform_over_labelled_trees():
    """Cayley: 4^2 = 16 labelled trees on 4 nodes, each about 1/16 of the draws."""
    r = rng(0)
    counts: dict[bytes, int] = {}
    for _ in range(3200):
        key = np.packbits(tree_graph(r, 4)).tobytes()
        counts[key] = counts.get(key, 0) + 1
    assert len(counts) == 16
    assert all(140 < c < 260 for c in counts.values()), sorted(counts.values())  # 200 +- 4 sd


def test_components_labels_each_component_by_its_smallest_node():
    adj = np.zeros((7, 7), bool)
    for u, v in ((0, 3), (3, 6), (1, 2), (5, 4)):
        adj[u, v] = adj[v, u] = True
    assert components(adj).tolist() == [0, 1, 1, 0, 4, 4, 0]
    assert not is_connected(adj) and is_connected(grid_graph(rng(), 12))


# -- from a family graph to an algorithm's input ---------------------------------------------------

def test_orient_keeps_each_edge_once_and_acyclic_makes_a_dag():
    adj = parse_graph("delaunay").adjacency(rng(0), 40)
    for acyclic in (False, True):
        d = orient(rng(1), adj, acyclic)
        np.testing.assert_array_equal(d | d.T, adj)
        assert not (d & d.T).any()
    assert is_dag(orient(rng(2), adj, True))
    assert not is_dag(orient(rng(2), adj, False))  # a fair coin per edge leaves cycles in a triangulation


def is_dag(a: np.ndarray) -> bool:
    """Kahn: a DAG empties when sources are removed one layer at a time."""
    a = a.astype(bool).copy()
    alive = np.ones(len(a), bool)
    while alive.any():
        sources = alive & ~a[alive].any(0)
        if not sources.any():
            return False
        alive &= ~sources
        a[sources] = False
    return True


def check_graph_input(alg_name: str, sample, inputs: tuple, n: int) -> None:
    """The inputs a graph algorithm gets from a family are valid for it."""
    graph = np.asarray(inputs[0])
    directed = getattr(sample, "directed", False)
    acyclic, weighted = getattr(sample, "acyclic", False), getattr(sample, "weighted", False)
    assert graph.shape == (n, n) and not graph.diagonal().any(), alg_name
    if directed:
        assert not ((graph != 0) & (graph.T != 0)).any(), alg_name  # one direction per edge
    else:
        np.testing.assert_array_equal(graph, graph.T)
    if acyclic:
        assert is_dag(graph != 0), alg_name
    if weighted:
        w = graph[graph != 0]
        if directed:  # U[0, 1) as the benchmark's directed weights
            assert ((0 < w) & (w < 1)).all(), alg_name
        else:  # sqrt(U U' + 1e-3) as the benchmark's undirected weights
            assert ((math.sqrt(1e-3) <= w) & (w < math.sqrt(1 + 1e-3))).all(), alg_name
    else:
        assert set(np.unique(graph).tolist()) <= {0, 1} and graph.dtype == np.int64, alg_name
    if getattr(sample, "source", False):
        assert 0 <= int(inputs[1]) < n, alg_name


@pytest.mark.parametrize("name", FAMILY_NAMES)
@pytest.mark.parametrize("alg_name", graph_algorithms())
def test_every_graph_algorithm_runs_on_every_family_with_valid_inputs(alg_name, name):
    alg = ALGORITHMS.get(alg_name)
    spec = parse_graph(SMALL[name])
    n = max(10, alg.min_size, spec.min_size())
    sample = family_sampler(alg, spec)
    r = rng(3)
    samples = [sample(r, n) for _ in range(3)]
    for inputs in samples:
        check_graph_input(alg_name, sample, inputs, n)
    ds = run_samples(alg, samples)
    assert len(ds) == 3 and ds.n == n and (ds.lengths >= 1).all()


def test_the_graph_algorithms_are_the_samplers_that_draw_graphs():
    assert set(graph_algorithms()) == {"bfs", "dfs", "topological_sort", "articulation_points", "bridges",
                                       "strongly_connected_components", "mst_kruskal", "mst_prim", "bellman_ford",
                                       "dijkstra", "dag_shortest_paths", "floyd_warshall"}
    for name in graph_algorithms():
        assert isinstance(ALGORITHMS.get(name).sample, (GraphSampler, CommunitySampler))


def test_draw_order_is_family_then_direction_then_weights_then_source():
    spec = parse_graph("tree")
    sample = with_options(ALGORITHMS.get("dijkstra").sample, graph=spec)
    graph, source = sample(rng(4), 12)
    r = rng(4)
    adj = spec.adjacency(r, 12)
    weights = r.uniform(size=(12, 12))
    weights = np.sqrt(weights * weights.T + 1e-3)
    np.testing.assert_array_equal(graph, adj * weights)
    assert source == r.randint(0, 12)


# -- the benchmark's sampler stays the default and bit-exact ---------------------------------------

@pytest.mark.parametrize("alg_name", ["bfs", "strongly_connected_components", "dag_shortest_paths"])
def test_no_graph_and_clrs_are_the_benchmarks_split(alg_name):
    plain = generate(alg_name, num=4, size=9, seed=11)
    same = generate(alg_name, num=4, size=9, seed=11, graph=BENCHMARK)
    assert fingerprint(plain.arrays()) == fingerprint(same.arrays())
    assert "graph" not in plain.meta and "graph" not in same.meta
    assert with_options(ALGORITHMS.get(alg_name).sample, graph=None) == ALGORITHMS.get(alg_name).sample
    other = generate(alg_name, num=4, size=9, seed=11, graph="ws:k=4")
    assert other.meta["graph"] == "ws:k=4,p=0.05..0.2"
    assert fingerprint(other.arrays()) != fingerprint(plain.arrays())


# -- splits on disk and the data config ---------------------------------------------------------------

def test_a_family_split_has_its_own_file_and_is_regenerated_when_its_graph_changes(tmp_path):
    ds = cached_split("bfs", "test", tmp_path, size=9, num=3, graph="ws:k=4,p=0.1")
    path = dataset_path(tmp_path, "bfs", "custom_n9_s3_k3", "ws:k=4,p=0.1")
    assert path.name == "custom_n9_s3_k3.ws_k=4_p=0.1.safetensors" and path.exists()
    assert read_meta(path)["graph"] == "ws:k=4,p=0.1" == ds.meta["graph"]
    plain = cached_split("bfs", "test", tmp_path, size=9, num=3)
    assert "graph" not in plain.meta and dataset_path(tmp_path, "bfs", "custom_n9_s3_k3").exists()
    assert dataset_path(tmp_path, "bfs", "test", "ws:k=4|6,p=0.05..0.2").name == "test.ws_k=4+6_p=0.05..0.2.safetensors"
    assert fingerprint(cached_split("bfs", "test", tmp_path, size=9, num=3, graph="ws:k=4,p=0.1").arrays()) == \
        fingerprint(ds.arrays())


def test_a_cached_split_drawn_from_another_graph_is_stale(tmp_path):
    """A family's file copied over the benchmark's (same size, num, seed, spec) is regenerated."""
    family = dataset_path(tmp_path, "bfs", "custom_n9_s3_k3", "tree")
    cached_split("bfs", "test", tmp_path, size=9, num=3, graph="tree")
    plain = dataset_path(tmp_path, "bfs", "custom_n9_s3_k3")
    plain.write_bytes(family.read_bytes())
    ds = cached_split("bfs", "test", tmp_path, size=9, num=3)
    assert "graph" not in ds.meta and "graph" not in read_meta(plain)
    assert fingerprint(ds.arrays()) == fingerprint(generate("bfs", num=3, size=9, seed=3).arrays())


def test_resolve_split_refuses_non_graph_algorithms_and_too_small_sizes():
    with pytest.raises(RelreasonError, match="insertion_sort draws no graph"):
        resolve_split("insertion_sort", "test", None, None, None, graph="ws")
    with pytest.raises(RelreasonError, match="needs at least 9 nodes"):
        resolve_split("bfs", None, 6, 2, 0, graph="ws:k=8")
    assert resolve_split("bfs", "test", None, None, None, graph="tree")["graph"] == "tree"
    assert resolve_split("bfs", "test", None, None, None, graph=BENCHMARK)["graph"] is None


def test_data_config_graph_checks():
    assert ClrsDataConfig().problems() == [] and ClrsDataConfig().graph_of("test") is None
    cfg = ClrsDataConfig(graph="ws:k=4,p=0.1")
    assert (cfg.graph_of("test"), cfg.graph_of("val"), cfg.graph_of("train")) == ("ws:k=4,p=0.1", None, None)
    assert "graph_splits" in ClrsDataConfig().unused() and "graph_splits" not in cfg.unused()
    cases = {
        "unknown graph family": ClrsDataConfig(graph="wss"),
        "needs at least 9 nodes": ClrsDataConfig(graph="ws:k=8", graph_splits=("train", "test"), train_size=5),
        "distinct splits": ClrsDataConfig(graph="ws", graph_splits=("test", "test")),
        "ibarz stream draws": ClrsDataConfig(graph="ws", graph_splits=("val", "test"), stream=DataStream.IBARZ),
    }
    for message, bad in cases.items():
        assert any(message in p for p in bad.problems()), (message, bad.problems())
    assert ClrsDataConfig(graph="ws", stream=DataStream.IBARZ).problems() == []
    assert cfg.task_problems(["bfs", "dfs"]) == []
    assert "insertion_sort" in cfg.task_problems(["bfs", "insertion_sort"])[0]
    assert ClrsDataConfig(graph=BENCHMARK).task_problems(["insertion_sort"]) == []


def test_every_parameter_combination_of_a_choice_is_drawn():
    spec = parse_graph("ws:k=4|6,p=0")
    degrees = {int(spec.adjacency(rng(s), 20).sum(1)[0]) for s in range(20)}
    assert degrees == {4, 6}
    assert spec.min_size() == 7 and parse_graph("er").min_size() == 2
