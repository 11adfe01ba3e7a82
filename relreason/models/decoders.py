"""Decoders: raw predictions per output/hint feature, dispatched on (location, type), and their post-processing.

Decoders read h = [node features, previous hidden, new hidden] (B, N, H + 2D), the edge features
e = [encoded edge features, new edge state] (B, N, N, H + E) and the graph features g (B, H), as in
the reference (google-deepmind/clrs `decoders.py`):
- node scalar / mask / mask_one: linear to 1 (mask_one: softmax over nodes); categorical: linear to C;
- node pointer: logit[i, j] = w . max(W1 h_i, W2 h_j + W3 e_ji), softmax over j; with
  `pointer_decoding: edge`, logit[i, j] = linear([e_ij, previous edge state, new edge state]);
- permutation pointer: the pointer logits through log-Sinkhorn (10 steps, temperature 0.1, diagonal
  masked, Gumbel noise in training);
- edge features: d0(h_i) + d1(h_j) + d2(e_ij); edge pointers: w . max(that, d3(h_k)) over k;
- graph features: d0(max_i h_i) + d1(g); graph pointers add d2(h_k) per node k.
Logits of padded nodes are masked (a padded node is never pointed to nor chosen), so predictions of
real nodes do not depend on padding.

A processor declares in `decoder_inputs` (a `DecoderInputs`) what its decoders read beyond that:
the Relational Transformer authors' fork (github CameronDiao/relational-transformer, `nets.py`
`_one_step_pred`) hands every edge-reading decoder e = [encoded edge features, previous edge state,
new edge state] and, when the processor returns a graph state (its `core` node), the graph
decoders g = [encoded graph features, previous graph state, new graph state]; a processor without
edge features (the RT paper's standard transformer) has no e at all: its node pointers are
w . max(W1 h_i, W2 h_j) and its edge features d0(h_i) + d1(h_j).

`model.pointer_candidates: graph` masks node pointers (not permutation pointers) to the adjacency the
processor reads: a node then points to a neighbour or itself. The sparse form (relreason.models.sparse:
a `DecodeContext` with `sparse` set) computes a node pointer's logits only for those candidates, one
per entry (E,), e_ji read at the reverse entry; every other feature it supports reads only node and
graph inputs and decodes as dense.

Post-processing turns raw predictions into values: `feedback` (the hint fed to the next step, soft
or hard) and `harden` (the storage convention, for metrics).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from relreason.data.specs import Feature, Location, Type
from relreason.models.config import PointerDecoding
from relreason.models.encoders import PTR, EdgeInput, check_supported, linear, one_hot
from relreason.models.kernels import chunk_budget, plain
from relreason.models.noise import Noise
from relreason.models.precision import float32_apply
from relreason.models.sparse import SparseGraph

SINKHORN_STEPS = 10  # decoder's log-Sinkhorn iterations (reference decoders.py)
SINKHORN_TEMPERATURE = 0.1  # reference decoders.py / postprocess
FEEDBACK_SINKHORN_STEPS = 25  # extra iterations when a permutation hint is fed back (reference nets.py)
PREDICT_SINKHORN_STEPS = 50  # extra iterations before the argmax at prediction time (reference baselines.py)
NEG = -1e9  # logit of a masked choice: finite, so masked rows never produce NaNs
DIAGONAL_PENALTY = 1e6  # reference: zero_diagonal subtracts 1e6 after the temperature


def node_mask_like(node_mask: torch.Tensor, x: torch.Tensor, trailing: int) -> torch.Tensor:
    """node_mask (B, N) reshaped to broadcast against x whose node axis is followed by `trailing` axes."""
    B, n = node_mask.shape
    return node_mask.view(B, *([1] * (x.dim() - 2 - trailing)), n, *([1] * trailing))


def log_sinkhorn(x: torch.Tensor, steps: int, temperature: float, node_mask: torch.Tensor,
                 noise: torch.Tensor | None = None) -> torch.Tensor:
    """Log-space Sinkhorn of (B, ..., N, N) logits: log of a doubly stochastic matrix over the real nodes.

    The diagonal of real nodes is pushed to -1e6 (a permutation pointer never points to itself);
    padded nodes are fixed to point to themselves, so they take no mass from real nodes."""
    if noise is not None:
        x = x + noise
    x = x / temperature
    n = x.shape[-1]
    eye = torch.eye(n, dtype=torch.bool, device=x.device)
    row = node_mask_like(node_mask, x, 1)  # (B, .., N, 1)
    col = node_mask_like(node_mask, x, 0)  # (B, .., 1, N)
    real = row & col
    x = torch.where(real & eye, x - DIAGONAL_PENALTY, x)
    x = torch.where(real, x, torch.where(eye & ~row, 0.0, NEG))  # padded block: identity
    for _ in range(steps):
        x = torch.log_softmax(x, dim=-1)
        x = torch.log_softmax(x, dim=-2)
    return x


class _PointerLogits(torch.autograd.Function):
    """logit[b, i, j] = w . max(p1[b, i], q[b, i, j]) + bw with q = p2[b, j] + raw_t[b, i, j] @ wc (+ extra[b, i, j]):
    the node-pointer decoder's (B, N, N, H) core, as w . p1 + w . relu(q - p1).

    The same value and gradient as autograd over broadcast adds, torch.maximum and nn.Linear (ties send
    the gradient to p1), with one (B, N, N, H) buffer per direction and no bool masks, which dominate
    the cost on CPU.

    Args: p1, p2 (B, N, H); raw_t (B, N, N, F); wc (F, H); extra (B, N, N, H) or None; w (H,); bw (1,).
    """

    @staticmethod
    def forward(ctx, p1: torch.Tensor, p2: torch.Tensor, raw_t: torch.Tensor, wc: torch.Tensor,
                extra: torch.Tensor | None, w: torch.Tensor, bw: torch.Tensor) -> torch.Tensor:
        B, n, _, F = raw_t.shape
        H = p1.shape[-1]
        d = p2.unsqueeze(1) - p1.unsqueeze(2)  # (B, N, N, H): [i, j] = p2_j - p1_i
        if extra is not None:
            d.add_(extra)
        d2 = d.view(-1, H)
        raw2 = raw_t.reshape(B * n * n, F)
        if F:
            d2.addmm_(raw2, wc)
        d2.relu_()
        logits = (d2 @ w).view(B, n, n) + (p1 @ w + bw).unsqueeze(-1)
        ctx.save_for_backward(d2, p1, raw2, wc, w)
        ctx.raw_shape = raw_t.shape
        return logits

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g: torch.Tensor):
        r2, p1, raw2, wc, w = ctx.saved_tensors
        B, n, _ = g.shape
        H = w.shape[0]
        g_flat = g.reshape(-1)
        g_row = g.sum(-1)  # (B, N)
        gd = torch.outer(g_flat, w)  # (R, H)
        gd = torch.ops.aten.threshold_backward.grad_input(gd, r2, 0.0, grad_input=gd)  # in place
        gd4 = gd.view(B, n, n, H)
        need = ctx.needs_input_grad
        grad_p1 = w * g_row.unsqueeze(-1) - gd4.sum(2) if need[0] else None
        grad_p2 = gd4.sum(1) if need[1] else None
        grad_raw = (gd @ wc.t()).view(ctx.raw_shape) if need[2] and raw2.shape[1] else None
        grad_wc = raw2.t() @ gd if need[3] else None
        grad_extra = gd4 if need[4] else None
        grad_w = r2.t() @ g_flat + p1.reshape(-1, H).t() @ g_row.reshape(-1) if need[5] else None
        grad_bw = g.sum().reshape(1) if need[6] else None
        return grad_p1, grad_p2, grad_raw, grad_wc, grad_extra, grad_w, grad_bw


def pointer_logits(p1: torch.Tensor, p2: torch.Tensor, edge: EdgeInput | None, w3: nn.Linear | None,
                   out: nn.Linear, edge_states: Sequence[torch.Tensor] = ()) -> torch.Tensor:
    """(B, N, N) logits: [i, j] = out(max(p1_i, p2_j + w3([e_ji, s_ji for s in edge_states]))) for node
    features p1, p2 (B, N, H), factored encoded edges (None: not read) and edge states (B, N, N, E) each;
    with neither edges nor states (w3 None), out(max(p1_i, p2_j))."""
    B, n, H = p1.shape
    raw_t, wc, bias, extra = p1.new_zeros(B, n, n, 0), p1.new_zeros(0, H), None, None
    if w3 is not None:
        col = 0
        bias = w3.bias
        if edge is not None:
            col = edge.width
            w3a = w3.weight[:, :col]
            wc = edge.weight @ w3a.t()  # (F, H): w3 folded into the encoders' map
            bias = bias + edge.bias @ w3a.t()
            raw_t = edge.raw.transpose(1, 2)
        for state in edge_states:
            part = torch.matmul(state, w3.weight[:, col:col + state.shape[-1]].t())
            extra = part if extra is None else extra + part
            col += state.shape[-1]
        if extra is not None:
            extra = extra.transpose(1, 2)  # [i, j] from the pair (j, i)
    p2 = p2 if bias is None else p2 + bias
    if plain():  # vmap (relreason.models.kernels.plain_autograd): `_PointerLogits` by plain autograd
        d = p2.unsqueeze(1) - p1.unsqueeze(2) + raw_t @ wc  # (B, N, N, H)
        if extra is not None:
            d = d + extra
        w = out.weight[0]
        return d.relu() @ w + (p1 @ w + out.bias).unsqueeze(-1)  # (B, N, N)
    return float32_apply(_PointerLogits.apply, p1, p2, raw_t, wc, extra, out.weight[0], out.bias)


EDGE_POINTER_CHUNK = 1 << 24  # elements of the (B, c, N, N, H) slab evaluated at a time without autograd


def edge_pointer_logits(pred: torch.Tensor, target: torch.Tensor, out: nn.Linear) -> torch.Tensor:
    """logit[b, i, j, k] = out(max(pred[b, i, j], target[b, k])) for pred (B, N, N, H), target (B, N, H).

    The (B, N, N, N, H) intermediate is 4 GB at batch 32, n 64, H 128: without autograd (evaluation)
    it is built a slab of rows i at a time, EDGE_POINTER_CHUNK elements at most (one row within
    relreason.models.kernels.smallest_chunks). Written as w . target + w . relu(pred - target)."""
    w = out.weight[0]
    base = (target @ w + out.bias)[:, None, None, :]  # (B, 1, 1, N)
    B, n, _, H = pred.shape
    if torch.is_grad_enabled():
        return torch.relu(pred[:, :, :, None, :] - target[:, None, None, :, :]) @ w + base
    step = min(n, max(1, chunk_budget(EDGE_POINTER_CHUNK) // max(1, B * n * n * H)))
    # one buffer for every slab, the logits written into one tensor: a slab allocated and freed per chunk
    # between the logits' parts fragments the heap (evaluations of Floyd-Warshall grew 2-5x their tensors)
    flat = pred.new_empty(B * step * n * n * H)
    logits = pred.new_empty(B, n, n, n)
    for i in range(0, n, step):
        rows = min(step, n - i)
        slab = flat[:B * rows * n * n * H].view(B, rows, n, n, H)  # contiguous, as a fresh difference would be
        torch.sub(pred[:, i:i + rows, :, None, :], target[:, None, None, :, :], out=slab)
        logits[:, i:i + rows] = slab.relu_() @ w  # (B, rows, N, N)
    return logits + base


def uniform(shape, device: torch.device, generator: torch.Generator | Noise | None) -> torch.Tensor:
    """U[0, 1) draws on `device` from an explicit generator (which may live on another device, e.g. CPU),
    or from a `Noise` (drawn for the global batch; relreason.models.noise)."""
    if isinstance(generator, Noise):
        return generator.uniform(shape, device)
    where = generator.device if generator is not None else device
    return torch.rand(shape, generator=generator, device=where).to(device)


def gumbel(shape: torch.Size, device: torch.device, generator: torch.Generator | None) -> torch.Tensor:
    u = uniform(shape, device, generator)
    return -torch.log(-torch.log(u + 1e-12) + 1e-12)


@dataclass(frozen=True)
class DecoderInputs:
    """What a processor's decoders read besides h (a processor's `decoder_inputs`; module docstring).
    The defaults are the CLRS reference's decoders."""

    edge_features: bool = True  # the encoded edge features e_ij; False: neither processor nor decoders read any
    edge_history: bool = False  # edge-reading decoders get the previous edge state beside the new one (RT fork)
    graph_history: bool = False  # graph decoders get the previous and new graph states beside g (RT fork, core)


