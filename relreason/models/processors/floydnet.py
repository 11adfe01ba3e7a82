"""FloydNet's pivotal attention (Yu, Zeng & Ye 2026, arXiv 2601.19094) as a CLRS processor.

The state is one vector per ordered node pair, e_ik (B, N, N, D), refined the way Floyd-Warshall
refines distances: pair (i, k) attends over every pivot j through the two pairs (i, j) and (j, k),

    q, k1, k2, v1, v2 = the five maps of e (no bias), split into heads of width d
    s_ikj = (q_ik . k1_ij + q_ik . k2_jk) / sqrt(2 d)          softmax over the real pivots j
    PA(e)_ik = sum_j softmax_j(s_ikj) (v1_ij + v2_jk)

(the authors' code, github ocx-lab/FloydNet at e8b1088: src/floydnet/functional.py `pivotal_attention`,
the default scale 1/sqrt(2 D) with D the head width). A block is their `PivotalAttentionBlock`
(src/floydnet/transformer.py) with its defaults, pre-norm:

    m = Wmix e^T                      (e^T_ik = e_ki; the "symmetric mix", weight starting at zero)
    e = e + Wproj PA(N1(e + m))       (Wproj starts at zero)
    e = e + s * W2 act(W1 N2(e))      (W2 starts at zero, s a learned scalar starting at 1)

with Xavier-uniform on the five maps and on W1, no biases, so every block starts as the identity.

CLRS integration (our choices: the authors' repository has no CLRS code, and their paper's CLRS section
could not be read here, only its abstract): per algorithm step the pair state is composed by one linear
map of [node_in_i, node_in_k, edge_in_ik, graph_in, previous pair state e_ik] (as the Edge
Transformer's `carry_state`, relreason.models.processors.et), `layers` blocks run on it, and the network
carries it to the next step. Node states are the diagonal e_ii, the graph state W mean e over real pairs
(their graph models read node states as row + column sums, which grow with n: see relreason/recipes/floydnet.yaml).
Padded nodes are never pivots, so a real pair only ever reads pairs of real nodes.

Cost: O(B heads N^3 d) per block, and an attention tensor of B x heads x N^3 weights. The pivot sums are
batched matrix products (over i for the (i, j) terms, over k for the (j, k) terms), computed in chunks of
rows i whose scores take at most `chunk_mb` MB, so an evaluation at n = 64 never holds the whole tensor
(scripts/bench_processors.py measures it). Training keeps each chunk's weights for the backward. Plain
PyTorch throughout (no custom autograd, no branch on tensor values), so it runs under torch.func.vmap.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from relreason.errors import RelreasonError
from relreason.models.config import coerce_enums
from relreason.models.encoders import linear
from relreason.models.kernels import chunk_budget
from relreason.models.processors.base import Processor, State, check_config, masked_fill_value, register_processor


class Activation(str, enum.Enum):
    """The feed-forward block's nonlinearity."""

    RELU = "relu"  # PivotalAttentionBlock's default activation_fn
    SILU = "silu"  # what their example models pass (example/common/model.py)


class PairNorm(str, enum.Enum):
    """The blocks' normalisation of the pair state."""

    LAYERNORM = "layernorm"  # PivotalAttentionBlock's default norm_fn
    AFFINE = "affine"  # a per-channel scale and shift only (their example ModelConfig's norm_fn default)


@dataclass
class FloydNetConfig:
    """FloydNet options; defaults are the authors' PivotalAttentionBlock's (src/floydnet/transformer.py)."""

    width: int = 0  # D, the pair-state width; 0: the network's hidden size H
    heads: int = 8  # the README's PivotalAttentionBlock(embed_dim=64, num_heads=8); no CLRS value was found
    layers: int = 1  # pivotal blocks per algorithm step (their graph models stack `depth`; CLRS value not found)
    ffn_factor: int = 4  # ffn_expansion_ratio=4
    activation: Activation = Activation.RELU  # activation_fn="relu"
    norm: PairNorm = PairNorm.LAYERNORM  # norm_fn="layernorm"
    symmetric_mix: bool = True  # enable_symmetric_mix=True: e + Wmix e^T enters the attention
    chunk_mb: int = 64  # memory budget (MB) of one chunk of pivot scores; results do not depend on it

    def __post_init__(self) -> None:
        coerce_enums(self, "processor", {"activation": Activation, "norm": PairNorm})


