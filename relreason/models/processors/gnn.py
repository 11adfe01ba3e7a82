"""The CLRS baseline GNN processors besides MPNN: Deep Sets, PGN, PGN-masked, Triplet-GMPNN, GAT
and GATv2.

Semantics follow the reference processors (google-deepmind/clrs `processors.py`) and the papers
behind them. All read z = [node_in, previous node state] (B, N, 2H) and return a node state of
width H; only Triplet-GMPNN also returns an edge state (its triplet messages, read by this step's
decoders and not fed back: `carry_edge = False`).

Deep Sets, PGN, PGN-masked and Triplet-GMPNN are the MPNN of `mpnn.py` (its message code, reused)
with a different neighbourhood, decoder masking, or triplets and a gate. PGN, PGN-masked and Deep Sets
take their maximum over the neighbours (`processor.reduction: masked_max`, the reference since 2022-05) or
as the CLRS-30 release did, over every real sender with each non-neighbour's message counted as 0
(`adjacency_product_max`, the `clrs30` recipe's). GAT/GATv2 attend, for
node i, over the j with adj[i, j] (softmax over the second node axis), as the reference does.

Every processor here accepts the factored edge input (`EdgeInput`, `factored_edges = True`):
a linear map of the edge features is then folded into the encoder's small matrix.

Sparse forms (`forward_sparse`, relreason.models.sparse), with the same modules and weights: Deep Sets,
PGN, PGN-masked, GAT and GATv2 compute their dense numbers on the edge list (attention: a segment
softmax over each node's entries). Triplet-GMPNN's dense messages and triplets range over all nodes;
its sparse form passes messages along the entries and takes each entry (j, k)'s triplet maximum over
the i adjacent to both j and k (the wedges of the edge list; i = j always is one), another model.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from relreason.errors import RelreasonError
from relreason.models.config import coerce_enums
from relreason.models.encoders import EdgeInput, linear
from relreason.models.kernels import plain
from relreason.models.precision import float32_apply
from relreason.models.processors.base import Processor, State, masked_fill_value, register_processor
from relreason.models.processors.mpnn import MPNN, MPNNConfig, fused_linear
from relreason.models.sparse import SparseForm, SparseGraph, segment_max, segment_softmax, segment_sum

# Elements of one chunk (B, c, T, N, N) of triplet sums in the backward: 2^24 floats = 64 MB.
TRIPLET_CHUNK_ELEMENTS = 1 << 24
# The reference's leaky-ReLU slope in GAT/GATv2 (jax.nn.leaky_relu default).
LEAKY_SLOPE = 0.01


def edge_linear(edge_in: torch.Tensor | EdgeInput, weight: torch.Tensor, bias: torch.Tensor | None = None,
                add: torch.Tensor | None = None) -> torch.Tensor:
    """edge_in @ weight.T + bias (+ add) for dense (B, N, N, H) or factored edges: (B, N, N, K)."""
    if isinstance(edge_in, EdgeInput):
        return edge_in.project(weight, bias, add=add)
    out = F.linear(edge_in, weight, bias)
    return out if add is None else out + add


class _MaxPlus(torch.autograd.Function):
    """out[b, j, k, t] = max_i (a[b, i, j, t] + c[b, i, k, t]), never as a differentiable (B, N, N, N, T) tensor.

    Forward: `_running_max`, a running maximum over i (14x faster at n = 64 than a chunked max with
    indices over materialized (B, c, J, K, T) slabs, which does not vectorize). Backward: the
    gradient goes to the maximal i, split evenly on ties, as autograd's amax and JAX's max (the
    reference's `jnp.max`) do; it recomputes the sums in chunks of i (at most TRIPLET_CHUNK_ELEMENTS
    elements), so only a, c and the output are kept (a plain autograd amax keeps the whole sum:
    268 MB at n = 64, batch 32). Both work on the (T, J, K) layout of `_tjk`.
    """

    @staticmethod
    def forward(ctx, a: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        a_t, c_t = _tjk(a, c)
        out_t = _running_max(a_t, c_t)  # (B, T, J, K)
        ctx.save_for_backward(a_t, c_t, out_t)
        return out_t.permute(0, 2, 3, 1).contiguous()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: torch.Tensor):
        a_t, c_t, out_t = ctx.saved_tensors  # (B, I, T, J, 1), (B, I, T, 1, K), (B, T, J, K)
        b, n = a_t.shape[:2]
        chunk = max(1, TRIPLET_CHUNK_ELEMENTS // max(1, out_t.numel()))
        spans = [(s, min(s + chunk, n)) for s in range(0, n, chunk)]

        def hits(s: int, e: int) -> torch.Tensor:
            """(B, e - s, T, J, K): 1.0 where i attains the maximum, else 0.0 (sums never exceed it)."""
            return (a_t[:, s:e] + c_t[:, s:e]).sub_(out_t[:, None]).sign_().add_(1.0)

        cached = hits(0, n) if len(spans) == 1 else None  # one chunk: computed once, used twice
        count = cached.sum(1) if cached is not None else sum(hits(s, e).sum(1) for s, e in spans)
        share = (grad.permute(0, 3, 1, 2) / count.clamp(min=1.0))[:, None]  # (B, 1, T, J, K): ties split it
        grad_a, grad_c = a_t.new_empty(a_t.shape[:-1]), c_t.new_empty(c_t.shape[:-2] + c_t.shape[-1:])
        for s, e in spans:
            h = (cached if cached is not None else hits(s, e)).mul_(share)  # (B, e - s, T, J, K)
            torch.sum(h, 4, out=grad_a[:, s:e])  # (B, e - s, T, J)
            torch.sum(h, 3, out=grad_c[:, s:e])  # (B, e - s, T, K)
        return grad_a.transpose(2, 3), grad_c.transpose(2, 3)


# Bytes of one chunk of the running maximum (and of the slice added to it): a quarter of a 1 MB L2
# cache, so the loop over i works in cache. A chunk holds whole batch elements.
MAX_PLUS_CACHE_BYTES = 1 << 18


def _tjk(a: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """a (B, I, J, T), c (B, I, K, T) -> (B, I, T, J, 1), (B, I, T, 1, K): their sum is laid out (T, J, K),
    so the innermost loop of the broadcast add runs over K with a[.., j] broadcast (with T = 8
    innermost it does not vectorize: 1.5x slower at n = 64)."""
    return a.transpose(2, 3).contiguous()[..., None], c.transpose(2, 3).contiguous()[..., None, :]


def _running_max(a_t: torch.Tensor, c_t: torch.Tensor) -> torch.Tensor:
    """max_i (a_t[:, i] + c_t[:, i]) -> (B, T, J, K): per cache-sized chunk of the batch, one add and one
    maximum per i, in cache."""
    b, n, t, nj, _ = a_t.shape
    nk = c_t.shape[-1]
    step = max(1, min(b, MAX_PLUS_CACHE_BYTES // max(1, t * nj * nk * a_t.element_size())))
    out = a_t.new_empty(b, t, nj, nk)
    tmp = a_t.new_empty(step, t, nj, nk)
    for s in range(0, b, step):
        e = min(b, s + step)
        best, x, a_s, c_s = out[s:e], tmp[:e - s], a_t[s:e], c_t[s:e]
        torch.add(a_s[:, 0], c_s[:, 0], out=best)
        for i in range(1, n):
            torch.maximum(best, torch.add(a_s[:, i], c_s[:, i], out=x), out=best)
    return out


def max_plus(a: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """max_i (a[:, i, j] + c[:, i, k]) -> (B, N, N, T) with memory bounded by TRIPLET_CHUNK_ELEMENTS."""
    if plain():  # vmap (relreason.models.kernels.plain_autograd): the (B, I, J, K, T) sum, differentiable
        return (a.unsqueeze(3) + c.unsqueeze(2)).amax(1)
    return float32_apply(_MaxPlus.apply, a, c)


class TripletMessages(nn.Module):
    """Triplet edge messages (Dudzik & Veličković 2022, as used by Ibarz et al. 2022):
    t_ijk = t1(z_i) + t2(z_j) + t3(z_k) + te1(e_ij) + te2(e_ik) + te3(e_jk) + tg(g),
    out_jk = relu(o3(max_i t_ijk)).

    Only t1, te1, te2 depend on i, so the max over i is taken of those (a max-plus product) and
    the rest is added afterwards: the same value without a differentiable (B, N, N, N, T) tensor.
    """

    def __init__(self, z_dim: int, hidden: int, features: int):
        super().__init__()
        self.features = features
        self.node = linear(z_dim, 3 * features)  # t1 | t2 | t3
        self.edge = linear(hidden, 3 * features)  # te1 | te2 | te3
        self.graph = linear(hidden, features)  # tg
        self.out = linear(features, hidden)  # o3

    def forward(self, z: torch.Tensor, edge_in: torch.Tensor | EdgeInput, graph_in: torch.Tensor,
                node_mask: torch.Tensor) -> torch.Tensor:
        t1, t2, t3 = self.node(z).split(self.features, dim=-1)  # 3 x (B, N, T)
        te1, te2, te3 = edge_linear(edge_in, self.edge.weight, self.edge.bias).split(self.features, dim=-1)
        a = t1[:, :, None, :] + te1  # (B, I, J, T)
        # a padded node i must never win the max
        a = a.masked_fill(~node_mask[:, :, None, None], masked_fill_value(a))
        tri = max_plus(a, te2)  # (B, J, K, T)
        tri = tri + t2[:, :, None, :] + t3[:, None, :, :] + te3 + self.graph(graph_in)[:, None, None, :]
        return F.relu(self.out(tri))  # (B, N, N, H)

    def sparse(self, z: torch.Tensor, edge_in: EdgeInput, graph_in: torch.Tensor, graph: SparseGraph) -> torch.Tensor:
        """The triplet messages of the entries (j, k), each a maximum over the i with entries (i, j) and
        (i, k) (`graph.wedges`): (E, H)."""
        b, n, _ = z.shape
        t1, t2, t3 = self.node(z).reshape(b * n, -1).split(self.features, dim=-1)  # 3 x (B * N, T)
        te1, te2, te3 = edge_in.project(self.edge.weight, self.edge.bias).split(self.features, dim=-1)  # 3 x (E, T)
        first, second, target = graph.wedges  # (W,) entries (i, j), (i, k), (j, k)
        a = t1[graph.row] + te1  # (E, T): [i, j]
        tri = segment_max(a[first] + te2[second], target, graph.entries)  # (E, T)
        tri = tri + t2[graph.row] + t3[graph.col] + te3 + self.graph(graph_in)[graph.entry_graph]
        return F.relu(self.out(tri))  # (E, H)


class Reduction(str, enum.Enum):
    """How PGN and Deep Sets take the maximum over a receiver's senders (`processor.reduction`)."""

    # the max over the adjacency's senders only: the reference since clrs e3d33d7 (2022-05-25), which puts
    # -1e6 where adj is 0 (v2.0.3 processors.py L475-479), and the RT authors' fork (Basic_MPNN_jax.py L79-81)
    MASKED_MAX = "masked_max"
    # max_i adj_ij * m_ij over every real sender i: a non-neighbour counts as a message of 0, so the maximum is
    # at least 0 wherever a receiver has one. The CLRS-30 release's code, `self.reduction(msgs * adj, axis=1)`
    # (clrs eddd94e processors.py L362; from 3ec2655, 2022-02-18, on unrectified messages: see relreason/recipes/clrs30.yaml)
    ADJACENCY_PRODUCT_MAX = "adjacency_product_max"


