"""The Dual Attention Transformer (Altabaa & Lafferty, "Disentangling and Integrating Relational and
Sensory Information in Transformer Architectures", 2024) as a CLRS processor over nodes.

Dual attention concatenates two kinds of heads over the node vectors x (B, N, D):

  - sensory heads: standard softmax attention, sum_j alpha_ij W_v x_j;
  - relational heads: sum_j alpha_ij (r_ij W_r + s_j W_s), where alpha is a softmax attention of
    their own, r_ij = (<phi_q,l(x_i), phi_k,l(x_j)> / sqrt(d_p))_{l = 1..d_r} is a vector of learned
    inner-product relations (`symmetric_relations`: phi_q = phi_k, so r_ij = r_ji), and s_j is the
    sender's *symbol*, which tags where a relation comes from without carrying its features.

Facts from the authors' package (github Awni00/dual-attention: `relational_attention.py`,
`dual_attention.py`, `dual_attn_blocks.py`, `symbol_retrieval.py`, `language_models.py`), kept here:
the head width is D / (n_heads_sa + n_heads_ra) and each kind's heads are concatenated after their
own output projection, so the concat is D wide; d_r = n_relations defaults to n_heads_ra, each
relation projects to head_dim * n_heads_ra / d_r dims; relations are attended first and projected
by W_r afterwards ((sum_j alpha_ij r_ij) W_r, which never builds a (B, N, N, D) tensor); no biases
in the attention projections; one symbol retriever shared by all layers, applied to each layer's
input; blocks are pre-norm by default (`norm_first`) with a final LayerNorm, feed-forward 4 x D.
Symbols (`symbols`):
  - `symbolic_attention`: s_i = multi-head attention of x_i over a learned library (keys: learned
    template features, values: learned symbols). Depends on features only, so the processor stays
    equivariant to node permutations: the default here, where node order is arbitrary.
  - `positional`: s_i = a learned vector per node index i (needs N <= max_positions). NOT
    permutation-equivariant: it reads the node order (meaningful for arrays and strings).
  - `position_relative`: s_ij = a learned vector per offset j - i (clipped to +-max_positions);
    the relational heads then sum alpha_ij (r_ij W_r + s_ij W_s). Also NOT permutation-equivariant.

Graph tasks (our extension; the paper has no edge inputs). With `use_edges` (default), the encoded
edge features e_ij (B, N, N, H) enter every layer twice: as a per-head bias on the attention logits
of both kinds of heads (a linear map H -> heads), and as d_r extra relation dims appended to r_ij
(a linear map H -> d_r), so relational heads route edge weights as relations (these dims are as
symmetric as the edge input: `symmetric_relations` constrains only phi). `use_edges: false`
is the paper's pure form: the processor then sees no edges at all (graph structure reaches the
model only through node features and the decoders). Attention is dense over the real nodes (padded
senders are masked out); the adjacency enters only through e_ij.

CLRS integration: per algorithm step x = W [node_in, previous node state, graph_in] (one linear
map, applied per block); the returned node state is the last layer's output (carried to the next
step); there is no edge state (edge_dim 0): pointers decode from node pairs. State.graph =
W mean_i x_i over the real nodes.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from relreason.errors import RelreasonError
from relreason.models.processors.base import Processor, State, check_config, masked_fill_value, register_processor


class SymbolKind(str, enum.Enum):
    """How relational heads tag a sender (the paper's symbol assignment mechanisms)."""

    SYMBOLIC_ATTENTION = "symbolic_attention"  # retrieved from a learned library by the sender's features
    POSITIONAL = "positional"  # a learned vector per node index (reads node order)
    POSITION_RELATIVE = "position_relative"  # a learned vector per offset j - i (reads node order)


@dataclass
class DATConfig:
    """Dual Attention Transformer options; defaults follow the paper / authors' package."""

    width: int = 0  # D; 0: the network's hidden size H
    layers: int = 6  # the authors' README models use 6 layers; recipes use fewer per algorithm step
    n_heads_sa: int = 4  # sensory heads (README: 4 self-attention heads)
    n_heads_ra: int = 4  # relational heads (README: 4 relational heads)
    n_relations: int = 0  # d_r; 0: one relation per relational head (the package's default n_relations = n_heads)
    symmetric_relations: bool = False  # the package's RelationalAttention default (symmetric_rels=False)
    symbols: SymbolKind = SymbolKind.SYMBOLIC_ATTENTION  # the LM default; the only equivariant kind
    n_symbols: int = 0  # size of the symbol library; 0: D (README's LM uses n_symbols = d_model)
    symbol_heads: int = 4  # heads of symbolic attention (README: n_heads=4)
    max_positions: int = 512  # positional: most nodes; position-relative: largest offset (clipped beyond)
    use_edges: bool = True  # our extension for graphs: edge bias on logits + edge relations; false = paper
    norm_first: bool = True  # pre-norm blocks + final LayerNorm (README: norm_first=True)
    ff_factor: int = 4  # feed-forward width = 4 x D (README: dff = 4 d_model)
    dropout: float = 0.0  # README uses 0.1 for language; CLRS processors train without dropout (reference)

    def __post_init__(self) -> None:
        if not isinstance(self.symbols, SymbolKind):  # YAML / --set give strings
            try:
                self.symbols = SymbolKind(self.symbols)
            except ValueError:
                choices = ", ".join(m.value for m in SymbolKind)
                raise RelreasonError(f"processor.symbols: unknown value {self.symbols!r}",
                                     f"use one of: {choices}") from None


class SymbolicAttention(nn.Module):
    """s_i = MHA(query W x_i, keys = template features, values = symbol library): (B, N, D)."""

    def __init__(self, width: int, heads: int, n_symbols: int):
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(width, width)
        self.templates = nn.Parameter(torch.randn(n_symbols, width))  # keys (authors: normal init)
        self.library = nn.Parameter(torch.randn(n_symbols, width))  # values: the symbols

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        h, f = self.heads, d // self.heads
        q = self.query(x).view(b, n, h, f).transpose(1, 2)  # (B, h, N, f)
        k = self.templates.view(-1, h, f).transpose(0, 1)  # (h, S, f)
        v = self.library.view(-1, h, f).transpose(0, 1)  # (h, S, f)
        att = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(f), dim=-1)  # (B, h, N, S)
        return torch.matmul(att, v).transpose(1, 2).reshape(b, n, d)  # (B, N, D)


