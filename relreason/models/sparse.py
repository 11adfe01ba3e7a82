"""Large sparse graphs: the encode-process-decode network on edge lists instead of node pairs.

The dense network keeps edge features, edge states and pointer logits per node pair: (B, N, N, H)
tensors, 1.3 GB each for one graph at n = 1,600 and H = 128. On a sparse graph almost all of those
pairs are non-edges. Here the same network runs on the graph's *entries* only, so memory grows with
edges x width (SALSA-CLRS, Minder et al. 2023, evaluates CLRS graph algorithms so up to n = 1,600 on
ER, Watts-Strogatz and Delaunay graphs).

    graph = net.sparse_graph(batch)             # None: this batch runs dense (model.sparse, below)
    out = net(batch, train=False)               # runs on `graph` when it is not None
    out.graph                                   # the SparseGraph the pass ran on (None: dense)

The sparse form
---------------
- **Entries.** A `SparseGraph` is a batch of graphs as one edge list over flat node ids
  (b * N + i): entry e = (row[e], col[e]) is the dense pair [b, i, j]. The entries of a graph are
  exactly the adjacency the dense network hands its processor, built the same way: the inputs'
  edge masks (`adj`) and node pointers, symmetrized, plus a self-loop on every real node, never
  touching a padded node. So the entry set is closed under reversal (`reverse[e]` is (j, i)), and
  entries are sorted by (row, col), which makes `lookup` a binary search. `edge_index` is the
  (2, E) list and `node_graph` the graph id of every node, as PyG writes them.
- **Features.** Node and graph features, node states and the decoders' node inputs stay dense
  ((B, N, H) is small). Edge-located inputs are gathered per entry, (E, F) columns, and a node
  pointer becomes its value per entry (1.0 on the entry (i, ptr[i])): the dense encoders' one-hot
  (B, N, N) row, read at the entries (`relreason.models.encoders.entry_form`). Nothing N^2 x H is
  ever allocated; the only N^2 tensors are the converter's and the check's (B, N, N) masks (bool, or
  one float sum per edge-mask input: at most 10 MB per graph at n = 1,600), read from the dense
  inputs the data side generates anyway.
- **Processors** declare a `sparse_form` and implement `forward_sparse` with their own modules and
  weights, so a dense checkpoint runs sparse unchanged:
  `EXACT`: the dense processor's message graph *is* the adjacency (PGN, PGN-masked, GAT, GATv2,
  GCN; Deep Sets on the self-loops alone), so the sparse pass computes the dense numbers (to float
  rounding). `EDGES`: the dense processor passes messages over all node pairs (MPNN, and the MPNN
  inside Triplet-GMPNN); its sparse form passes them along the entries, as SALSA-CLRS does: a
  *different model* from the dense one with the same weights (it equals the dense PGN; Triplet-GMPNN's
  triplets t_ijk are then taken over the i adjacent to both j and k). `NONE`: no sparse form
  (the transformers: attention over all pairs is their point).
- **Messages** are computed per entry and reduced to nodes with `segment_max` (MPNN/PGN),
  `segment_sum` (GCN, attention values) or `segment_softmax` (attention weights, pointers).
- **Pointers.** A node pointer's logits are computed for the *candidates* of every node: its entries
  (neighbours and itself), logit[e] = w . max(p1(h_i), p2(h_j) + p3(e_ji)) read at the reverse entry,
  with a softmax per row (segment softmax), and the loss and argmax over the same candidates. This
  matches the dense network with `model.pointer_candidates: graph`, which masks every node pointer to
  the adjacency (exactly what `pgn_masked`'s inf_bias approximates). For bfs, dfs, dijkstra,
  mst_prim and bellman_ford the true pointer (outputs and every hint step) is always a candidate
  (tests/models/test_sparse.py checks it on generated graphs); every batch is checked before it runs
  sparse (`data_problems`), and a pointer off the entries is an error, never silently dropped.
- **Not in the sparse form** (`static_problems` names them): edge-located hints and outputs,
  edge pointers, permutation pointers (Sinkhorn over all pairs), `pointer_decoding: edge`, and
  `return_state` (TransNAR reads dense edge states).

Switch (`model.sparse`, `relreason eval --sparse`): `never` (dense, the CLRS path); `always` (sparse,
refusing with the reason where it cannot); `auto` (the default) sparse only where that computes what
the dense processor would: an `EXACT` processor, every check passing, at least AUTO_MIN_NODES nodes
and at most AUTO_MAX_DENSITY of the node pairs entries. Below that size a dense pass is cheap and
keeps every existing number as it was (the CLRS test at n = 64 and the lobsters' ~150 nodes stay
dense); an `EDGES` processor is sparse only when asked (`always`), since that changes the model.
(The names are not on/off: YAML reads those as booleans.)

The sparse loop runs every sample at every step and keeps finished samples' states with a
per-sample mask (the dense loop instead shrinks the batch): simpler on edge lists, at the cost of
computing finished samples once more per step. Graph families (ER with p ~ log n / n,
Watts-Strogatz, Delaunay) come from the data side (`relreason.data.families`); the benchmark
`scripts/bench_sparse.py` measures memory and time dense vs sparse.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import cached_property

import torch

from relreason.data.specs import Feature, Location, Spec, Stage, Type
from relreason.errors import RelreasonError

# `auto`: sparse from this many node slots (below, dense costs little and keeps existing numbers)
AUTO_MIN_NODES = 256
# `auto`: sparse when at most this fraction of the real node pairs are entries (self-loops included)
AUTO_MAX_DENSITY = 0.05
ARGMAX_CHUNK_ELEMENTS = 1 << 22  # (entries x steps) per chunk of a hint's hard predictions: ~100 MB of temporaries


class SparseForm(str, enum.Enum):
    """What a processor's `forward_sparse` computes (module docstring)."""

    NONE = "none"  # no sparse form
    EXACT = "exact"  # the dense processor's numbers: its message graph is the adjacency
    EDGES = "edges"  # messages along the entries where the dense processor uses all pairs: another model