@dataclass
class PGNConfig(MPNNConfig):
    """PGN's options (and Deep Sets', a PGN on self-loops): the MPNN's plus how the maximum treats non-neighbours."""

    reduction: Reduction = Reduction.MASKED_MAX  # clrs 2.0.x: non-neighbours masked out (relreason/recipes/clrs30.yaml: the release's)

    def __post_init__(self) -> None:
        super().__post_init__()
        coerce_enums(self, "processor", {"reduction": Reduction})


def with_zero_messages(agg: torch.Tensor, outside: torch.Tensor) -> torch.Tensor:
    """The adjacency-product maximum from the masked one: where a receiver has a real sender outside its adjacency
    (`outside` (B, N) True), that sender's message counts as 0, so the maximum is max(agg, 0). agg (B, N, H)."""
    return torch.where(outside[..., None], agg.clamp(min=0.0), agg)


@register_processor("pgn", PGNConfig, "Pointer Graph Network: MPNN restricted to the adjacency",
                    paper="Veličković et al. 2020", recipes={"clrs": "pgn"})
class PGN(MPNN):
    """The MPNN aggregating over the adjacency only, its maximum masked or the release's adjacency product
    (`Reduction`; the sparse form computes either exactly)."""

    restrict_to_adj = True
    sparse_form = SparseForm.EXACT

    def __init__(self, cfg: PGNConfig, hidden: int, z_dim: int | None = None):
        super().__init__(cfg, hidden, z_dim)
        self.reduction = cfg.reduction

    def aggregate(self, z, edge_in, graph_in, adj, node_mask, m12=None) -> torch.Tensor:
        agg = super().aggregate(z, edge_in, graph_in, adj, node_mask, m12)  # (B, N, H): the masked maximum
        if self.reduction is Reduction.MASKED_MAX:
            return agg
        return with_zero_messages(agg, (node_mask[:, :, None] & ~adj).any(1))  # a real sender i with adj[i, j] False

    def aggregate_sparse(self, edge_in, graph_in, graph: SparseGraph, m12) -> torch.Tensor:
        agg = super().aggregate_sparse(edge_in, graph_in, graph, m12)  # (B, N, H)
        if self.reduction is Reduction.MASKED_MAX:
            return agg
        # every real node, and no padded one, has its self-loop entry: so a receiver with fewer entries than its
        # graph has real nodes has a real sender outside its adjacency
        ones = torch.ones_like(graph.col, dtype=agg.dtype)
        senders = segment_sum(ones, graph.col, graph.nodes)  # (B * N,)
        real = segment_sum((graph.row == graph.col).to(agg.dtype), graph.entry_graph, graph.size)  # (B,)
        return with_zero_messages(agg, (senders < real[graph.node_graph]).view(agg.shape[:2]))


