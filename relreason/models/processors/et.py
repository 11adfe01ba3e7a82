"""The Edge Transformer (Bergen, O'Donnell & Bahdanau, NeurIPS 2021) as a CLRS processor.

The state is one vector per ordered node pair, e_xy (B, N, N, D). A layer updates every pair from
the pairs that form a triangle with it, "x -> l -> y":

    q_xl = Wq e_xl,  k_ly = Wk e_ly,  v_xly = (V1 e_xl) * (V2 e_ly)        (elementwise product)
    a_xy = Wo concat_heads sum_l softmax_l(q_xl . k_ly / sqrt(head_dim)) v_xly

followed by a feed-forward block. LayerNorm is placed as in the authors' code (github
bergen/EdgeTransformer, `clutrr/model.py`): each sub-block normalizes the stream, then adds its
output to the normalized stream,

    e = LN(e);  e = e + TriangularAttention(e);  e = LN(e);  e = e + W2 relu(W1 e),

which is the post-LN Transformer with the first LayerNorm moved to the front of the layer. The
attention projections have no bias (authors' code), the feed-forward block is 4 x wide, and all
weight matrices are Xavier-uniform initialized (authors' `_reset_parameters`). Layers are tied
(one layer applied `layers` times, the paper's default) or untied (`tied: false`).

Ablations of the paper (authors' `lesion_values` / `lesion_scores`):
  - `value_ablation`: v_xly = V1 e_xl (the value no longer reads e_ly; V2 does not exist);
  - `attention_ablation`: the key comes from e_xy instead of e_ly, so softmax_l(q_xl . k_xy)
    weighs the l's by the row x alone (the triangle no longer shapes the weights).

CLRS integration (our choices, not the paper's: the paper has no per-step processor):
  - Per algorithm step the pair state is composed by one linear map of
    [node_in_x, node_in_y, edge_in_xy, graph_in, previous pair state e_xy] (`carry_state`, default)
    or, with `carry_state: false`, of [..., previous node state h_x, h_y] (the pair state is then
    only read by this step's decoders). Graph features are tiled onto every pair, so graph inputs
    and hints reach the processor; the map is applied per block, never materializing the concat.
  - Node states are the diagonal, State.node = e_ii (B, N, D), so node decoders read pair (i, i);
    State.edge is the whole pair state (B, N, N, D) and pointers decode from pairs
    (`model.pointer_decoding: edge`). State.graph = W mean_{x,y real} e_xy.
  - Attention is dense over all node pairs, like the paper's; the adjacency reaches the model only
    through edge_in (the encoded `adj` / `A`). Padded nodes (node_mask False) are excluded from
    the sum over l, so a real pair (x, y) only ever reads pairs of real nodes.

Mueller, Kusuma, Bonet & Morris (NeurIPS 2024, "Towards Principled Graph Transformers") ran the ET on
CLRS-30 in their fork of the reference (github ksmdnl/clrs at 42a5de5, clrs/_src/processors.py
`ET_Processor`). Where it differs from the above, an option selects its choice (relreason/recipes/et.yaml uses them):
  - `norm`: `bergen` is the placement above; `post` is the post-LN Transformer,
        e = LN(e + TriangularAttention(e));  e = LN(e + W2 relu(W1 e)),
    and `pre_and_post` also normalizes the attention's input, the residual keeping the raw stream:
        e = LN(e + TriangularAttention(LN(e)));  e = LN(e + W2 relu(W1 e))
    (their `EdgeTransformerLayer` + `FFN` with run.py's `--norm_first_att True`: three LayerNorms a layer);
  - `carry_state: false` is their state: the pair state is composed afresh every step from the nodes'
    [node_in, previous node state] and only the diagonal (the node state) is carried;
  - `edge_projection: false`: the encoded edge features are added to the pair as they are (their
    z_xy = W [u_x, u_y] + b + edge_in_xy) instead of through a map (which needs width = hidden);
  - `graph_input: nodes`: graph features are appended to every node's input u_x (their `use_graph_fts`),
    so they reach pair (x, y) through both the x and the y block of the composer's matrix, where
    `pairs` adds one map of them to every pair (the same functions, parametrized differently);
  - `init: haiku`: every weight truncated normal (2 std), std 1/sqrt(fan_in), biases zero (Haiku's
    Linear default), the composer's blocks with the fan-in of the one matrix they form; `xavier` is
    Bergen et al.'s (Xavier-uniform layers) with PyTorch's default on the composer.
Their node readout is the diagonal, as ours; they have no graph state (ours, W mean e_xy, is then read
by nothing: with `carry_state: false` and decoders without graph history its map gets no gradient).

Cost: O(B N^3 D) time per layer. The value sum needs sum_l a_xly (V1 e_xl)_c (V2 e_ly)_c, a
three-way product with a shared channel c: any pairwise contraction of it builds the
(B, heads, N, N, N, head_dim) product, which is 2 GB at n = 64, batch 32, width 64. We never build
it whole: `TriangularProduct` computes it in chunks of rows with a reused buffer (at most
`chunk_mb` MB), as a batched (1 x N) @ (N x head_dim) matmul per pair (for n < 32, as a loop over
l of multiply-adds on cache-sized chunks, which is faster there), and its backward recomputes the
chunks instead of saving them, so training memory is O(B heads N^3) per layer (the attention
weights), not O(B N^3 D). scripts/bench_et_memory.py measures it. No part of the triangular sum is a
matrix product of useful size, so eagerly it runs at elementwise speed. By default (`compiled_kernels`)
the products are instead one broadcast expression each, compiled by torch.compile into a loop nest
that never builds the product either (`relreason.models.kernels`): 5-8x faster on CPU; the eager
kernels above remain the fallback and the reference the tests compare against.
"""