class PositionalSymbols(nn.Module):
    """s_i = a learned vector for node index i: (B, N, D)."""

    def __init__(self, width: int, max_positions: int):
        super().__init__()
        self.table = nn.Embedding(max_positions, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        if n > self.table.num_embeddings:
            raise RelreasonError(f"dat positional symbols: {n} nodes, more than processor.max_positions "
                                 f"{self.table.num_embeddings}", "raise processor.max_positions")
        return self.table(torch.arange(n, device=x.device)).expand(b, n, -1)


class PositionRelativeSymbols(nn.Module):
    """s_ij = a learned vector for the offset j - i, clipped to +-max_offset: (N, N, D)."""

    def __init__(self, width: int, max_offset: int):
        super().__init__()
        self.max_offset = max_offset
        self.table = nn.Parameter(nn.init.xavier_uniform_(torch.empty(2 * max_offset + 1, width)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        idx = torch.arange(x.shape[1], device=x.device)
        offset = (idx[None, :] - idx[:, None]).clamp(-self.max_offset, self.max_offset)  # (N, N): j - i
        return self.table[offset + self.max_offset]


def masked_softmax(logits: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis (senders j), padded senders excluded. key_mask (B, 1, 1, N)."""
    return torch.softmax(logits.masked_fill(~key_mask, masked_fill_value(logits)), dim=-1)


class DualAttention(nn.Module):
    """n_heads_sa sensory heads and n_heads_ra relational heads, concatenated: (B, N, D)."""

    def __init__(self, cfg: DATConfig, width: int, hidden: int):
        super().__init__()
        self.n_sa, self.n_ra = cfg.n_heads_sa, cfg.n_heads_ra
        self.head_dim = hd = width // (self.n_sa + self.n_ra)
        self.relative = cfg.symbols is SymbolKind.POSITION_RELATIVE
        self.use_edges = cfg.use_edges
        if self.n_sa:
            self.sa_q = nn.Linear(width, self.n_sa * hd, bias=False)
            self.sa_k = nn.Linear(width, self.n_sa * hd, bias=False)
            self.sa_v = nn.Linear(width, self.n_sa * hd, bias=False)
            self.sa_out = nn.Linear(self.n_sa * hd, self.n_sa * hd, bias=False)
        if self.n_ra:
            self.n_rel = cfg.n_relations or self.n_ra
            self.rel_dim = hd * self.n_ra // self.n_rel  # d_p, per relation
            self.ra_q = nn.Linear(width, self.n_ra * hd, bias=False)  # attention (selection) query
            self.ra_k = nn.Linear(width, self.n_ra * hd, bias=False)  # attention (selection) key
            self.rel_q = nn.Linear(width, self.n_rel * self.rel_dim, bias=False)  # phi_q
            self.rel_k = self.rel_q if cfg.symmetric_relations else nn.Linear(width, self.n_rel * self.rel_dim,
                                                                               bias=False)  # phi_k
            rel_in = 2 * self.n_rel if self.use_edges else self.n_rel  # r_ij (+ edge relations)
            self.w_r = nn.Parameter(torch.empty(self.n_ra, hd, rel_in))  # W_r per head, after attention
            nn.init.kaiming_uniform_(self.w_r, a=math.sqrt(5))  # the package's init
            self.w_s = nn.Linear(width, self.n_ra * hd, bias=False)  # W_s: symbols -> heads
            self.ra_out = nn.Linear(self.n_ra * hd, self.n_ra * hd, bias=False)
        if self.use_edges:
            self.edge_bias = nn.Linear(hidden, self.n_sa + self.n_ra, bias=False)  # e_ij -> logit bias per head
            if self.n_ra:
                self.edge_rel = nn.Linear(hidden, self.n_rel, bias=False)  # e_ij -> extra relation dims
        self.dropout = nn.Dropout(cfg.dropout)

    def heads(self, x: torch.Tensor, count: int) -> torch.Tensor:
        """(B, N, count * hd) -> (B, count, N, hd)."""
        b, n, _ = x.shape
        return x.view(b, n, count, -1).transpose(1, 2)

    def relations(self, x: torch.Tensor, edge_in: torch.Tensor) -> torch.Tensor:
        """r_ij (B, N, N, d_r [+ d_r edge dims])."""
        rq = self.heads(self.rel_q(x), self.n_rel)  # (B, d_r, N, d_p)
        rk = self.heads(self.rel_k(x), self.n_rel)  # (B, d_r, N, d_p)
        r = torch.matmul(rq, rk.transpose(-1, -2)) / math.sqrt(self.rel_dim)  # (B, d_r, N, N)
        r = r.permute(0, 2, 3, 1)  # (B, N, N, d_r)
        if self.use_edges:
            r = torch.cat([r, self.edge_rel(edge_in)], dim=-1)  # (B, N, N, 2 d_r)
        return r

    def forward(self, x: torch.Tensor, symbols: torch.Tensor, edge_in: torch.Tensor,
                key_mask: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        scale = 1.0 / math.sqrt(self.head_dim)
        bias = self.edge_bias(edge_in).permute(0, 3, 1, 2) if self.use_edges else None  # (B, heads, N, N)
        outs = []
        if self.n_sa:
            q, k, v = (self.heads(w(x), self.n_sa) for w in (self.sa_q, self.sa_k, self.sa_v))  # (B, h, N, hd)
            logits = torch.matmul(q, k.transpose(-1, -2)) * scale  # (B, h, N, N)
            if bias is not None:
                logits = logits + bias[:, :self.n_sa]
            att = self.dropout(masked_softmax(logits, key_mask))
            out = torch.matmul(att, v).transpose(1, 2).reshape(b, n, -1)  # (B, N, n_sa hd)
            outs.append(self.sa_out(out))
        if self.n_ra:
            q, k = self.heads(self.ra_q(x), self.n_ra), self.heads(self.ra_k(x), self.n_ra)  # (B, h, N, hd)
            logits = torch.matmul(q, k.transpose(-1, -2)) * scale  # (B, h, N, N)
            if bias is not None:
                logits = logits + bias[:, self.n_sa:]
            att = self.dropout(masked_softmax(logits, key_mask))
            r = self.relations(x, edge_in)  # (B, N, N, R)
            # relations attended first, projected after: (sum_j a_ij r_ij) W_r  (no (B, N, N, D) tensor)
            rel = torch.einsum("bhij,bijr->bihr", att, r)  # (B, N, h, R)
            rel = torch.einsum("bihr,hdr->bihd", rel, self.w_r)  # (B, N, h, hd)
            sv = self.w_s(symbols)  # (B, N, h hd) or, position-relative, (N, N, h hd)
            if self.relative:
                sym = torch.einsum("bhij,ijhd->bihd", att, sv.view(n, n, self.n_ra, -1))  # (B, N, h, hd)
            else:
                sym = torch.einsum("bhij,bjhd->bihd", att, sv.view(b, n, self.n_ra, -1))  # (B, N, h, hd)
            outs.append(self.ra_out((rel + sym).reshape(b, n, -1)))
        return torch.cat(outs, dim=-1)  # (B, N, D)


class DualAttentionBlock(nn.Module):
    """Dual attention + feed-forward, pre-norm (x + f(LN x)) or post-norm (LN(x + f(x)))."""

    def __init__(self, cfg: DATConfig, width: int, hidden: int):
        super().__init__()
        self.norm_first = cfg.norm_first
        self.norm1 = nn.LayerNorm(width)
        self.attention = DualAttention(cfg, width, hidden)
        self.norm2 = nn.LayerNorm(width)
        self.ffn_in = nn.Linear(width, cfg.ff_factor * width)
        self.ffn_out = nn.Linear(cfg.ff_factor * width, width)
        self.dropout = nn.Dropout(cfg.dropout)

    def ffn(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.ffn_out(F.relu(self.ffn_in(x))))

    def forward(self, x: torch.Tensor, symbols: torch.Tensor, edge_in: torch.Tensor,
                key_mask: torch.Tensor) -> torch.Tensor:
        if self.norm_first:
            x = x + self.dropout(self.attention(self.norm1(x), symbols, edge_in, key_mask))
            return x + self.ffn(self.norm2(x))
        x = self.norm1(x + self.dropout(self.attention(x, symbols, edge_in, key_mask)))
        return self.norm2(x + self.ffn(x))


@register_processor("dat", DATConfig,
                    "Dual Attention Transformer: sensory + relational heads", paper="Altabaa & Lafferty 2024",
                    recipes={"clrs": "dat"})
class DualAttentionTransformer(Processor):
    def __init__(self, cfg: DATConfig, hidden: int):
        super().__init__(cfg, hidden)
        symbols = SymbolKind(cfg.symbols)
        check_config(cfg, {"width": 0, "layers": 1, "n_heads_sa": 0, "n_heads_ra": 0, "n_relations": 0,
                           "n_symbols": 0, "symbol_heads": 1, "max_positions": 1, "ff_factor": 1}, dropout=True)
        d = cfg.width or hidden
        total = cfg.n_heads_sa + cfg.n_heads_ra
        if total == 0:
            raise RelreasonError("processor.n_heads_sa + processor.n_heads_ra must be >= 1",
                                 "the paper uses 4 sensory + 4 relational heads")
        if d % total:
            raise RelreasonError(f"processor.width {d} is not divisible by the {total} heads (sa + ra)",
                                 "the head width is width / (n_heads_sa + n_heads_ra)")
        n_rel = cfg.n_relations or cfg.n_heads_ra
        if cfg.n_heads_ra and (d // total * cfg.n_heads_ra) % n_rel:
            raise RelreasonError(f"processor.n_relations {n_rel} does not divide the relational width "
                                 f"{d // total * cfg.n_heads_ra}",
                                 "use a divisor, or 0 for one relation per relational head")
        if symbols is SymbolKind.SYMBOLIC_ATTENTION and d % cfg.symbol_heads:
            raise RelreasonError(f"processor.width {d} is not divisible by processor.symbol_heads "
                                 f"{cfg.symbol_heads}", "use a divisor of the width")
        self.node_dim = d
        self.norm_first = cfg.norm_first
        self.from_node = nn.Linear(hidden, d)  # node_in (carries the bias)
        self.from_state = nn.Linear(d, d, bias=False)  # previous node state
        self.from_graph = nn.Linear(hidden, d, bias=False)  # graph_in, tiled onto every node
        self.symbols: nn.Module | None = None  # one retriever shared by all layers (the package's default)
        if cfg.n_heads_ra:
            if symbols is SymbolKind.SYMBOLIC_ATTENTION:
                self.symbols = SymbolicAttention(d, cfg.symbol_heads, cfg.n_symbols or d)
            elif symbols is SymbolKind.POSITIONAL:
                self.symbols = PositionalSymbols(d, cfg.max_positions)
            else:
                self.symbols = PositionRelativeSymbols(d, cfg.max_positions)
        self.blocks = nn.ModuleList(DualAttentionBlock(cfg, d, hidden) for _ in range(cfg.layers))
        self.final_norm = nn.LayerNorm(d) if cfg.norm_first else None  # pre-norm stacks end with a LayerNorm
        self.readout = nn.Linear(d, d)  # graph state from the mean node state

    def forward(self, node_in, edge_in, graph_in, state: State, adj, node_mask) -> State:
        # adj is not used: attention is dense over the real nodes; with use_edges the adjacency arrives in edge_in
        x = self.from_node(node_in) + self.from_state(state.node)  # (B, N, D)
        x = x + self.from_graph(graph_in)[:, None, :]  # graph_in tiled onto every node
        key_mask = node_mask[:, None, None, :]  # (B, 1, 1, N): padded senders excluded
        for block in self.blocks:
            symbols = self.symbols(x) if self.symbols is not None else x  # relational heads only read symbols
            x = block(x, symbols, edge_in, key_mask)
        if self.final_norm is not None:
            x = self.final_norm(x)
        weights = node_mask.to(x.dtype)[:, :, None]  # (B, N, 1)
        graph = self.readout((x * weights).sum(1) / weights.sum(1).clamp(min=1.0))  # (B, D)
        return State(x, None, graph)