@register_processor("pgn_masked", PGNConfig, "PGN whose decoders only point along the adjacency",
                    paper="Veličković et al. 2020")
class PGNMasked(PGN):
    inf_bias = True  # node pointers outside the adjacency get the lowest logit (reference PGNMask)
    inf_bias_edge = True  # and so do edge pointers


@register_processor("deepsets", PGNConfig, "Deep Sets: MPNN with self-loops only", paper="Zaheer et al. 2017",
                    recipes={"clrs": "deepsets"})
class DeepSets(PGN):
    """The reference's DeepSets: its PGN with the adjacency replaced by the identity."""

    def forward(self, node_in, edge_in, graph_in, state: State, adj, node_mask) -> State:
        b, n, _ = node_in.shape
        eye = torch.eye(n, dtype=torch.bool, device=node_in.device).expand(b, n, n)  # (B, N, N)
        return super().forward(node_in, edge_in, graph_in, state, eye, node_mask)

    def forward_sparse(self, node_in, edge_in: EdgeInput, graph_in, state: State, graph: SparseGraph,
                       node_mask) -> State:
        loops, keep = graph.loops()  # the self-loops: Deep Sets' message graph
        own = EdgeInput(edge_in.raw[keep], edge_in.weight, edge_in.bias)
        return super().forward_sparse(node_in, own, graph_in, state, loops, node_mask)