@dataclass
class DecodeContext:
    """Everything a decoder reads at one step."""

    h: torch.Tensor  # (B, N, H + 2D): node features, previous hidden, new hidden
    edge: EdgeInput | None  # factored encoded edge features (B, N, N, H); None without edge features
    edge_state: torch.Tensor | None  # (B, N, N, E) new edge state, or None
    prev_edge: torch.Tensor | None  # (B, N, N, E) previous (carried) edge state, or None
    graph: torch.Tensor  # (B, H) encoded graph features
    adj: torch.Tensor  # (B, N, N) bool
    node_mask: torch.Tensor  # (B, N) bool
    prev_graph: torch.Tensor | None = None  # (B, D) previous graph state (read with graph_history)
    graph_state: torch.Tensor | None = None  # (B, D) new graph state (read with graph_history)
    # the sparse form: edge, edge_state and prev_edge are per entry of this graph ((E, ...)) and adj is None
    sparse: SparseGraph | None = None

    def select(self, rows: torch.Tensor) -> "DecodeContext":
        """The samples `rows` only."""
        pick = lambda x: None if x is None else x.index_select(0, rows)  # noqa: E731
        edge = None if self.edge is None else EdgeInput(pick(self.edge.raw), self.edge.weight, self.edge.bias)
        return DecodeContext(pick(self.h), edge, pick(self.edge_state), pick(self.prev_edge), pick(self.graph),
                             pick(self.adj), pick(self.node_mask), pick(self.prev_graph), pick(self.graph_state))