from __future__ import annotations

import enum
import functools
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

from relreason.errors import RelreasonError
from relreason.models import kernels
from relreason.models.config import coerce_enums
from relreason.models.kernels import chunk_budget, fused
from relreason.models.precision import float32_apply
from relreason.models.processors.base import Processor, State, check_config, masked_fill_value, register_processor


class Norm(str, enum.Enum):
    """Where a layer's LayerNorms sit (module docstring)."""

    BERGEN = "bergen"  # e = LN(e); e = e + attn(e); e = LN(e); e = e + ffn(e): Bergen et al.'s clutrr/model.py
    POST = "post"  # e = LN(e + attn(e)); e = LN(e + ffn(e)): Mueller et al.'s fork, norm_first_att False
    PRE_AND_POST = "pre_and_post"  # e = LN(e + attn(LN(e))); e = LN(e + ffn(e)): their run.py default


class GraphInput(str, enum.Enum):
    """How the encoded graph features g enter the pair state."""

    PAIRS = "pairs"  # one map of g added to every pair e_xy
    NODES = "nodes"  # g appended to every node's input (Mueller et al.'s use_graph_fts): an x and a y block


class Init(str, enum.Enum):
    """Initialisation of the processor's weights."""

    XAVIER = "xavier"  # Bergen et al.'s _reset_parameters on the layers; PyTorch's default on the composer
    HAIKU = "haiku"  # Haiku's Linear default everywhere (Mueller et al.'s fork): trunc. normal 1/sqrt(fan_in), bias 0