@dataclass
class TripletGMPNNConfig(MPNNConfig):
    """Triplet-GMPNN options (Ibarz et al. 2022) on top of the MPNN's."""

    triplet_features: int = 8  # nb_triplet_fts: reference run.py default (Ibarz et al. 2022)
    gated: bool = True  # the "G": update gate with bias -3 (Ibarz et al. 2022)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.triplet_features < 1:
            raise RelreasonError(f"processor.triplet_features must be >= 1, got {self.triplet_features}",
                                 "the reference uses 8")
        if self.layers != 1:  # its forward is one gated triplet update per step (Ibarz et al. 2022)
            raise RelreasonError(f"processor.layers must be 1 for triplet_gmpnn, got {self.layers}",
                                 "stack steps with model.processor_steps instead")


@register_processor("triplet_gmpnn", TripletGMPNNConfig, "Gated MPNN with triplet edge messages",
                    paper="Ibarz et al. 2022", recipes={"clrs": "triplet_gmpnn"})
class TripletGMPNN(MPNN):
    """The MPNN of `mpnn.py` plus the reference PGN's `use_triplets` and `gated` options:

    gate  = sigmoid(g3(relu(g1(z_r) + g2(agg_r))))   g3's bias starts at -3: updates start mostly closed
    h_r   = gate * h_r + (1 - gate) * hidden_r
    edge  = triplet messages (B, N, N, H), for this step's decoders only (carry_edge False).
    """

    carry_edge = False  # triplet messages feed this step's decoders only, as in the reference

    def __init__(self, cfg: TripletGMPNNConfig, hidden: int):
        super().__init__(cfg, hidden)
        self.edge_dim = hidden
        self.triplets = TripletMessages(2 * hidden, hidden, cfg.triplet_features)
        self.gated = cfg.gated
        if cfg.gated:
            self.gate_z = linear(2 * hidden, hidden)  # g1
            self.gate_agg = linear(hidden, hidden)  # g2
            self.gate_out = linear(hidden, hidden)  # g3
            nn.init.constant_(self.gate_out.bias, -3.0)

    def forward(self, node_in, edge_in, graph_in, state: State, adj, node_mask) -> State:
        # the MPNN's message step (mpnn.py), keeping the aggregate for the gate
        z = torch.cat([node_in, state.node], -1)  # (B, N, 2H)
        agg = self.aggregate(z, edge_in, graph_in, adj, node_mask)  # (B, N, H)
        out = torch.relu(self.o1(z) + self.o2(agg))
        if self.ln is not None:
            out = self.ln(out)
        if self.gated:
            gate = torch.sigmoid(self.gate_out(torch.relu(self.gate_z(z) + self.gate_agg(agg))))
            out = out * gate + state.node * (1 - gate)
        return State(out, self.triplets(z, edge_in, graph_in, node_mask), state.graph)

    def forward_sparse(self, node_in, edge_in: EdgeInput, graph_in, state: State, graph: SparseGraph,
                       node_mask) -> State:
        """`forward` along the entries: messages and triplets per entry (module docstring); edge state (E, H)."""
        z = torch.cat([node_in, state.node], -1)  # (B, N, 2H)
        agg = self.aggregate_sparse(edge_in, graph_in, graph, fused_linear(z, self.m1, self.m2))  # (B, N, H)
        out = torch.relu(self.o1(z) + self.o2(agg))
        if self.ln is not None:
            out = self.ln(out)
        if self.gated:
            gate = torch.sigmoid(self.gate_out(torch.relu(self.gate_z(z) + self.gate_agg(agg))))
            out = out * gate + state.node * (1 - gate)
        return State(out, self.triplets.sparse(z, edge_in, graph_in, graph), state.graph)


