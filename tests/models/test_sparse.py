"""The sparse form (relreason/models/sparse.py): segment reductions, the edge list a batch becomes,
true pointers on its entries for the graph algorithms in scope, and the network on edge lists
giving the dense network's numbers (same weights, same message graph, pointers restricted to the
same candidates) for every processor with a sparse form and the five algorithms, on small padded
batches of random sparse graphs; `model.sparse` choosing and refusing."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from relreason.data import ALGORITHMS, generate
from relreason.data.generate import run_samples
from relreason.data.specs import Location, Stage
from relreason.errors import RelreasonError
from relreason.models import Batch, ModelConfig, build_model, prepare_spec
from relreason.models.config import PointerCandidates, SparseMode
from relreason.models.encoders import Encoders
from relreason.models.net import Net
from relreason.models.processors import PROCESSORS, State
from relreason.models.processors.gnn import TripletGMPNN, edge_linear
from relreason.models.sparse import (AUTO_MAX_DENSITY, AUTO_MIN_NODES, SparseForm, SparseGraph, adjacency,
                                     data_problems, entrywise, segment_argmax, segment_log_softmax, segment_max,
                                     segment_softmax, segment_sum)

SCOPE = ("bfs", "dfs", "dijkstra", "mst_prim", "bellman_ford")
SPARSE = [name for name, e in PROCESSORS.items() if e.cls.sparse_form is not SparseForm.NONE]
DIRECTED = {"dfs"}  # the reference samples dfs on directed graphs
WEIGHTED = {"dijkstra", "mst_prim", "bellman_ford"}


# -- graphs: a sparse ER and a ring lattice (relreason.data.families will supply ER / WS / Delaunay) ------

def sparse_er(rng: np.random.RandomState, n: int, p: float, directed: bool, weighted: bool) -> np.ndarray:
    """A G(n, p) graph [N, N] without self-loops; undirected ones symmetric; weights U[0.1, 1)."""
    A = rng.random_sample((n, n)) < p
    np.fill_diagonal(A, False)
    if not directed:
        A = np.triu(A, 1)
        A = A | A.T
    A = A.astype(float)
    if weighted:
        w = rng.uniform(0.1, 1.0, (n, n))
        A = A * (w if directed else np.triu(w, 1) + np.triu(w, 1).T)
    return A


def ring_lattice(n: int, k: int) -> np.ndarray:
    """Every node linked to its k nearest neighbours on a ring (Watts-Strogatz before rewiring)."""
    A = np.zeros((n, n))
    for d in range(1, k // 2 + 1):
        idx = np.arange(n)
        A[idx, (idx + d) % n] = A[(idx + d) % n, idx] = 1.0
    return A


def inputs_for(name: str, A: np.ndarray, rng: np.random.RandomState) -> tuple:
    return (A,) if name == "dfs" else (A, rng.randint(A.shape[0]))


def dataset(name: str, sizes: tuple[int, ...], seed: int, p: float = 0.25):
    """One dataset per graph (sizes may differ), each a sparse ER graph."""
    rng = np.random.RandomState(seed)
    alg = ALGORITHMS.get(name)
    return [run_samples(alg, [inputs_for(name, sparse_er(rng, n, p, name in DIRECTED, name in WEIGHTED), rng)])
            for n in sizes]


def padded_batch(parts, cfg: ModelConfig, spec, n: int, dtype=torch.float64) -> Batch:
    """The datasets as one batch of n node slots (padding) and one hint length (zeros past each length)."""
    batches = [Batch.from_dataset(ds, cfg, spec).pad_nodes(n) for ds in parts]
    T = max(b.max_length for b in batches)

    def time_pad(x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, x.new_zeros((x.shape[0], T - x.shape[1]) + x.shape[2:])], 1)

    def cast(x: torch.Tensor) -> torch.Tensor:
        return x.to(dtype) if x.is_floating_point() else x

    join = lambda key, f=lambda x: x: {k: cast(torch.cat([f(getattr(b, key)[k]) for b in batches]))  # noqa: E731
                                       for k in getattr(batches[0], key)}
    return Batch(spec, join("inputs"), join("hints", time_pad), join("outputs"),
                 torch.cat([b.lengths for b in batches]), torch.cat([b.node_mask for b in batches]))


# -- segment reductions -------------------------------------------------------------------------

def test_segment_reductions_match_dense_reductions_and_leave_empty_segments_at_zero():
    src = torch.tensor([[1.0, -2.0], [3.0, 5.0], [-4.0, 0.5], [2.0, 2.0]], dtype=torch.float64)
    index = torch.tensor([0, 0, 2, 2])  # segment 1 is empty
    assert segment_sum(src, index, 3).tolist() == [[4.0, 3.0], [0.0, 0.0], [-2.0, 2.5]]
    assert segment_max(src, index, 3).tolist() == [[3.0, 5.0], [0.0, 0.0], [2.0, 2.0]]
    soft = segment_softmax(src, index, 3)
    torch.testing.assert_close(soft[:2], torch.softmax(src[:2], 0))
    torch.testing.assert_close(segment_log_softmax(src, index, 3)[2:], torch.log_softmax(src[2:], 0))
    # the first maximal entry (torch.argmax's first maximal column), -1 for an empty segment
    ties = torch.tensor([1.0, 3.0, 3.0, 0.0])
    assert segment_argmax(ties, torch.tensor([0, 0, 0, 2]), 3).tolist() == [1, -1, 3]


def test_segment_max_splits_the_gradient_on_ties_as_the_dense_max():
    x = torch.tensor([2.0, 2.0, 1.0], requires_grad=True)
    segment_max(x, torch.tensor([0, 0, 0]), 1).sum().backward()
    assert x.grad.tolist() == [0.5, 0.5, 0.0]


# -- the edge list ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", SCOPE)
def test_entries_are_the_dense_encoders_adjacency(name):
    cfg = ModelConfig(hidden=8)
    parts = dataset(name, (7, 10, 12), seed=1)
    spec = prepare_spec(parts[0].spec, cfg, name)
    batch = padded_batch(parts, cfg, spec, 12, torch.float32)
    enc = Encoders(spec, 8, True, cfg.encoder_init)
    dense = enc.encode_inputs(batch.inputs, batch.node_mask).adj  # (B, N, N) what the dense processor reads
    g = SparseGraph.from_batch(batch)
    b, i, j = g.split()
    back = torch.zeros_like(dense)
    back[b, i, j] = True
    assert torch.equal(back, dense)
    assert torch.equal(g.keys, g.keys.sort().values)  # sorted by (row, col): lookups are binary searches
    assert torch.equal(g.row[g.reverse], g.col) and torch.equal(g.col[g.reverse], g.row)
    real = batch.node_mask.reshape(-1)
    assert torch.equal(g.self_entry >= 0, real)
    assert torch.equal(g.edge_index, torch.stack([g.row, g.col]))
    assert torch.equal(g.node_graph[g.row], g.entry_graph)


def test_wedges_are_every_triplet_of_entries():
    adj = torch.tensor([[[1, 1, 1, 0], [1, 1, 0, 1], [1, 0, 1, 0], [0, 1, 0, 1]]], dtype=torch.bool)
    g = SparseGraph.from_adjacency(adj, torch.ones(1, 4, dtype=torch.bool))
    first, second, target = g.wedges
    got = sorted(zip(g.row[first].tolist(), g.col[first].tolist(), g.col[second].tolist()))
    want = sorted((i, j, k) for i in range(4) for j in range(4) for k in range(4) if adj[0, i, j] and adj[0, i, k]
                  and adj[0, j, k])
    assert got == want
    assert torch.equal(g.row[target], g.col[first]) and torch.equal(g.col[target], g.col[second])


@pytest.mark.parametrize("name", SCOPE)
@pytest.mark.parametrize("graphs", ["sparse_er", "ring", "clrs"])
def test_true_pointers_of_the_algorithms_in_scope_lie_on_entries(name, graphs):
    """Outputs and every real hint step point to a neighbour or to the node itself, so restricting
    pointers to the entries never excludes the truth."""
    cfg = ModelConfig(hidden=8)
    rng = np.random.RandomState(5)
    if graphs == "clrs":  # the reference's ER graphs, p = 0.5
        ds = generate(name, num=16, size=12, seed=3)
    else:
        make = {"sparse_er": lambda: sparse_er(rng, 24, 0.08, name in DIRECTED, name in WEIGHTED),
                "ring": lambda: ring_lattice(24, 4) * (rng.uniform(0.1, 1.0, (24, 24)) if name in WEIGHTED else 1)}
        samples = [inputs_for(name, np.maximum(A, A.T) if name in WEIGHTED else A, rng)
                   for A in (make[graphs]() for _ in range(8))]
        ds = run_samples(ALGORITHMS.get(name), samples)
    spec = prepare_spec(ds.spec, cfg, name)
    batch = Batch.from_dataset(ds, cfg, spec)
    assert any(entrywise(f) for f in spec.values() if f.stage is Stage.HINT)
    assert data_problems(spec, batch, SparseGraph.from_batch(batch)) == []


def test_pointers_off_the_graph_are_found():
    cfg = ModelConfig(hidden=8)
    ds = dataset("bfs", (10,), seed=2)[0]
    spec = prepare_spec(ds.spec, cfg, "bfs")
    batch = Batch.from_dataset(ds, cfg, spec)
    g = SparseGraph.from_batch(batch)
    adj = adjacency(spec, batch.inputs, batch.node_mask)[0]
    far = int((~adj[0]).nonzero()[0])  # a node that is not a neighbour of node 0
    batch.outputs["pi"][0, 0] = far
    assert data_problems(spec, batch, g) == ["output pi points off the graph's edges (1 pointers)"]
    batch.inputs["A"][0, 0, far] = 0.5
    assert "input A has values off the graph's edges (1 pairs)" in data_problems(spec, batch, g)


# -- the network on edge lists ------------------------------------------------------------------------

class AdjacencyTripletGMPNN(TripletGMPNN):
    """The dense form of sparse Triplet-GMPNN: messages over the adjacency, triplets t_ijk over the i
    adjacent to both j and k (written out naively, (B, N, N, N, T))."""

    restrict_to_adj = True

    def forward(self, node_in, edge_in, graph_in, state: State, adj, node_mask) -> State:
        z = torch.cat([node_in, state.node], -1)
        agg = self.aggregate(z, edge_in, graph_in, adj, node_mask)
        out = self.ln(torch.relu(self.o1(z) + self.o2(agg)))
        gate = torch.sigmoid(self.gate_out(torch.relu(self.gate_z(z) + self.gate_agg(agg))))
        out = out * gate + state.node * (1 - gate)
        m = self.triplets
        t1, t2, t3 = m.node(z).split(m.features, -1)
        te1, te2, te3 = edge_linear(edge_in, m.edge.weight, m.edge.bias).split(m.features, -1)
        a = (t1[:, :, None] + te1).masked_fill(~adj[..., None], -1e30)  # (B, I, J, T)
        c = te2.masked_fill(~adj[..., None], -1e30)  # (B, I, K, T)
        tri = (a[:, :, :, None] + c[:, :, None]).amax(1)  # (B, J, K, T)
        tri = tri + t2[:, :, None] + t3[:, None] + te3 + m.graph(graph_in)[:, None, None]
        return State(out, torch.relu(m.out(tri.masked_fill(~adj[..., None], 0.0))), state.graph)


def dense_twin(name: str, spec, cfg: ModelConfig, sparse_net: Net) -> Net:
    """The dense network with the sparse one's weights and message graph (for an EDGES processor: the
    dense processor restricted to the adjacency), its pointers restricted to the same candidates."""
    dense_cfg = replace(cfg, sparse=SparseMode.NEVER, pointer_candidates=PointerCandidates.GRAPH)
    if name == "triplet_gmpnn":
        entry = PROCESSORS.get(name)
        net = Net(spec, dense_cfg, AdjacencyTripletGMPNN(entry.config(), cfg.hidden))
    else:
        net = build_model(spec, dense_cfg, "pgn" if name == "mpnn" else name)
    net.load_state_dict(sparse_net.state_dict())  # strict: the same parameters
    return net.double()


def running_steps(batch: Batch, S: int) -> torch.Tensor:
    """(B, S) True where a sample's step s is one it runs (its hint predictions are real)."""
    steps = (batch.lengths - 1).clamp(min=1)
    return torch.arange(S)[None, :] < steps[:, None]