class Affine(nn.Module):
    """x * w + b per channel (w = 1, b = 0 at first): their `norm_fn: affine`."""

    def __init__(self, width: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.bias = nn.Parameter(torch.zeros(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.weight + self.bias


def pivotal_attention(q: torch.Tensor, k1: torch.Tensor, k2: torch.Tensor, v1: torch.Tensor, v2: torch.Tensor,
                      pivots: torch.Tensor, budget: int) -> torch.Tensor:
    """out[b, h, i, k] = sum_j softmax_j(q_ik . (k1_ij + k2_jk) / sqrt(2 d)) (v1_ij + v2_jk) over j with pivots[b, j].

    q, k1, k2, v1, v2: (B, heads, N, N, d) indexed [.., row, column, :]; pivots (B, N) bool. Rows i are taken in
    chunks whose (B, heads, rows, N, N) scores fit in `budget` bytes (at least one row). Returns (B, heads, N, N, d).
    """
    b, h, n, _, d = q.shape
    q = q * (1.0 / math.sqrt(2.0 * d))
    keep = pivots[:, None, None, None, :]  # (B, 1, 1, 1, J)
    k2_t = k2.permute(0, 1, 3, 4, 2)  # (B, h, K, d, J): k2_jk with k leading
    v2_t = v2.transpose(2, 3)  # (B, h, K, J, d): v2_jk with k leading
    per_row = b * h * n * n * q.element_size()
    rows = max(1, min(n, budget // max(per_row, 1)))
    out = []
    for s in range(0, n, rows):
        e = min(s + rows, n)
        qc = q[:, :, s:e]  # (B, h, c, K, d): q_ik
        scores = qc @ k1[:, :, s:e].transpose(-1, -2)  # (B, h, c, K, J): q_ik . k1_ij, batched over i
        scores = scores + (qc.transpose(2, 3) @ k2_t).transpose(2, 3)  # + q_ik . k2_jk, batched over k
        a = torch.softmax(scores.masked_fill(~keep, masked_fill_value(scores)), dim=-1)
        y = a @ v1[:, :, s:e]  # (B, h, c, K, d): sum_j a_ikj v1_ij
        y = y + (a.transpose(2, 3) @ v2_t).transpose(2, 3)  # + sum_j a_ikj v2_jk
        out.append(y)
    return torch.cat(out, dim=2)


class PivotalBlock(nn.Module):
    """One pivotal-attention block on the pair state (module docstring)."""

    def __init__(self, cfg: FloydNetConfig, width: int):
        super().__init__()
        self.heads, self.head_dim = cfg.heads, width // cfg.heads
        self.budget = cfg.chunk_mb * 2**20
        norm = nn.LayerNorm if cfg.norm is PairNorm.LAYERNORM else Affine
        self.mix = nn.Linear(width, width, bias=False) if cfg.symmetric_mix else None  # Wmix
        self.qkv = nn.Linear(width, 5 * width, bias=False)  # q | k1 | k2 | v1 | v2
        self.proj = nn.Linear(width, width, bias=False)  # Wproj
        self.norm1, self.norm2 = norm(width), norm(width)
        self.ffn_in = nn.Linear(width, cfg.ffn_factor * width, bias=False)  # W1
        self.ffn_out = nn.Linear(cfg.ffn_factor * width, width, bias=False)  # W2
        self.act = F.relu if cfg.activation is Activation.RELU else F.silu
        self.ffn_scale = nn.Parameter(torch.tensor(1.0))  # s
        # the authors' _reset_parameters: Xavier on the attention maps and W1, zeros on Wmix, Wproj, W2
        nn.init.xavier_uniform_(self.qkv.weight)
        nn.init.xavier_uniform_(self.ffn_in.weight)
        nn.init.zeros_(self.proj.weight)
        nn.init.zeros_(self.ffn_out.weight)
        if self.mix is not None:
            nn.init.zeros_(self.mix.weight)

    def attention(self, x: torch.Tensor, pivots: torch.Tensor) -> torch.Tensor:
        """Wproj PA(x): (B, N, N, D)."""
        b, n, _, width = x.shape
        parts = self.qkv(x).view(b, n, n, 5, self.heads, self.head_dim).permute(3, 0, 4, 1, 2, 5)  # 5 x (B, h, N, N, d)
        y = pivotal_attention(*parts, pivots=pivots, budget=chunk_budget(self.budget))  # (B, h, N, N, d)
        return self.proj(y.permute(0, 2, 3, 1, 4).reshape(b, n, n, width))

    def forward(self, e: torch.Tensor, pivots: torch.Tensor) -> torch.Tensor:
        mixed = e if self.mix is None else e + self.mix(e.transpose(1, 2))
        e = e + self.attention(self.norm1(mixed), pivots)
        return e + self.ffn_out(self.act(self.ffn_in(self.norm2(e)))) * self.ffn_scale


@register_processor("floydnet", FloydNetConfig, "FloydNet: pivotal attention refining an all-pairs state",
                    paper="Yu et al. 2026", recipes={"clrs": "floydnet"},
                    model_defaults={"pointer_decoding": "edge"})  # pointers read the pair state e_ij, its own output
class FloydNet(Processor):
    """See the module docstring. State.node = e_ii, State.edge = e (carried), State.graph = W mean e."""

    carry_edge = True  # the pair state is the processor's memory

    def __init__(self, cfg: FloydNetConfig, hidden: int):
        super().__init__(cfg, hidden)
        check_config(cfg, {"width": 0, "heads": 1, "layers": 1, "ffn_factor": 1, "chunk_mb": 1})
        d = cfg.width or hidden
        if d % cfg.heads:
            raise RelreasonError(f"processor.width {d} is not divisible by processor.heads {cfg.heads}",
                                 "pick a width that is a multiple of the number of heads")
        self.node_dim = self.edge_dim = d
        # The per-step composer, one block per input (summed: one linear map of their concatenation).
        self.from_sender = linear(hidden, d)  # node_in_i (carries the bias)
        self.from_receiver = linear(hidden, d, bias=False)  # node_in_k
        self.from_edge = linear(hidden, d, bias=False)  # edge_in_ik
        self.from_graph = linear(hidden, d, bias=False)  # graph_in, on every pair
        self.from_state = linear(d, d, bias=False)  # previous pair state e_ik
        self.blocks = nn.ModuleList(PivotalBlock(cfg, d) for _ in range(cfg.layers))
        self.readout = linear(d, d)  # graph state from the mean pair state

    def forward(self, node_in, edge_in, graph_in, state: State, adj, node_mask) -> State:
        # adj is not read: pivots range over all real nodes; the adjacency arrives inside edge_in
        if state.edge is None:
            raise ValueError("FloydNet carries its pair state: State.edge must not be None")
        sender = self.from_sender(node_in) + self.from_graph(graph_in)[:, None, :]  # (B, N, D)
        e = (self.from_edge(edge_in) + self.from_state(state.edge)
             + sender[:, :, None, :] + self.from_receiver(node_in)[:, None, :, :])  # (B, N, N, D)
        for block in self.blocks:
            e = block(e, node_mask)
        node = torch.diagonal(e, dim1=1, dim2=2).transpose(1, 2)  # (B, N, D): e_ii
        pairs = (node_mask[:, :, None] & node_mask[:, None, :]).to(e.dtype)  # (B, N, N)
        count = pairs.sum((1, 2)).clamp(min=1.0)[:, None]  # (B, 1)
        graph = self.readout(torch.einsum("bikd,bik->bd", e, pairs) / count)  # (B, D)
        return State(node, e, graph)