@dataclass
class ETConfig:
    """Edge Transformer options; defaults are the paper's (authors' CLUTRR `train.py`)."""

    width: int = 0  # D, the pair-state width; 0: the network's hidden size H (the paper's 200 is CLUTRR's)
    heads: int = 4  # paper / authors' train.py num_heads=4
    layers: int = 8  # paper's CLUTRR depth (num_message_rounds=8); recipes use fewer per algorithm step
    tied: bool = True  # paper default: one layer's weights shared by all layers (share_layers=True)
    ff_factor: int = 4  # feed-forward width = 4 x D (authors' ff_factor=4)
    dropout: float = 0.0  # paper uses 0.2 on CLUTRR; CLRS processors train without dropout (reference)
    value_ablation: bool = False  # paper's value ablation: v_xly = V1 e_xl only
    attention_ablation: bool = False  # paper's attention ablation: key from e_xy instead of e_ly
    carry_state: bool = True  # feed the pair state back next step (our CLRS integration; RT does the same)
    norm: Norm = Norm.BERGEN  # LayerNorm placement of the authors' code (clutrr/model.py)
    edge_projection: bool = True  # edge_in enters the pair through a map (false: added as it is; width = hidden)
    graph_input: GraphInput = GraphInput.PAIRS  # our CLRS integration: one map of g onto every pair
    init: Init = Init.XAVIER  # authors' _reset_parameters (Xavier-uniform weight matrices)
    chunk_mb: int = 128  # memory budget (MB) of one chunk of the eager triangular product; results do not depend on it
    compiled_kernels: bool = True  # triangular products as compiled fused loops (models/kernels.py): 5-8x faster

    def __post_init__(self) -> None:
        coerce_enums(self, "processor", {"norm": Norm, "graph_input": GraphInput, "init": Init})


class TriangularProduct(torch.autograd.Function):
    """out[g, i, j, c] = sum_k A[g, i, j, k] * P[g, i, k, c] * Q[g, j, k, c].

    The value sum of triangular attention (i = x, j = y, k = l). Computed in chunks of i with one
    reused buffer of (G, chunk, J, K, C); the backward recomputes the chunks (its three input
    gradients are the same product with the roles of the indices exchanged), so nothing of size
    G*I*J*K*C is ever stored.
    """

    @staticmethod
    def forward(ctx, a: torch.Tensor, p: torch.Tensor, q: torch.Tensor, budget: int, compiled: bool) -> torch.Tensor:
        ctx.save_for_backward(a, p, q)
        ctx.budget, ctx.compiled = budget, compiled
        return tri_sum(a, p, q, budget, compiled)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: torch.Tensor):
        a, p, q = ctx.saved_tensors  # (G, I, J, K), (G, I, K, C), (G, J, K, C)
        grad = grad.contiguous()  # (G, I, J, C)
        da = dp = dq = None
        if ctx.needs_input_grad[0]:
            # dA[i, j, k] = sum_c g[i, j, c] P[i, k, c] Q[j, k, c]
            da = tri_channel_sum(grad, p, q, ctx.budget, ctx.compiled)
        if ctx.needs_input_grad[1]:
            # dP[i, k, c] = sum_j A[i, j, k] g[i, j, c] Q[j, k, c]  (j summed: the same product over j)
            dp = tri_sum(a.transpose(2, 3), grad, q.transpose(1, 2), ctx.budget, ctx.compiled)
        if ctx.needs_input_grad[2]:
            # dQ[j, k, c] = sum_i A[i, j, k] g[i, j, c] P[i, k, c]
            dq = tri_sum(a.permute(0, 2, 3, 1), grad.transpose(1, 2), p.transpose(1, 2), ctx.budget, ctx.compiled)
        return da, dp, dq, None, None