def assert_same_raw(spec, dense: dict, sparse: dict, g: SparseGraph, node_mask, running=None):
    """Raw predictions: pointers as log-probabilities over the candidates, the rest at real nodes
    (and, for hints, at the steps each sample runs)."""
    b, i, j = g.split()
    for name, d in dense.items():
        f, s = spec[name], sparse[name]
        if entrywise(f):
            want = torch.log_softmax(d, -1)[b, ..., i, j]  # (E,) or (E, S)
            got = segment_log_softmax(s, g.row, g.nodes)
            keep = torch.ones_like(got, dtype=torch.bool) if running is None else running[b]
            torch.testing.assert_close(got[keep], want[keep], msg=name)
            continue
        keep = node_mask if f.location is Location.NODE else torch.ones(node_mask.shape[0], dtype=torch.bool)
        if running is not None:
            keep = running[..., None] & keep[:, None] if f.location is Location.NODE else running
        torch.testing.assert_close(s[keep], d[keep], msg=name)


@pytest.mark.parametrize("name", SCOPE)
@pytest.mark.parametrize("processor", SPARSE)
def test_sparse_network_gives_the_dense_numbers(processor, name):
    cfg = ModelConfig(hidden=8, sparse=SparseMode.ALWAYS)
    parts = dataset(name, (9, 12, 16), seed=SCOPE.index(name))
    spec = prepare_spec(parts[0].spec, cfg, name)
    batch = padded_batch(parts, cfg, spec, 16)
    torch.manual_seed(0)
    sparse_net = build_model(spec, cfg, processor).double()
    dense_net = dense_twin(processor, spec, cfg, sparse_net)
    a, b = dense_net(batch, train=True), sparse_net(batch, train=True)
    assert a.graph is None and b.graph is not None
    g = b.graph
    assert_same_raw(spec, a.outputs, b.outputs, g, batch.node_mask)
    assert_same_raw(spec, a.hints, b.hints, g, batch.node_mask, running_steps(batch, max(1, batch.max_length - 1)))
    loss_a, terms_a = dense_net.loss(batch, a)
    loss_b, terms_b = sparse_net.loss(batch, b)
    assert terms_b == pytest.approx(terms_a, rel=1e-9, abs=1e-12)
    loss_a.backward()
    loss_b.backward()
    grads = dict(dense_net.named_parameters())
    for key, p in sparse_net.named_parameters():  # training on edge lists follows the same gradient
        torch.testing.assert_close(p.grad, grads[key].grad, msg=key, rtol=1e-7, atol=1e-10)
    pa, pb = dense_net.predict(a), sparse_net.predict(b)
    run = running_steps(batch, batch.max_length - 1)
    for key, v in pa.items():  # hard predictions of real nodes (at the steps samples run)
        keep = batch.node_mask if key in a.outputs else run[..., None] & batch.node_mask[:, None]
        if spec[key].location is Location.GRAPH:
            keep = torch.ones(batch.size, dtype=torch.bool) if key in a.outputs else run
        if v.is_floating_point():  # scalars: to float rounding
            torch.testing.assert_close(pb[key][keep], v[keep], msg=key)
        else:
            assert torch.equal(pb[key][keep], v[keep]), key