class FeatureDecoder(nn.Module):
    """The decoder of one feature (parameters named as the reference's d0, d1, ...)."""

    def __init__(self, f: Feature, hidden: int, node_dim: int, edge_dim: int, pointer_decoding: PointerDecoding,
                 carry_edge: bool, inf_bias: bool = False, inf_bias_edge: bool = False,
                 inputs: DecoderInputs = DecoderInputs(), restrict_pointers: bool = False):
        super().__init__()
        check_supported(f)
        self.feature = f
        self.hidden, self.edge_dim = hidden, edge_dim
        self.inf_bias, self.inf_bias_edge = inf_bias, inf_bias_edge
        # model.pointer_candidates: graph (module docstring)
        self.restrict_pointers = restrict_pointers and f.location is Location.NODE and f.type is Type.POINTER
        self.inputs = inputs
        hn = hidden + 2 * node_dim  # width of h
        k = f.num_classes if f.type is Type.CATEGORICAL else 1
        self.from_edges = f.location is Location.NODE and f.type in PTR and pointer_decoding is PointerDecoding.EDGE
        if self.from_edges and edge_dim == 0:
            raise ValueError("pointer_decoding 'edge' needs a processor with an edge state")
        # Pointers decoded from edges read the previous edge state of a processor that carries it
        # (the RT authors' `ptr_from_edges`); with edge_history every edge-reading decoder does.
        self.read_prev_edge = edge_dim > 0 and (inputs.edge_history or (self.from_edges and carry_edge))
        # width of e: [encoded edges (if read), previous edge state (if read), new edge state]
        he = (hidden if inputs.edge_features else 0) + edge_dim * (1 + self.read_prev_edge)
        self.edge_width = he
        hg = hidden + (2 * node_dim if inputs.graph_history else 0)  # width of g
        # Without any edge input, the edge map's slot holds a parameter-free placeholder, so the
        # other maps keep the reference's indices (d3 is still the pointer's output map).
        e_map = (lambda out: linear(he, out)) if he else (lambda out: nn.Identity())  # noqa: E731
        if self.from_edges:
            self.d = nn.ModuleList([linear(he, 1)])
        elif f.location is Location.NODE:
            if f.type in PTR:
                self.d = nn.ModuleList([linear(hn, hidden), linear(hn, hidden), e_map(hidden), linear(hidden, 1)])
            else:
                self.d = nn.ModuleList([linear(hn, k)])
        elif f.location is Location.EDGE:
            if f.type is Type.POINTER:
                self.d = nn.ModuleList([linear(hn, hidden), linear(hn, hidden), e_map(hidden),
                                        linear(hn, hidden), linear(hidden, 1)])
            else:
                self.d = nn.ModuleList([linear(hn, k), linear(hn, k), e_map(k)])
        else:
            self.d = nn.ModuleList([linear(hn, k), linear(hg, k)] + ([linear(hn, 1)] if f.type is Type.POINTER else []))

    def _edge_states(self, ctx: DecodeContext) -> list[torch.Tensor]:
        """The edge states this decoder reads, in the order of its weight columns."""
        if not self.edge_dim:
            return []
        return ([ctx.prev_edge] if self.read_prev_edge else []) + [ctx.edge_state]

    def _edge_linear(self, layer: nn.Linear, ctx: DecodeContext) -> torch.Tensor:
        """layer(e_ij) as (B, N, N, K), e = [encoded edges, edge states] as this decoder reads them."""
        out, col = None, 0
        if self.inputs.edge_features:
            out, col = ctx.edge.project(layer.weight[:, :self.hidden], layer.bias), self.hidden
        for state in self._edge_states(ctx):
            part = torch.matmul(state, layer.weight[:, col:col + state.shape[-1]].t())
            out = part + layer.bias if out is None else out + part
            col += state.shape[-1]
        return out

    def forward(self, ctx: DecodeContext, train: bool, generator: torch.Generator | None) -> torch.Tensor:
        f, d = self.feature, self.d
        if f.location is Location.NODE:
            if f.type not in PTR:
                out = d[0](ctx.h)  # (B, N, k)
                if f.type is Type.CATEGORICAL:
                    return out
                out = out.squeeze(-1)
                return out.masked_fill(~ctx.node_mask, NEG) if f.type is Type.MASK_ONE else out
            logits = self._node_pointer(ctx)  # (B, N, N)
            if f.type is Type.PERMUTATION_POINTER:
                noise = gumbel(logits.shape, logits.device, generator) if train else None
                logits = log_sinkhorn(logits, SINKHORN_STEPS, SINKHORN_TEMPERATURE, ctx.node_mask, noise)
            return logits
        if f.location is Location.EDGE:
            pred = d[0](ctx.h)[:, :, None] + d[1](ctx.h)[:, None, :]  # (B, N, N, k)
            if self.edge_width:
                pred = pred + self._edge_linear(d[2], ctx)
            if f.type is Type.POINTER:
                logits = edge_pointer_logits(pred, d[3](ctx.h), d[4])  # (B, N, N, N)
                return logits.masked_fill(~ctx.node_mask[:, None, None, :], NEG)
            if f.type is Type.CATEGORICAL:
                return pred
            pred = pred.squeeze(-1)
            if self.inf_bias_edge and f.type is Type.MASK:
                pred = _inf_bias(pred, ctx.adj)
            return pred
        # graph
        gr = ctx.h.masked_fill(~ctx.node_mask[..., None], NEG).amax(1)  # (B, H + 2D) over real nodes
        g = ctx.graph
        if self.inputs.graph_history:
            g = torch.cat([g, ctx.prev_graph, ctx.graph_state], -1)  # (B, H + 2D)
        pred = d[0](gr) + d[1](g)  # (B, k)
        if f.type is Type.POINTER:
            logits = pred + d[2](ctx.h).squeeze(-1)  # (B, N)
            return logits.masked_fill(~ctx.node_mask, NEG)
        return pred if f.type is Type.CATEGORICAL else pred.squeeze(-1)

    def _node_pointer(self, ctx: DecodeContext) -> torch.Tensor:
        """(B, N, N) logits: row i is node i's distribution over the node j it points to
        (the sparse form: (E,) logits of the entries (i, j))."""
        if ctx.sparse is not None:
            return self._node_pointer_sparse(ctx)
        if self.from_edges:
            logits = self._edge_linear(self.d[0], ctx).squeeze(-1)  # linear(e_ij)
        else:
            d = self.d
            # (B, N, N): w . max(W1 h_i, W2 h_j + W3 e_ji)
            w12 = torch.cat([d[0].weight, d[1].weight])  # both read h: one matmul
            p1, p2 = F.linear(ctx.h, w12, torch.cat([d[0].bias, d[1].bias])).split(self.hidden, -1)
            logits = pointer_logits(p1, p2, ctx.edge if self.inputs.edge_features else None,
                                    d[2] if self.edge_width else None, d[3], self._edge_states(ctx))
        if self.inf_bias:
            logits = _inf_bias(logits, ctx.adj)
        if self.restrict_pointers:
            logits = logits.masked_fill(~ctx.adj, NEG)
        return logits.masked_fill(~ctx.node_mask[:, None, :], NEG)

    def _node_pointer_sparse(self, ctx: DecodeContext) -> torch.Tensor:
        """(E,) logits of the entries (i, j): w . max(W1 h_i, W2 h_j + W3 e_ji), each node's candidates."""
        g, d = ctx.sparse, self.d
        w12 = torch.cat([d[0].weight, d[1].weight])
        p1, p2 = F.linear(ctx.h, w12, torch.cat([d[0].bias, d[1].bias])).split(self.hidden, -1)  # (B, N, H) each
        p1, p2 = p1.reshape(g.nodes, -1), p2.reshape(g.nodes, -1)
        q = p2[g.col]  # (E, H)
        if self.edge_width:  # W3 e_ji: the reverse entry's encoded edges and edge states
            w3, col = d[2], 0
            if self.inputs.edge_features:
                col = ctx.edge.width
                q = q + ctx.edge.project(w3.weight[:, :col])[g.reverse]
            for state in self._edge_states(ctx):
                q = q + torch.matmul(state[g.reverse], w3.weight[:, col:col + state.shape[-1]].t())
                col += state.shape[-1]
            q = q + w3.bias
        return d[3](torch.maximum(p1[g.row], q)).squeeze(-1)