@dataclass
class GATConfig:
    """Options of GAT and GATv2."""

    heads: int = 1  # nb_heads: reference run.py default for GAT processors
    use_ln: bool = True  # reference run.py default use_ln=True
    layers: int = 1  # untied attention layers per algorithm step; CLRS 1 (RT authors' fork: --num_layers)

    def __post_init__(self) -> None:
        if self.heads < 1:
            raise RelreasonError(f"processor.heads must be >= 1, got {self.heads}", "the reference uses 1")
        if self.layers < 1:
            raise RelreasonError(f"processor.layers must be >= 1, got {self.layers}", "use 1 (the CLRS processors)")


class GATScores(nn.Module):
    """GAT logits (reference GAT): leaky_relu(a_1(z_i) + a_2(z_j) + a_e(e_ij) + a_g(g)), one per head."""

    def __init__(self, hidden: int, heads: int, z_dim: int):
        super().__init__()
        self.heads = heads
        self.att_z = linear(z_dim, 2 * heads)  # a_1 (receiver i) | a_2 (sender j)
        self.att_e = linear(hidden, heads)
        self.att_g = linear(hidden, heads)

    def forward(self, z: torch.Tensor, edge_in: torch.Tensor | EdgeInput, graph_in: torch.Tensor) -> torch.Tensor:
        a1, a2 = self.att_z(z).split(self.heads, dim=-1)  # (B, N, heads) each
        logits = edge_linear(edge_in, self.att_e.weight, self.att_e.bias,
                             add=a1[:, :, None] + a2[:, None, :] + self.att_g(graph_in)[:, None, None])
        return F.leaky_relu(logits, LEAKY_SLOPE)  # (B, I, J, heads)

    def sparse(self, z: torch.Tensor, edge_in: EdgeInput, graph_in: torch.Tensor, graph: SparseGraph) -> torch.Tensor:
        """The logits of the entries (i, j): (E, heads)."""
        b, n, _ = z.shape
        a1, a2 = self.att_z(z).reshape(b * n, -1).split(self.heads, dim=-1)  # (B * N, heads) each
        add = a1[graph.row] + a2[graph.col] + self.att_g(graph_in)[graph.entry_graph]
        return F.leaky_relu(edge_in.project(self.att_e.weight, self.att_e.bias, add=add), LEAKY_SLOPE)