@pytest.mark.parametrize("repred", ["hard", "soft"])
def test_fed_back_pointer_hints_are_the_dense_ones(repred):
    """Soft: the softmax over the candidates; hard: the one-hot of the best candidate."""
    cfg = ModelConfig(hidden=8, sparse=SparseMode.ALWAYS, hint_repred=repred)
    parts = dataset("bellman_ford", (11, 14), seed=9)
    spec = prepare_spec(parts[0].spec, cfg, "bellman_ford")
    batch = padded_batch(parts, cfg, spec, 14)
    torch.manual_seed(1)
    sparse_net = build_model(spec, cfg, "gat").double()
    dense_net = dense_twin("gat", spec, cfg, sparse_net)
    with torch.no_grad():
        a, b = dense_net(batch, train=False), sparse_net(batch, train=False)
    assert_same_raw(spec, a.hints, b.hints, b.graph, batch.node_mask,
                    running_steps(batch, max(1, batch.max_length - 1)))


@pytest.mark.parametrize("name", SCOPE)
def test_hard_hints_predict_bit_for_bit_what_raw_hints_do_on_edge_lists(name):
    """Evaluation keeps each step's hint predictions hard (`hard_hints`): per node, not per entry, and
    `predict` gives exactly what it gives from the (E, S) logits, at steps no sample runs too."""
    cfg = ModelConfig(hidden=8, sparse=SparseMode.ALWAYS)
    parts = dataset(name, (9, 12, 16), seed=SCOPE.index(name))
    spec = prepare_spec(parts[0].spec, cfg, name)
    batch = padded_batch(parts, cfg, spec, 16, torch.float32)
    batch = replace(batch, hints={k: torch.cat([v, v.new_zeros((v.shape[0], 2) + v.shape[2:])], 1)
                                  for k, v in batch.hints.items()})  # two steps past every sample's length
    torch.manual_seed(0)
    net = build_model(spec, cfg, "pgn")
    with torch.no_grad():
        raw, hard = net(batch, train=False), net(batch, train=False, hard_hints=True)
    assert raw.graph is not None and hard.graph is not None
    want, got = net.predict(raw), net.predict(hard)
    assert set(got) == set(want)
    for k, v in want.items():
        assert got[k].dtype == v.dtype and torch.equal(got[k], v), k
    for k, f in spec.items():
        if f.stage is Stage.HINT and entrywise(f):
            assert hard.hints[k].shape == (batch.size, batch.max_length - 1, 16), k