def _inf_bias(preds: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
    """Reference `inf_bias` (masked PGN): choices outside the adjacency go below every allowed logit."""
    floor = preds.flatten(1).amin(1).view(-1, *([1] * (preds.dim() - 1)))
    return torch.where(adj, preds, torch.clamp(floor - 1.0, max=-1.0))


class Decoders(nn.Module):
    """One FeatureDecoder per feature; `forward` returns raw predictions by name."""

    def __init__(self, features: list[Feature], hidden: int, node_dim: int, edge_dim: int,
                 pointer_decoding: PointerDecoding, carry_edge: bool, inf_bias: bool = False,
                 inf_bias_edge: bool = False, inputs: DecoderInputs = DecoderInputs(),
                 restrict_pointers: bool = False):
        super().__init__()
        self.decoders = nn.ModuleDict({f.name: FeatureDecoder(f, hidden, node_dim, edge_dim, pointer_decoding,
                                                              carry_edge, inf_bias, inf_bias_edge, inputs,
                                                              restrict_pointers)
                                       for f in features})

    def forward(self, ctx: DecodeContext, train: bool, generator: torch.Generator | None = None
                ) -> dict[str, torch.Tensor]:
        return {name: dec(ctx, train, generator) for name, dec in self.decoders.items()}


def _argmax_one_hot(x: torch.Tensor) -> torch.Tensor:
    return one_hot(x.argmax(-1), x.shape[-1])


def feedback(f: Feature, raw: torch.Tensor, hard: bool, node_mask: torch.Tensor,
             scalar_grad: bool = False) -> torch.Tensor:
    """A predicted hint as the next step's input value (the encoders' model form).

    Soft: sigmoid / softmax (gradients flow); hard: threshold / argmax, scalars detached (CLRS 2.0
    `postprocess(hard=True)`) unless `scalar_grad` (CLRS v1, the RT authors' fork: scalars pass as they are)."""
    t = f.type
    if t is Type.SCALAR:
        return raw.detach() if hard and not scalar_grad else raw
    if t is Type.MASK:
        return (raw > 0).float() if hard else torch.sigmoid(raw)
    if t in (Type.MASK_ONE, Type.CATEGORICAL, Type.POINTER):
        return _argmax_one_hot(raw) if hard else torch.softmax(raw, -1)
    # permutation pointer: raw is already log-Sinkhorn; sharpen further as the reference does
    p = torch.exp(log_sinkhorn(raw, FEEDBACK_SINKHORN_STEPS, SINKHORN_TEMPERATURE, node_mask))
    return _argmax_one_hot(p) if hard else p


def harden(f: Feature, raw: torch.Tensor, node_mask: torch.Tensor) -> torch.Tensor:
    """A raw prediction in the storage convention: pointer indices (int64), one-hot mask_one and
    categoricals, 0/1 masks, scalars as they are. Permutation pointers give their (cyclic) pointer
    indices; `Net.predict` fuses them with their `_mask`."""
    t = f.type
    if t is Type.SCALAR:
        return raw.detach()
    if t is Type.MASK:
        return (raw > 0).float()
    if t in (Type.MASK_ONE, Type.CATEGORICAL):
        return _argmax_one_hot(raw)
    if t is Type.POINTER:
        return raw.argmax(-1)
    p = log_sinkhorn(raw, PREDICT_SINKHORN_STEPS, SINKHORN_TEMPERATURE, node_mask)
    return p.argmax(-1)


def fuse_permutation(perm: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
    """Cyclic permutation pointer indices (..., N) + first-node one-hot/logits (..., N) -> linear-order
    pointer (..., N): the first node points to itself (reference `fuse_perm_and_mask`)."""
    n = perm.shape[-1]
    idx = torch.arange(n, device=perm.device)
    is_first = idx == first.argmax(-1, keepdim=True)
    return torch.where(is_first, idx.expand_as(perm), perm)