class GATv2Scores(nn.Module):
    """GATv2 logits (reference GATv2): a_h . leaky_relu(w_1(z_j) + w_2(z_i) + w_e(e_ij) + w_g(g))_h,
    the pre-activation of width H split into heads, one map H/heads -> 1 per head."""

    def __init__(self, hidden: int, heads: int, z_dim: int):
        super().__init__()
        self.hidden = hidden
        self.heads = heads
        self.head_dim = hidden // heads
        self.pre_z = linear(z_dim, 2 * hidden)  # w_1 (sender j) | w_2 (receiver i); mid size = H
        self.pre_e = linear(hidden, hidden)
        self.pre_g = linear(hidden, hidden)
        # the per-head Linear(H/heads -> 1) maps, stacked as a (heads, H/heads) weight. Their biases
        # are left out: a constant over j cancels in the softmax, so it would never get a gradient.
        std = 1 / math.sqrt(self.head_dim)
        self.score = nn.Parameter(nn.init.trunc_normal_(torch.empty(heads, self.head_dim), std=std, a=-2 * std,
                                                        b=2 * std))

    def forward(self, z: torch.Tensor, edge_in: torch.Tensor | EdgeInput, graph_in: torch.Tensor) -> torch.Tensor:
        b, n, _ = z.shape
        w1, w2 = self.pre_z(z).split(self.hidden, dim=-1)  # (B, N, H) each
        pre = edge_linear(edge_in, self.pre_e.weight, self.pre_e.bias,
                          add=w1[:, None, :] + w2[:, :, None] + self.pre_g(graph_in)[:, None, None])
        pre = F.leaky_relu(pre, LEAKY_SLOPE).view(b, n, n, self.heads, self.head_dim)  # (B, I, J, heads, F)
        return (pre * self.score).sum(-1)  # (B, I, J, heads)

    def sparse(self, z: torch.Tensor, edge_in: EdgeInput, graph_in: torch.Tensor, graph: SparseGraph) -> torch.Tensor:
        """The logits of the entries (i, j): (E, heads)."""
        b, n, _ = z.shape
        w1, w2 = self.pre_z(z).reshape(b * n, -1).split(self.hidden, dim=-1)  # (B * N, H) each
        add = w1[graph.col] + w2[graph.row] + self.pre_g(graph_in)[graph.entry_graph]
        pre = F.leaky_relu(edge_in.project(self.pre_e.weight, self.pre_e.bias, add=add), LEAKY_SLOPE)  # (E, H)
        return (pre.view(-1, self.heads, self.head_dim) * self.score).sum(-1)  # (E, heads)