# -- segment reductions: entries (E, ...) grouped by a node index (E,) into (size, ...) ----------------

def _expand(index: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return index.view(-1, *([1] * (like.dim() - 1))).expand_as(like)


def segment_sum(src: torch.Tensor, index: torch.Tensor, size: int) -> torch.Tensor:
    """out[k] = sum of src[e] over the e with index[e] == k: (size, ...)."""
    return src.new_zeros((size,) + tuple(src.shape[1:])).index_add(0, index, src)


def segment_max(src: torch.Tensor, index: torch.Tensor, size: int) -> torch.Tensor:
    """out[k] = max of src[e] over the e with index[e] == k, 0 for a k with none (the dense
    aggregation's value for a receiver without senders). The gradient goes to the maxima, split on ties."""
    out = src.new_zeros((size,) + tuple(src.shape[1:]))
    return out.scatter_reduce(0, _expand(index, src), src, "amax", include_self=False)


def segment_softmax(src: torch.Tensor, index: torch.Tensor, size: int) -> torch.Tensor:
    """Softmax of src over the entries of each segment, (E, ...)."""
    shifted = src - segment_max(src.detach(), index, size)[index]
    e = shifted.exp()
    return e / segment_sum(e, index, size)[index]


def segment_log_softmax(src: torch.Tensor, index: torch.Tensor, size: int) -> torch.Tensor:
    """Log-softmax of src over the entries of each segment, (E, ...)."""
    shifted = src - segment_max(src.detach(), index, size)[index]
    return shifted - segment_sum(shifted.exp(), index, size)[index].log()


def segment_argmax(src: torch.Tensor, index: torch.Tensor, size: int) -> torch.Tensor:
    """(size, ...) int64: the first entry (lowest e) attaining each segment's maximum, -1 for an empty
    segment. Entries are sorted by column within a row, so this is torch.argmax's first maximal column."""
    E = src.shape[0]
    hit = src == segment_max(src, index, size)[index]
    pos = torch.arange(E, device=src.device).view(-1, *([1] * (src.dim() - 1))).expand_as(src)
    first = torch.full((size,) + tuple(src.shape[1:]), E, dtype=torch.int64, device=src.device)
    first = first.scatter_reduce(0, _expand(index, src), torch.where(hit, pos, E), "amin")
    return torch.where(first == E, -1, first)


# -- the sparse batch ------------------------------------------------------------------------------

def entry_features(spec: Spec) -> list[Feature]:
    """The input features that shape the adjacency, as the dense encoders do: edge masks and node pointers."""
    return [f for f in spec.values() if f.stage is Stage.INPUT and (
        (f.location is Location.EDGE and f.type is Type.MASK)
        or (f.location is Location.NODE and f.type in (Type.POINTER, Type.PERMUTATION_POINTER)))]


def adjacency(spec: Spec, inputs: dict[str, torch.Tensor], node_mask: torch.Tensor) -> torch.Tensor:
    """(B, N, N) bool: the dense encoders' input adjacency (edge masks and node pointers, symmetrized,
    self-loops), restricted to real nodes."""
    B, n = node_mask.shape
    adj = torch.eye(n, dtype=torch.bool, device=node_mask.device).expand(B, n, n).clone()
    for f in entry_features(spec):
        v = inputs[f.name]
        if f.location is Location.EDGE:
            adj |= (v + v.transpose(1, 2)) > 0
        else:  # a pointer: the pair (i, ptr[i]) both ways
            rows = torch.arange(B, device=v.device)[:, None].expand(B, n)
            cols = torch.arange(n, device=v.device).expand(B, n)
            ok = v >= 0
            adj[rows[ok], cols[ok], v[ok]] = True
            adj[rows[ok], v[ok], cols[ok]] = True
    return adj & node_mask[:, :, None] & node_mask[:, None, :]


@dataclass(eq=False)
class SparseGraph:
    """A batch of B graphs with N node slots each, as one sorted edge list (module docstring)."""

    size: int  # B
    n: int  # N: node slots per graph (flat node id = b * N + i)
    row: torch.Tensor  # (E,) int64 flat id of the pair's first node (the receiver of attention, the pointer's source)
    col: torch.Tensor  # (E,) int64 flat id of its second node
    real_pairs: int  # sum over graphs of (real nodes)^2, for the density

    @staticmethod
    def from_adjacency(adj: torch.Tensor, node_mask: torch.Tensor) -> "SparseGraph":
        """The entries of a (B, N, N) bool adjacency (assumed symmetric, as `adjacency` gives)."""
        B, n, _ = adj.shape
        b, i, j = adj.nonzero(as_tuple=True)  # row-major order: sorted by (b, i, j)
        real = node_mask.sum(1).to(torch.int64)
        return SparseGraph(B, n, b * n + i, b * n + j, int((real * real).sum()))

    @staticmethod
    def from_batch(batch) -> "SparseGraph":
        """The converter from a dense padded Batch (relreason.models.batch)."""
        return SparseGraph.from_adjacency(adjacency(batch.spec, batch.inputs, batch.node_mask), batch.node_mask)

    # -- structure ---------------------------------------------------------------------------------

    @property
    def nodes(self) -> int:
        """B * N: the number of flat node ids."""
        return self.size * self.n

    @property
    def entries(self) -> int:
        return int(self.row.shape[0])

    @property
    def device(self) -> torch.device:
        return self.row.device

    @property
    def edge_index(self) -> torch.Tensor:
        """(2, E): (row, col) of every entry."""
        return torch.stack([self.row, self.col])

    @property
    def density(self) -> float:
        """Entries over real node pairs (self-loops included)."""
        return self.entries / max(1, self.real_pairs)

    @cached_property
    def node_graph(self) -> torch.Tensor:
        """(B * N,) the graph of every flat node id."""
        return torch.arange(self.size, device=self.device).repeat_interleave(self.n)

    @cached_property
    def entry_graph(self) -> torch.Tensor:
        """(E,) the graph of every entry."""
        return torch.div(self.row, self.n, rounding_mode="floor")

    @cached_property
    def keys(self) -> torch.Tensor:
        """(E,) row * (B * N) + col: ascending, since entries are sorted by (row, col)."""
        return self.row * self.nodes + self.col

    def lookup(self, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        """The entry index of each pair (rows, cols) of flat node ids, -1 where it is no entry."""
        key = rows * self.nodes + cols
        at = torch.searchsorted(self.keys, key).clamp(max=max(0, self.entries - 1))
        found = (self.keys[at] == key) if self.entries else torch.zeros_like(key, dtype=torch.bool)
        return torch.where(found, at, -1)

    @cached_property
    def reverse(self) -> torch.Tensor:
        """(E,) the entry (j, i) of every entry (i, j)."""
        return self.lookup(self.col, self.row)

    @cached_property
    def self_entry(self) -> torch.Tensor:
        """(B * N,) the entry (i, i) of every node, -1 for padded nodes."""
        ids = torch.arange(self.nodes, device=self.device)
        return self.lookup(ids, ids)

    @cached_property
    def ptr(self) -> torch.Tensor:
        """(B * N + 1,) CSR offsets: node k's entries are ptr[k]:ptr[k + 1]."""
        counts = torch.bincount(self.row, minlength=self.nodes)
        return torch.cat([counts.new_zeros(1), counts.cumsum(0)])

    def loops(self) -> tuple["SparseGraph", torch.Tensor]:
        """The self-loops alone (Deep Sets' message graph) and their indices among the entries."""
        keep = (self.row == self.col).nonzero(as_tuple=True)[0]
        return SparseGraph(self.size, self.n, self.row[keep], self.col[keep], self.real_pairs), keep

    @cached_property
    def wedges(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Triplets (i, j, k) with entries (i, j), (i, k) and (j, k): their entry indices (first (i, j),
        second (i, k), target (j, k)), each (W,). W = the sum over entries (j, k) of the common
        neighbours of j and k, at most the sum of squared degrees."""
        counts = self.ptr[1:] - self.ptr[:-1]  # (B * N,)
        deg = counts[self.row]  # (E,) pairs of entries sharing the row of entry e
        first = torch.arange(self.entries, device=self.device).repeat_interleave(deg)
        start = torch.repeat_interleave(self.ptr[:-1][self.row], deg)
        offset = torch.arange(first.shape[0], device=self.device) - torch.repeat_interleave(deg.cumsum(0) - deg, deg)
        second = start + offset
        target = self.lookup(self.col[first], self.col[second])
        keep = target >= 0
        return first[keep], second[keep], target[keep]

    # -- dense <-> entries ---------------------------------------------------------------------

    def split(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(b, i, j) of every entry, for indexing dense (B, N, N, ...) tensors."""
        return self.entry_graph, self.row - self.entry_graph * self.n, self.col - self.entry_graph * self.n

    def gather(self, dense: torch.Tensor) -> torch.Tensor:
        """dense (B, N, N, ...) read at the entries: (E, ...)."""
        b, i, j = self.split()
        return dense[b, i, j]

    def pointer_values(self, ptr: torch.Tensor) -> torch.Tensor:
        """A node pointer (B, N) of node indices (-1 masked) as its value per entry: (E,) float, 1.0 at
        the entries (i, ptr[i]) (the dense one-hot rows read at the entries)."""
        _, _, j = self.split()
        return (ptr.reshape(-1)[self.row] == j).float()

    def pointer_entries(self, ptr: torch.Tensor) -> torch.Tensor:
        """Node pointers (B, ..., N) -> the entry (i, ptr[i]) of each, -1 where masked or no entry."""
        B, n = self.size, self.n
        base = (torch.arange(B, device=ptr.device) * n).view(B, *([1] * (ptr.dim() - 1)))
        rows = base + torch.arange(n, device=ptr.device)
        found = self.lookup(rows.expand_as(ptr), base + ptr.clamp(min=0))
        return torch.where(ptr >= 0, found, -1)

    def entry_targets(self, entry: torch.Tensor) -> torch.Tensor:
        """Entry indices (B * N, ...) chosen per node -> node indices (B, ..., N) of their columns;
        a node without entries (padding) points to itself, as padded pointers do in a Batch."""
        own = torch.arange(self.nodes, device=entry.device).view(-1, *([1] * (entry.dim() - 1)))
        flat = torch.where(entry >= 0, self.col[entry.clamp(min=0)], own)  # (B * N, ...)
        idx = flat - (own - own % self.n)  # within the graph
        out = idx.view(self.size, self.n, *entry.shape[1:])
        return out.movedim(1, -1)  # (B, ..., N)


# -- what can run sparse ---------------------------------------------------------------------------

def entrywise(f: Feature) -> bool:
    """Whether the network holds this feature per entry in the sparse form (node pointers); the
    other supported features stay dense."""
    return f.location is Location.NODE and f.type is Type.POINTER


def feature_problem(f: Feature) -> str | None:
    """Why a feature has no sparse form, or None."""
    if f.type is Type.PERMUTATION_POINTER:
        return f"{f.name} is a permutation pointer (its Sinkhorn normalization runs over all node pairs)"
    if f.location is Location.EDGE and f.type is Type.POINTER:
        return f"{f.name} is an edge pointer (it points from node pairs to nodes)"
    if f.location is Location.EDGE and f.stage is not Stage.INPUT:
        return f"{f.name} is an edge-located {f.stage.value} (decoded for every node pair)"
    return None


def static_problems(spec: Spec, processor, pointer_edges: bool, return_state: bool) -> list[str]:
    """Why a network cannot run sparse whatever its data (empty: it can). `pointer_edges`: pointers
    decoded from edge states (`model.pointer_decoding: edge`)."""
    out = []
    if processor.sparse_form is SparseForm.NONE:
        out.append(f"the processor {type(processor).__name__} has no sparse form")
    if pointer_edges:
        out.append("model.pointer_decoding 'edge' decodes pointers from dense edge states")
    if return_state:
        out.append("the caller reads the dense final state (return_state)")
    out.extend(p for p in map(feature_problem, spec.values()) if p is not None)
    return out


def data_problems(spec: Spec, batch, graph: SparseGraph) -> list[str]:
    """Why this batch cannot run sparse (empty: it can): an edge input with values off the entries,
    or a true node pointer (input, output or hint at a real step) that is no entry."""
    out = []
    b, i, j = graph.split()
    on = torch.zeros(graph.size, graph.n, graph.n, dtype=torch.bool, device=graph.device)
    on[b, i, j] = True
    T = batch.max_length
    real_step = batch.lengths[:, None] > torch.arange(T, device=batch.device)[None, :]  # (B, T)
    for name, f in spec.items():
        if f.location is Location.EDGE and f.stage is Stage.INPUT:
            v = batch.inputs[name]
            off = (v != 0).reshape(graph.size, graph.n, graph.n, -1).any(-1) & ~on
            if bool(off.any()):
                out.append(f"input {name} has values off the graph's edges ({int(off.sum())} pairs)")
        elif entrywise(f):
            store = {Stage.INPUT: batch.inputs, Stage.HINT: batch.hints, Stage.OUTPUT: batch.outputs}[f.stage]
            ptr = store[name]
            valid = (ptr >= 0) & batch.node_mask.view(graph.size, *([1] * (ptr.dim() - 2)), graph.n)
            if f.stage is Stage.HINT:
                valid &= real_step[:, :, None]
            bad = valid & (graph.pointer_entries(ptr) < 0)
            if bool(bad.any()):
                out.append(f"{f.stage.value} {name} points off the graph's edges ({int(bad.sum())} pointers)")
    return out


def refuse(problems: list[str]) -> RelreasonError:
    return RelreasonError("cannot run sparse: " + "; ".join(problems),
                          "use model.sparse=auto (dense where sparse does not apply) or never")


# -- losses, feedback and predictions of entrywise features ----------------------------------------

def pointer_loss_sum(logits: torch.Tensor, truth: torch.Tensor, valid: torch.Tensor,
                     graph: SparseGraph) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-entropy of per-entry pointer logits (E,) or (E, S) against node indices (B, N) or
    (B, S, N), over each node's candidates: summed over the `valid` elements with a target, and their number."""
    logp = segment_log_softmax(logits, graph.row, graph.nodes)
    entry = graph.pointer_entries(truth)  # (B, [S,] N)
    ok = valid & (truth >= 0)
    if bool((ok & (entry < 0)).any()):
        raise RelreasonError("a true pointer is no entry of the sparse graph",
                             "data_problems refuses such batches; use model.sparse=never")
    at = entry.clamp(min=0)
    if logits.dim() == 1:
        picked = logp[at]
    else:  # logp (E, S), entry (B, S, N): logp[entry[b, s, i], s]
        steps = torch.arange(truth.shape[1], device=truth.device).view(1, -1, 1)
        picked = logp[at, steps.expand_as(at)]
    return torch.where(ok, -picked, 0.0).sum(), ok.sum()


def pointer_feedback(logits: torch.Tensor, hard: bool, graph: SparseGraph) -> torch.Tensor:
    """Per-entry pointer logits (E,) as the next step's per-entry value: softmax per row, or 1.0 at its argmax."""
    if not hard:
        return segment_softmax(logits, graph.row, graph.nodes)
    best = segment_argmax(logits, graph.row, graph.nodes)  # (B * N,)
    return (best[graph.row] == torch.arange(graph.entries, device=logits.device)).to(logits.dtype)


def pointer_indices(logits: torch.Tensor, graph: SparseGraph) -> torch.Tensor:
    """Per-entry logits (E,) or (E, S) -> hard pointers (B, N) or (B, S, N): each node's best candidate.
    Hints go ARGMAX_CHUNK_ELEMENTS at a time (dfs at n = 1,600 has 4,800 steps of 25,000 entries)."""
    if logits.dim() == 1:
        return graph.entry_targets(segment_argmax(logits, graph.row, graph.nodes))
    step = max(1, ARGMAX_CHUNK_ELEMENTS // max(1, graph.entries))
    return torch.cat([graph.entry_targets(segment_argmax(logits[:, a:a + step], graph.row, graph.nodes))
                      for a in range(0, logits.shape[1], step)], 1)