def _tri_sum_expr(a: torch.Tensor, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """out[g, i, j, c] = sum_k a[g, i, j, k] p[g, i, k, c] q[g, j, k, c] as one broadcast expression (to be compiled)."""
    return (a.unsqueeze(-1) * p.unsqueeze(2) * q.unsqueeze(1)).sum(3)


def _tri_channel_sum_expr(grad: torch.Tensor, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """out[g, i, j, k] = sum_c grad[g, i, j, c] p[g, i, k, c] q[g, j, k, c] as one broadcast expression."""
    return (grad.unsqueeze(3) * p.unsqueeze(2) * q.unsqueeze(1)).sum(-1)


def _masked_softmax(s: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """softmax over the last axis of s (any layout) where `keep` (broadcast), contiguous: three passes eager
    (contiguous copy, masking in place, softmax), one compiled (`_masked_softmax_expr`)."""
    s = s.contiguous()
    return torch.softmax(s.masked_fill_(~keep, masked_fill_value(s)), dim=-1)


def _masked_softmax_expr(s: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """`_masked_softmax` with an out-of-place fill, to be compiled: where s is already contiguous (the attention
    ablation's logits) the in-place fill mutates the graph's input, and inductor (torch 2.13, dynamic shapes;
    seen at an evaluation batch of one graph) fails on it with KeyError: 'buf1', sending the whole process to
    the eager kernels (tests/models/processors/test_et.py)."""
    return torch.softmax(s.contiguous().masked_fill(~keep, masked_fill_value(s)), dim=-1)


def tri_sum(a: torch.Tensor, p: torch.Tensor, q: torch.Tensor, budget: int, compiled: bool) -> torch.Tensor:
    """out[g, i, j, c] = sum_k a[g, i, j, k] p[g, i, k, c] q[g, j, k, c]: the compiled fused loop, or the eager
    chunked kernel (`compiled` False, or compiling unavailable)."""
    eager = functools.partial(_tri_sum, budget=chunk_budget(budget))
    return fused(_tri_sum_expr, a, p, q, eager=eager) if compiled else eager(a, p, q)


def tri_channel_sum(grad: torch.Tensor, p: torch.Tensor, q: torch.Tensor, budget: int, compiled: bool) -> torch.Tensor:
    """out[g, i, j, k] = sum_c grad[g, i, j, c] p[g, i, k, c] q[g, j, k, c], compiled or eager as `tri_sum`."""
    eager = functools.partial(_tri_channel_sum, budget=chunk_budget(budget))
    return fused(_tri_channel_sum_expr, grad, p, q, eager=eager) if compiled else eager(grad, p, q)


def _rows_per_chunk(g: int, rows: int, j: int, k: int, c: int, budget: int, itemsize: int) -> int:
    """How many i-rows of a (G, rows, J, K, C) product fit in `budget` bytes (at least one)."""
    per_row = g * j * k * c * itemsize
    return max(1, min(rows, budget // max(per_row, 1)))


# Below this many summed terms (K = N for the value sum, C = head_dim for dA) the product is a loop
# over the summed axis of multiply-adds on chunks that stay in cache: one (1 x K) @ (K x C) matmul
# per node pair is dominated by per-matmul overhead there (4x slower at n = 16, equal at n = 64).
LOOP_MAX_TERMS = 32
CACHE_BYTES = 1 << 20  # working set of one chunk of the multiply-add loop: about the L2 cache


def _loop_chunk(g: int, per_g: int, budget: int) -> int:
    """How many whole g's one chunk of the multiply-add loop holds (at least one)."""
    return max(1, min(g, min(budget, CACHE_BYTES) // max(per_g, 1)))


def _tri_sum(a: torch.Tensor, p: torch.Tensor, q: torch.Tensor, budget: int) -> torch.Tensor:
    """out[g, i, j, c] = sum_k a[g, i, j, k] p[g, i, k, c] q[g, j, k, c], chunked over i (or over g)."""
    if a.shape[-1] < LOOP_MAX_TERMS:
        return _tri_sum_loop(a, p, q, budget)
    # the backward passes transposed views: contiguous (K, C) rows make the broadcast product ~2x faster
    a, p, q = a.contiguous(), p.contiguous(), q.contiguous()
    g, ni, nj, nk = a.shape
    c = p.shape[-1]
    out = p.new_empty(g, ni, nj, c)
    rows = _rows_per_chunk(g, ni, nj, nk, c, budget, p.element_size())
    buf = p.new_empty(g, rows, nj, nk, c)
    q_b = q.unsqueeze(1)  # (G, 1, J, K, C)
    for s in range(0, ni, rows):
        e = min(s + rows, ni)
        t = torch.mul(p[:, s:e].unsqueeze(2), q_b, out=buf[:, :e - s])  # (G, r, J, K, C): P[i,k,c] Q[j,k,c]
        out[:, s:e] = torch.matmul(a[:, s:e].unsqueeze(-2), t).squeeze(-2)  # (G, r, J, 1, K) @ (.., K, C)
    return out


def _tri_channel_sum(grad: torch.Tensor, p: torch.Tensor, q: torch.Tensor, budget: int) -> torch.Tensor:
    """out[g, i, j, k] = sum_c grad[g, i, j, c] p[g, i, k, c] q[g, j, k, c], chunked over i (or over g)."""
    if grad.shape[-1] < LOOP_MAX_TERMS:
        return _tri_channel_sum_loop(grad, p, q, budget)
    p, q = p.contiguous(), q.contiguous()
    g, ni, nj, c = grad.shape
    nk = p.shape[2]
    out = p.new_empty(g, ni, nj, nk)
    rows = _rows_per_chunk(g, ni, nj, nk, c, budget, p.element_size())
    buf = p.new_empty(g, rows, nj, nk, c)
    q_b = q.unsqueeze(1)  # (G, 1, J, K, C)
    for s in range(0, ni, rows):
        e = min(s + rows, ni)
        t = torch.mul(p[:, s:e].unsqueeze(2), q_b, out=buf[:, :e - s])  # (G, r, J, K, C)
        out[:, s:e] = torch.matmul(t, grad[:, s:e].unsqueeze(-1)).squeeze(-1)  # (.., K, C) @ (.., C, 1)
    return out


def _tri_sum_loop(a: torch.Tensor, p: torch.Tensor, q: torch.Tensor, budget: int) -> torch.Tensor:
    """`_tri_sum` as a loop over k of (G', I, J, C) multiply-adds, G' whole g's at a time (cache-sized)."""
    g, ni, nj, nk = a.shape
    c = p.shape[-1]
    step = _loop_chunk(g, (ni * nj * nk + 2 * ni * nj * c) * p.element_size(), budget)
    out = p.new_zeros(g, ni, nj, c)
    buf = p.new_empty(step, ni, nj, c)
    for s in range(0, g, step):
        e = min(s + step, g)
        acc, t, a_s, p_s, q_s = out[s:e], buf[:e - s], a[s:e], p[s:e], q[s:e]
        for k in range(nk):
            torch.mul(a_s[..., k, None], p_s[:, :, None, k, :], out=t)  # (G', I, J, C): A[i,j,k] P[i,k,c]
            acc.addcmul_(t, q_s[:, None, :, k, :])  # += .. Q[j,k,c]
    return out


def _tri_channel_sum_loop(grad: torch.Tensor, p: torch.Tensor, q: torch.Tensor, budget: int) -> torch.Tensor:
    """`_tri_channel_sum` as a loop over c of (G', I, J, K) multiply-adds, G' whole g's at a time."""
    g, ni, nj, c = grad.shape
    nk = p.shape[2]
    step = _loop_chunk(g, (2 * ni * nj * nk + ni * nj * c) * p.element_size(), budget)
    out = p.new_zeros(g, ni, nj, nk)
    buf = p.new_empty(step, ni, nj, nk)
    for s in range(0, g, step):
        e = min(s + step, g)
        acc, t, g_s, p_s, q_s = out[s:e], buf[:e - s], grad[s:e], p[s:e], q[s:e]
        for ch in range(c):
            torch.mul(p_s[:, :, None, :, ch], q_s[:, None, :, :, ch], out=t)  # (G', I, J, K): P[i,k,c] Q[j,k,c]
            acc.addcmul_(t, g_s[:, :, :, ch, None])  # .. g[i,j,c]
    return out


class TriangularAttention(nn.Module):
    """Multi-head triangular attention over pair states e (B, N, N, D) (see the module docstring)."""

    def __init__(self, width: int, heads: int, value_ablation: bool, attention_ablation: bool,
                 chunk_mb: int, dropout: float, compiled_kernels: bool = True):
        super().__init__()
        self.heads, self.head_dim = heads, width // heads
        self.value_ablation, self.attention_ablation = value_ablation, attention_ablation
        self.budget = chunk_mb * 2 ** 20
        self.compiled = compiled_kernels
        self.query = nn.Linear(width, width, bias=False)  # Wq, read at e_xl
        self.key = nn.Linear(width, width, bias=False)  # Wk, read at e_ly (attention ablation: at e_xy)
        self.value1 = nn.Linear(width, width, bias=False)  # V1, read at e_xl
        # V2 (read at e_ly) does not exist under the value ablation, so no parameter goes unused
        self.value2 = None if value_ablation else nn.Linear(width, width, bias=False)
        self.out = nn.Linear(width, width, bias=False)  # Wo
        self.dropout = nn.Dropout(dropout)

    def split(self, x: torch.Tensor) -> torch.Tensor:
        """(B, N, N, D) -> (B, heads, N, N, head_dim), keeping both node axes in place."""
        b, n, _, _ = x.shape
        return x.view(b, n, n, self.heads, self.head_dim).permute(0, 3, 1, 2, 4)

    def projections(self, e: torch.Tensor) -> list[torch.Tensor]:
        """[q, k, v1(, v2)] = e @ [Wq | Wk | V1 (| V2)], one matmul instead of three or four,
        each split into heads: (B, h, N, N, head_dim) views keeping both node axes in place."""
        layers = [self.query, self.key, self.value1] + ([self.value2] if self.value2 is not None else [])
        stacked = F.linear(e, torch.cat([layer.weight for layer in layers]))  # (B, N, N, 3 or 4 x D)
        return [self.split(x) for x in stacked.split(self.query.out_features, dim=-1)]

    def weights(self, q: torch.Tensor, k: torch.Tensor, node_mask: torch.Tensor) -> torch.Tensor:
        """Attention weights alpha[b, h, x, y, l] = softmax_l(q_xl . k_ly) over real l: (B, h, N, N, N) contiguous
        (l innermost: the triangular product reads alpha along l, 3x faster than from an l-major layout)."""
        q = q * (1.0 / math.sqrt(self.head_dim))  # (B, h, X, L, c): q_xl, scaled (cheaper than scaling N^3 logits)
        if self.attention_ablation:
            s = torch.matmul(k, q.transpose(-1, -2))  # (B, h, X, Y, L): k_xy . q_xl, batched over x
        else:
            # batched over l: (B, h, L, X, c) @ (B, h, L, c, Y) -> (B, h, L, X, Y), then l to the back
            s = torch.matmul(q.transpose(2, 3), k.transpose(-1, -2)).permute(0, 1, 3, 4, 2)
        keep = node_mask[:, None, None, None, :]  # (B, 1, 1, 1, L): padded l excluded
        if self.compiled and not torch.is_grad_enabled():  # evaluation: transpose, mask and softmax in one pass
            return fused(_masked_softmax_expr, s, keep, eager=_masked_softmax)
        return _masked_softmax(s, keep)

    def forward(self, e: torch.Tensor, node_mask: torch.Tensor) -> torch.Tensor:
        b, n, _, d = e.shape
        h, c = self.heads, self.head_dim
        q, k, v1, *v2 = self.projections(e)  # (B, h, X, L, c) q_xl, k_ly as (B, h, L, Y, c), V1 e_xl, V2 e_ly
        alpha = self.dropout(self.weights(q, k, node_mask))  # (B, h, X, Y, L)
        if self.value_ablation:
            o = torch.matmul(alpha, v1)  # (B, h, X, Y, c): sum_l alpha_xyl V1 e_xl, batched over x
        else:
            v2 = v2[0].transpose(2, 3)  # (B, h, Y, L, c): V2 e_ly
            args = (alpha.reshape(b * h, n, n, n), v1.reshape(b * h, n, n, c), v2.reshape(b * h, n, n, c))
            if kernels.plain():  # vmap (relreason.models.kernels.plain_autograd): the product by plain autograd
                o = _tri_sum_expr(*args).view(b, h, n, n, c)
            else:
                o = float32_apply(TriangularProduct.apply, *args, self.budget, self.compiled).view(b, h, n, n, c)
        return self.out(o.permute(0, 2, 3, 1, 4).reshape(b, n, n, d))  # concat heads, then Wo


class EdgeTransformerLayer(nn.Module):
    """Triangular attention and a feed-forward block, each with a residual, LayerNorms placed by `cfg.norm`:
    bergen  e = LN1(e); e = e + attn(e); e = LN2(e); e = e + ffn(e)  (Bergen et al.'s code);
    post    e = LN1(e + attn(e)); e = LN2(e + ffn(e));
    pre_and_post  e = LN1(e + attn(LN0(e))); e = LN2(e + ffn(e))  (Mueller et al.'s fork)."""

    def __init__(self, cfg: ETConfig, width: int):
        super().__init__()
        self.norm = cfg.norm
        self.norm1 = nn.LayerNorm(width)
        self.attention = TriangularAttention(width, cfg.heads, cfg.value_ablation, cfg.attention_ablation,
                                             cfg.chunk_mb, cfg.dropout, cfg.compiled_kernels)
        self.norm2 = nn.LayerNorm(width)
        self.ffn_in = nn.Linear(width, cfg.ff_factor * width)
        self.ffn_out = nn.Linear(cfg.ff_factor * width, width)
        self.dropout = nn.Dropout(cfg.dropout)
        # LN0: the attention's own input norm (their --norm_first_att); the residual keeps the raw stream
        self.norm0 = nn.LayerNorm(width) if cfg.norm is Norm.PRE_AND_POST else None

    def ffn(self, e: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.ffn_out(self.dropout(F.relu(self.ffn_in(e)))))

    def forward(self, e: torch.Tensor, node_mask: torch.Tensor) -> torch.Tensor:
        if self.norm is Norm.BERGEN:
            e = self.norm1(e)
            e = e + self.dropout(self.attention(e, node_mask))
            e = self.norm2(e)
            return e + self.ffn(e)
        att_in = e if self.norm0 is None else self.norm0(e)
        e = self.norm1(e + self.dropout(self.attention(att_in, node_mask)))
        return self.norm2(e + self.ffn(e))


def haiku_init_(layer: nn.Linear, fan_in: int) -> None:
    """Haiku's Linear default in place: weights truncated normal at 2 std, std 1/sqrt(fan_in); bias zero."""
    std = 1.0 / math.sqrt(fan_in)
    with torch.no_grad():
        nn.init.trunc_normal_(layer.weight, std=std, a=-2 * std, b=2 * std)
        if layer.bias is not None:
            layer.bias.zero_()


@register_processor("et", ETConfig, "Edge Transformer: triangular attention over node pairs",
                    paper="Bergen et al. 2021", recipes={"clrs": "et"},
                    model_defaults={"pointer_decoding": "edge"})  # pointers read the pair state e_ij, its own output
class EdgeTransformer(Processor):
    def __init__(self, cfg: ETConfig, hidden: int):
        super().__init__(cfg, hidden)
        check_config(cfg, {"width": 0, "heads": 1, "layers": 1, "ff_factor": 1, "chunk_mb": 1}, dropout=True)
        d = cfg.width or hidden
        if d % cfg.heads:
            raise RelreasonError(f"processor.width {d} is not divisible by processor.heads {cfg.heads}",
                                 "pick a width that is a multiple of the number of heads")
        if not cfg.edge_projection and d != hidden:
            raise RelreasonError(f"processor.edge_projection false adds the encoded edges (width {hidden}) to the "
                                 f"pair state as they are: its width must equal model.hidden, got {d}",
                                 "set processor.width to 0 (the hidden size), or edge_projection to true")
        self.node_dim = self.edge_dim = d
        self.carry_edge = cfg.carry_state
        # The per-step input map, one block per input (summed; equal to one Linear on the concat).
        self.from_sender = nn.Linear(hidden, d)  # node_in_x (carries the bias)
        self.from_receiver = nn.Linear(hidden, d, bias=False)  # node_in_y
        # edge_in_xy through a map, or (edge_projection false) added as it is
        self.from_edge = nn.Linear(hidden, d, bias=False) if cfg.edge_projection else None
        self.graph_on_nodes = cfg.graph_input is GraphInput.NODES
        if self.graph_on_nodes:  # g appended to u_x and to u_y: two blocks of the composer's matrix
            self.from_graph_sender = nn.Linear(hidden, d, bias=False)
            self.from_graph_receiver = nn.Linear(hidden, d, bias=False)
        else:
            self.from_graph = nn.Linear(hidden, d, bias=False)  # graph_in, tiled onto every pair
        if cfg.carry_state:
            self.from_state = nn.Linear(d, d, bias=False)  # previous pair state e_xy
        else:
            self.from_state_sender = nn.Linear(d, d, bias=False)  # previous node state h_x
            self.from_state_receiver = nn.Linear(d, d, bias=False)  # previous node state h_y
        count = 1 if cfg.tied else cfg.layers
        self.layers = nn.ModuleList(EdgeTransformerLayer(cfg, d) for _ in range(count))
        self.depth = cfg.layers
        self.readout = nn.Linear(d, d)  # graph state from the mean pair state
        if cfg.init is Init.HAIKU:
            composer = [m for name, m in self.named_children() if name.startswith("from_") and m is not None]
            fan_in = sum(m.in_features for m in composer)  # the one matrix the blocks form, as in their code
            for module in self.modules():
                if isinstance(module, nn.Linear):
                    haiku_init_(module, fan_in if module in composer else module.in_features)
        else:
            for layer in self.layers:  # authors' init: Xavier-uniform on every weight matrix
                for p in layer.parameters():
                    if p.dim() > 1:
                        nn.init.xavier_uniform_(p)

    def eval_workspace(self) -> int:
        """The eager triangular product's chunk buffer (at most chunk_mb) where evaluation runs the eager
        kernels (`compiled_kernels: false`, or compiling failed in this process); the compiled kernels hold none."""
        if self.cfg.compiled_kernels and not kernels.broken():
            return 0
        return self.cfg.chunk_mb * 2**20

    def compose(self, node_in: torch.Tensor, edge_in: torch.Tensor, graph_in: torch.Tensor,
                state: State) -> torch.Tensor:
        """The pair state entering the layers, e_xy (B, N, N, D)."""
        x_part = self.from_sender(node_in)  # (B, N, D)
        y_part = self.from_receiver(node_in)  # (B, N, D)
        pair = edge_in if self.from_edge is None else self.from_edge(edge_in)  # (B, N, N, D)
        if self.carry_edge:
            if state.edge is None:
                raise ValueError("the Edge Transformer carries its pair state: State.edge must not be None")
            pair = pair + self.from_state(state.edge)  # (B, N, N, D)
        else:
            x_part = x_part + self.from_state_sender(state.node)
            y_part = y_part + self.from_state_receiver(state.node)
        if self.graph_on_nodes:  # (B, D) each, the same for every node
            g = self.from_graph_sender(graph_in) + self.from_graph_receiver(graph_in)
        else:
            g = self.from_graph(graph_in)  # (B, D)
        return pair + (x_part + g[:, None, :])[:, :, None, :] + y_part[:, None, :, :]

    def forward(self, node_in, edge_in, graph_in, state: State, adj, node_mask) -> State:
        # adj is not used: attention is dense over node pairs; the adjacency arrives inside edge_in
        e = self.compose(node_in, edge_in, graph_in, state)  # (B, N, N, D)
        for i in range(self.depth):
            e = self.layers[0 if len(self.layers) == 1 else i](e, node_mask)
        node = torch.diagonal(e, dim1=1, dim2=2).transpose(1, 2)  # (B, N, D): e_ii
        pair_mask = (node_mask[:, :, None] & node_mask[:, None, :]).to(e.dtype)  # (B, N, N)
        count = pair_mask.sum((1, 2)).clamp(min=1.0)[:, None]  # (B, 1)
        graph = self.readout(torch.einsum("bxyd,bxy->bd", e, pair_mask) / count)  # (B, D)
        return State(node, e, graph)