# -- model.sparse --------------------------------------------------------------------------------------

def large_sparse_batch(cfg: ModelConfig, n: int = AUTO_MIN_NODES):
    rng = np.random.RandomState(0)
    ds = run_samples(ALGORITHMS.get("bfs"), [(sparse_er(rng, n, 3 / n, False, False), 0)])
    spec = prepare_spec(ds.spec, cfg, "bfs")
    return spec, Batch.from_dataset(ds, cfg, spec)


@pytest.mark.parametrize("processor", ["gcn", "mpnn"])
def test_auto_runs_sparse_on_large_sparse_graphs_only_where_it_computes_the_dense_numbers(processor):
    cfg = ModelConfig(hidden=8)
    spec, big = large_sparse_batch(cfg)
    net = build_model(spec, cfg, processor)
    exact = PROCESSORS.get(processor).cls.sparse_form is SparseForm.EXACT
    assert (net.sparse_graph(big) is not None) == exact  # MPNN: sparse would be another model
    small = Batch.from_dataset(dataset("bfs", (12,), seed=0)[0], cfg, spec)  # below AUTO_MIN_NODES
    assert net.sparse_graph(small) is None
    dense_graphs = Batch.from_dataset(generate("bfs", num=2, size=AUTO_MIN_NODES, seed=0), cfg, spec)
    assert net.sparse_graph(dense_graphs) is None  # p = 0.5: too dense
    assert build_model(spec, replace(cfg, sparse=SparseMode.ALWAYS), processor).sparse_graph(big) is not None
    assert build_model(spec, replace(cfg, sparse=SparseMode.NEVER), processor).sparse_graph(big) is None