class _GraphAttention(Processor):
    """Shared body of GAT and GATv2: multi-head attention of node i over the j with adj[i, j]
    (softmax over j), values m(z_j), then residual skip(z_i), ReLU and LayerNorm (reference).

    `layers: L` stacks L such layers per algorithm step with their own weights, as the RT authors' fork
    does (processors.py: `nb_layers` Basic_GAT / Basic_GATv2 layers): layer l >= 2 reads z = the previous
    layer's output (B, N, H) alone, with this step's edge and graph features."""

    scores: type[nn.Module] = GATScores
    factored_edges = True  # edge_in may be an EdgeInput: only linear maps of it are taken
    sparse_form = SparseForm.EXACT  # attention over the adjacency: a segment softmax over each node's entries

    def __init__(self, cfg: GATConfig, hidden: int, z_dim: int | None = None):
        super().__init__(cfg, hidden)
        if hidden % cfg.heads:
            raise RelreasonError(f"processor.heads={cfg.heads} must divide the width model.hidden={hidden}",
                                 "pick a divisor of model.hidden")
        z_dim = 2 * hidden if z_dim is None else z_dim  # z = [node_in, hidden] (first layer) or the previous output
        self.heads = cfg.heads
        self.head_dim = hidden // cfg.heads
        self.logits = self.scores(hidden, cfg.heads, z_dim)
        self.values_skip = linear(z_dim, 2 * hidden)  # m | skip
        self.norm = nn.LayerNorm(hidden) if cfg.use_ln else nn.Identity()
        # layers 2..L, each with its own weights (empty, so no parameters, in the CLRS processors' L = 1)
        self.stack = nn.ModuleList(type(self)(replace(cfg, layers=1), hidden, z_dim=hidden)
                                   for _ in range(cfg.layers - 1))

    def forward(self, node_in, edge_in, graph_in, state: State, adj, node_mask) -> State:
        out = self.update(torch.cat([node_in, state.node], dim=-1), edge_in, graph_in, adj, node_mask)  # (B, N, H)
        for layer in self.stack:
            out = layer.update(out, edge_in, graph_in, adj, node_mask)
        return State(out)

    def update(self, z: torch.Tensor, edge_in: torch.Tensor | EdgeInput, graph_in: torch.Tensor, adj: torch.Tensor,
               node_mask: torch.Tensor) -> torch.Tensor:
        """One attention layer on z (B, N, Z): the new node states (B, N, H)."""
        b, n, _ = z.shape
        h = self.hidden
        logits = self.logits(z, edge_in, graph_in)  # (B, I, J, heads)
        allowed = (adj & node_mask[:, None, :])[..., None]  # (B, I, J, 1): padded senders never attended
        coefs = torch.softmax(logits.masked_fill(~allowed, masked_fill_value(logits)), dim=2)
        values, skip = self.values_skip(z).split(h, dim=-1)  # (B, N, H) each
        out = torch.einsum("bijh,bjhf->bihf", coefs, values.view(b, n, self.heads, self.head_dim))
        out = F.relu(out.reshape(b, n, h) + skip)
        return self.norm(out)

    def forward_sparse(self, node_in, edge_in: EdgeInput, graph_in, state: State, graph: SparseGraph,
                       node_mask) -> State:
        out = self.update_sparse(torch.cat([node_in, state.node], dim=-1), edge_in, graph_in, graph)  # (B, N, H)
        for layer in self.stack:
            out = layer.update_sparse(out, edge_in, graph_in, graph)
        return State(out)

    def update_sparse(self, z: torch.Tensor, edge_in: EdgeInput, graph_in: torch.Tensor,
                      graph: SparseGraph) -> torch.Tensor:
        """`update` on the entries: node i attends over its entries (i, j). (B, N, H)."""
        b, n, _ = z.shape
        h = self.hidden
        coefs = segment_softmax(self.logits.sparse(z, edge_in, graph_in, graph), graph.row, graph.nodes)  # (E, heads)
        values, skip = self.values_skip(z).split(h, dim=-1)  # (B, N, H) each
        sent = values.reshape(b * n, self.heads, self.head_dim)[graph.col]  # (E, heads, F)
        out = segment_sum(coefs[..., None] * sent, graph.row, graph.nodes)  # (B * N, heads, F)
        return self.norm(F.relu(out.reshape(b, n, h) + skip))


@register_processor("gat", GATConfig, "Graph attention network, adjacency-masked", paper="Veličković et al. 2018",
                    recipes={"clrs": "gat", "lobster": "lobster_gat"})
class GAT(_GraphAttention):
    scores = GATScores


@register_processor("gatv2", GATConfig, "Graph attention network v2, adjacency-masked", paper="Brody et al. 2022",
                    recipes={"clrs": "gatv2"})
class GATv2(_GraphAttention):
    scores = GATv2Scores