@pytest.mark.parametrize("processor", ["gcn", "mpnn", "rt"])
def test_sparse_at_says_what_sparse_graph_decides_before_the_data(processor):
    """`Net.sparse_at(nodes, density)` (what memory estimates ask of the graphs they expect) follows
    `model.sparse` as `sparse_graph` does: auto from AUTO_MIN_NODES nodes, up to AUTO_MAX_DENSITY, only
    where sparse gives the dense numbers; always everywhere (refusing a network without a sparse form)."""
    cfg = ModelConfig(hidden=8)
    spec, big = large_sparse_batch(cfg)
    exact = PROCESSORS.get(processor).cls.sparse_form is SparseForm.EXACT

    def net(mode: SparseMode) -> Net:
        return build_model(spec, replace(cfg, sparse=mode), processor)

    auto = net(SparseMode.AUTO)
    assert auto.sparse_at(big.n, SparseGraph.from_batch(big).density) == (auto.sparse_graph(big) is not None)
    assert auto.sparse_at(AUTO_MIN_NODES, AUTO_MAX_DENSITY) == exact
    assert not auto.sparse_at(AUTO_MIN_NODES - 1, 0.0) and not auto.sparse_at(4 * AUTO_MIN_NODES, 0.06)
    assert not net(SparseMode.NEVER).sparse_at(4 * AUTO_MIN_NODES, 0.0)
    if PROCESSORS.get(processor).cls.sparse_form is SparseForm.NONE:
        with pytest.raises(RelreasonError, match="has no sparse form"):
            net(SparseMode.ALWAYS).sparse_at(8, 0.5)
    else:
        assert net(SparseMode.ALWAYS).sparse_at(8, 0.5)


def test_auto_keeps_dense_where_a_batch_has_no_sparse_form():
    cfg = ModelConfig(hidden=8)
    spec, big = large_sparse_batch(cfg)
    net = build_model(spec, cfg, "gat")
    assert net.sparse_graph(big, return_state=True) is None
    big.outputs["pi"][0, 0] = int((~adjacency(spec, big.inputs, big.node_mask)[0, 0]).nonzero()[0])
    assert net.sparse_graph(big) is None


@pytest.mark.parametrize("processor, name, reason", [
    ("rt", "bfs", "has no sparse form"),
    ("pgn", "insertion_sort", "pred is a permutation pointer"),
    ("pgn", "floyd_warshall", "D is an edge-located hint"),
    ("pgn", "topological_sort", "points off the graph's edges"),
])
def test_sparse_on_refuses_with_the_reason(processor, name, reason):
    cfg = ModelConfig(hidden=8, sparse=SparseMode.ALWAYS)
    ds = generate(name, num=2, size=8, seed=0)
    spec = prepare_spec(ds.spec, cfg, name)
    entry = PROCESSORS.get(processor)
    net = build_model(spec, cfg, processor, entry.config())
    with pytest.raises(RelreasonError, match=reason):
        net(Batch.from_dataset(ds, cfg, spec), train=False)


def test_pointer_candidates_graph_masks_dense_pointers_to_the_adjacency():
    cfg = ModelConfig(hidden=8, pointer_candidates=PointerCandidates.GRAPH)
    ds = dataset("bfs", (10,), seed=4)[0]
    spec = prepare_spec(ds.spec, cfg, "bfs")
    batch = Batch.from_dataset(ds, cfg, spec)
    torch.manual_seed(0)
    net = build_model(spec, cfg, "mpnn")
    with torch.no_grad():
        probs = torch.softmax(net(batch, train=False).outputs["pi"], -1)
    adj = adjacency(spec, batch.inputs, batch.node_mask)
    assert float(probs[~adj].abs().max()) == 0.0 and bool((probs[adj] > 0).all())


def test_hard_hint_pointers_do_not_depend_on_the_chunking(monkeypatch):
    from relreason.models import sparse

    adj = (torch.rand(2, 6, 6, generator=torch.Generator().manual_seed(0)) < 0.4) | torch.eye(6, dtype=torch.bool)
    g = SparseGraph.from_adjacency(adj | adj.transpose(1, 2), torch.ones(2, 6, dtype=torch.bool))
    logits = torch.randn(g.entries, 7, dtype=torch.float64)
    whole = sparse.pointer_indices(logits, g)  # (B, S, N)
    monkeypatch.setattr(sparse, "ARGMAX_CHUNK_ELEMENTS", g.entries * 2)  # two steps at a time
    assert torch.equal(sparse.pointer_indices(logits, g), whole)
    assert torch.equal(whole[:, 3], sparse.pointer_indices(logits[:, 3], g))
