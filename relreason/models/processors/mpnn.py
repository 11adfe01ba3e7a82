"""MPNN processor (Gilmer et al., ICML 2017) with the CLRS reference's semantics (Veličković et al. 2022).

    z_i   = [node_in_i, hidden_i]                                   (B, N, 2H)
    m_ij  = MLP(relu(m1(z_j) + m2(z_i) + me(e_ij) + mg(g)))           message from sender i to receiver j
    agg_j = max over senders i of m_ij                                all real nodes (MPNN) or adj (PGN)
    h_j   = LayerNorm(relu(o1(z_j) + o2(agg_j)))

The message MLP runs on every (sender, receiver) pair, so its two (H, H) layers on (B, N, N, H) are
the processor's cost; everything else is per node. The edge input may come factored
(`relreason.models.encoders.EdgeInput`, see `factored_edges`): then me(e) is folded into the small
encoder map instead of being a third (B, N, N, H) x (H, H) matmul.

`layers: L` (1 in CLRS) stacks L such updates per algorithm step, each with its own weights, as the RT
authors' fork does for its baselines (processors.py: `nb_layers` Basic_MPNN layers; the RT paper's
Table 2 `num_layers`): layer l >= 2 reads z = the previous layer's output (B, N, H) alone, with this
step's edge and graph features. (`model.processor_steps` instead repeats one set of weights, each
time on [node_in, state].)

Sparse form (`forward_sparse`, relreason.models.sparse): the same formulas with one message per entry
(i, j) of the edge list and agg_j = the segment maximum over j's entries. For PGN (and Deep Sets) that
is the dense computation; the dense MPNN sends messages between all node pairs, so its sparse form,
messages along the graph's edges and self-loops (as SALSA-CLRS runs it), is another model: with the
same weights it equals the dense PGN.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import nn

from relreason.errors import RelreasonError
from relreason.models.encoders import EdgeInput, linear
from relreason.models.kernels import plain, reads_allowed
from relreason.models.precision import float32_apply
from relreason.models.processors.base import Processor, State, masked_fill_value, register_processor
from relreason.models.sparse import SparseForm, SparseGraph, segment_max


@dataclass
class MPNNConfig:
    use_ln: bool = True  # LayerNorm on the new hidden state; CLRS run.py --use_ln True
    msg_mlp_layers: int = 2  # (H, H) layers after the message sum; CLRS msgs_mlp_sizes=[H, H]
    layers: int = 1  # untied message-passing layers per algorithm step; CLRS 1 (RT authors' fork: --num_layers)

    def __post_init__(self) -> None:
        if self.msg_mlp_layers < 0:
            raise RelreasonError(f"processor.msg_mlp_layers must be >= 0, got {self.msg_mlp_layers}", "use 2")
        if self.layers < 1:
            raise RelreasonError(f"processor.layers must be >= 1, got {self.layers}", "use 1 (the CLRS processors)")


@register_processor("mpnn", MPNNConfig, "Message passing over all node pairs, max aggregation",
                    paper="Gilmer et al. 2017")
class MPNN(Processor):
    """See the module docstring. Subclasses set `restrict_to_adj` to aggregate over the adjacency only (PGN)."""

    restrict_to_adj = False  # MPNN: every real node sends to every node
    factored_edges = True  # accepts an EdgeInput in place of the dense (B, N, N, H) edge tensor
    sparse_form = SparseForm.EDGES  # sparse: messages along the edges only (module docstring)

    def __init__(self, cfg: MPNNConfig, hidden: int, z_dim: int | None = None):
        super().__init__(cfg, hidden)
        H = hidden
        Z = 2 * H if z_dim is None else z_dim  # z = [node_in, hidden] (first layer) or the previous layer's output
        self.m1 = linear(Z, H)  # receiver part of the message
        self.m2 = linear(Z, H)  # sender part
        self.me = linear(H, H)
        self.mg = linear(H, H)
        self.mlp = nn.ModuleList([linear(H, H) for _ in range(cfg.msg_mlp_layers)])
        self.o1 = linear(Z, H)
        self.o2 = linear(H, H)
        self.ln = nn.LayerNorm(H) if cfg.use_ln else None
        # layers 2..L, each with its own weights (empty, so no parameters, in the CLRS processors' L = 1)
        self.stack = nn.ModuleList(type(self)(replace(cfg, layers=1), H, z_dim=H) for _ in range(cfg.layers - 1))

    def forward(self, node_in: torch.Tensor, edge_in: torch.Tensor | EdgeInput, graph_in: torch.Tensor, state: State,
                adj: torch.Tensor, node_mask: torch.Tensor) -> State:
        out = self.update(torch.cat([node_in, state.node], -1), edge_in, graph_in, adj, node_mask)  # (B, N, H)
        for layer in self.stack:
            out = layer.update(out, edge_in, graph_in, adj, node_mask)
        return State(out, None, state.graph)

    def update(self, z: torch.Tensor, edge_in: torch.Tensor | EdgeInput, graph_in: torch.Tensor, adj: torch.Tensor,
               node_mask: torch.Tensor) -> torch.Tensor:
        """One message-passing layer on z (B, N, Z): LayerNorm(relu(o1(z) + o2(agg))), (B, N, H)."""
        # m1, m2 and o1 all read z: one matmul for the three (their parameters stay separate)
        m1, m2, o1 = fused_linear(z, self.m1, self.m2, self.o1)
        agg = self.aggregate(z, edge_in, graph_in, adj, node_mask, (m1, m2))  # (B, N, H)
        out = torch.relu(o1 + self.o2(agg))
        return out if self.ln is None else self.ln(out)

    def aggregate(self, z: torch.Tensor, edge_in: torch.Tensor | EdgeInput, graph_in: torch.Tensor,
                  adj: torch.Tensor, node_mask: torch.Tensor,
                  m12: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """agg_j = max over allowed senders i of MLP(relu(m1(z_j) + m2(z_i) + me(e_ij) + mg(g))): (B, N, H).

        The message step alone, for subclasses that post-process the aggregate (gates, triplets).
        `m12` = (m1(z), m2(z)) when the caller has computed them already."""
        m1, m2 = m12 if m12 is not None else fused_linear(z, self.m1, self.m2)
        receiver = m1[:, None, :, :]  # (B, 1, N, H)
        sender = m2 + self.mg(graph_in)[:, None, :]  # (B, N, H)
        # me(e) as raw (B, N, N, F) @ wc (F, H) + bc: with factored edges F is the encoders' few columns
        if isinstance(edge_in, EdgeInput):
            raw, wc = edge_in.raw, edge_in.weight @ self.me.weight.t()
            bc = edge_in.bias @ self.me.weight.t() + self.me.bias
        else:
            raw, wc, bc = edge_in, self.me.weight.t(), self.me.bias
        sender = (sender + bc)[:, :, None, :]  # (B, N, 1, H): per-pair constants ride on the sender term
        allowed = node_mask[:, :, None]  # (B, N, 1) senders
        if self.restrict_to_adj:
            allowed = allowed & adj
        params = [t for layer in self.mlp for t in (layer.weight, layer.bias)]
        if plain():  # vmap (relreason.models.kernels.plain_autograd): the same numbers by plain autograd
            return _messages_plain(receiver, sender, raw, wc, allowed, *params)
        if reads_allowed() and bool(allowed.all()):  # common case (no padding, MPNN): no (B, N, N, H) masking pass
            allowed = None
        return float32_apply(_Messages.apply, receiver, sender, raw, wc, allowed, *params)


    # -- sparse form (relreason.models.sparse) --------------------------------------------------------

    def forward_sparse(self, node_in: torch.Tensor, edge_in: EdgeInput, graph_in: torch.Tensor, state: State,
                       graph: SparseGraph, node_mask: torch.Tensor) -> State:
        out = self.update_sparse(torch.cat([node_in, state.node], -1), edge_in, graph_in, graph)  # (B, N, H)
        for layer in self.stack:
            out = layer.update_sparse(out, edge_in, graph_in, graph)
        return State(out, None, state.graph)

    def update_sparse(self, z: torch.Tensor, edge_in: EdgeInput, graph_in: torch.Tensor,
                      graph: SparseGraph) -> torch.Tensor:
        """`update` along the entries of `graph`: (B, N, H)."""
        m1, m2, o1 = fused_linear(z, self.m1, self.m2, self.o1)
        agg = self.aggregate_sparse(edge_in, graph_in, graph, (m1, m2))  # (B, N, H)
        out = torch.relu(o1 + self.o2(agg))
        return out if self.ln is None else self.ln(out)

    def aggregate_sparse(self, edge_in: EdgeInput, graph_in: torch.Tensor, graph: SparseGraph,
                         m12: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """`aggregate` along the entries: agg_j = max over the entries (i, j) of
        MLP(relu(m1(z_j) + m2(z_i) + me(e_ij) + mg(g))), 0 for a node without entries: (B, N, H)."""
        m1, m2 = m12  # (B, N, H) each
        B, N, H = m1.shape
        sender = (m2 + self.mg(graph_in)[:, None, :]).reshape(B * N, H)
        edge = edge_in.project(self.me.weight, self.me.bias)  # (E, H)
        x = m1.reshape(B * N, H)[graph.col] + sender[graph.row] + edge  # (E, H): receiver j = col, sender i = row
        return segment_max(message_mlp(x, self.mlp), graph.col, graph.nodes).view(B, N, H)


def message_mlp(x: torch.Tensor, layers: nn.ModuleList) -> torch.Tensor:
    """The message MLP of `_Messages` on per-entry pre-activations (E, H): (ReLU, Linear)* (none: x itself)."""
    for layer in layers:
        x = layer(torch.relu(x))
    return x


def fused_linear(x: torch.Tensor, *layers: nn.Linear) -> tuple[torch.Tensor, ...]:
    """(layer(x) for layer in layers) computed as one matmul over the concatenated weights."""
    w = torch.cat([layer.weight for layer in layers])
    b = torch.cat([layer.bias for layer in layers])
    return torch.nn.functional.linear(x, w, b).split([layer.out_features for layer in layers], -1)


def _messages_plain(receiver: torch.Tensor, sender: torch.Tensor, raw: torch.Tensor, wc: torch.Tensor,
                    allowed: torch.Tensor, *params: torch.Tensor) -> torch.Tensor:
    """`_Messages` by plain autograd (what its docstring says it equals), with no branch on a value."""
    x = receiver + sender + raw @ wc  # (B, N, N, H)
    L = len(params) // 2
    for k in range(L):
        x = torch.nn.functional.linear(x.relu() if k == 0 else x, params[2 * k], params[2 * k + 1])
        if 0 < k + 1 < L:
            x = x.relu()
    x = x.masked_fill(~allowed[..., None], masked_fill_value(x))
    return torch.where(allowed.any(1)[..., None], x.amax(1), 0.0)  # (B, N, H)


class _Messages(torch.autograd.Function):
    """agg[b, j] = max over allowed senders i of MLP(relu(receiver[b, j] + sender[b, i] + raw[b, i, j] @ wc)),
    MLP = (Linear, ReLU)* Linear; 0 for a receiver with no allowed sender.

    Exactly what autograd would build from broadcast adds, nn.Linear, relu and amax, with a hand-written
    backward that works in place: the (B, N, N, H) tensors are allocated 5 times per call instead of
    about 12, and no bool masks are used (on CPU, fresh large buffers and bool kernels cost more than
    the arithmetic). The max's gradient goes to the maximal senders, split evenly on ties, as
    autograd's amax and JAX's max do.

    Args: receiver (B, 1, N, H) and sender (B, N, 1, H) (or anything broadcasting to (B, N, N, H));
    raw (B, N, N, F); wc (F, H);
    allowed (B, N, N or 1) bool senders, or None for all; then weight, bias of each MLP layer.
    """

    @staticmethod
    def forward(ctx, receiver: torch.Tensor, sender: torch.Tensor, raw: torch.Tensor, wc: torch.Tensor,
                allowed: torch.Tensor | None, *params: torch.Tensor) -> torch.Tensor:
        B, n, _, F = raw.shape
        H = wc.shape[1]
        L = len(params) // 2
        x = receiver + sender  # (B, N, N, H), a fresh buffer
        x2 = x.view(-1, H)  # (R, H), R = B*N*N
        raw2 = raw.reshape(B * n * n, F)
        if F:
            x2.addmm_(raw2, wc)
        acts = []  # each layer's input (after its ReLU), kept for the backward
        for k in range(L):
            a = x2.relu_() if k == 0 else x2.add_(params[2 * k - 1]).relu_()
            acts.append(a)
            x2 = torch.mm(a, params[2 * k].t())
        if L:
            x2.add_(params[-1])
        x = x2.view(B, n, n, H)
        if allowed is not None:
            x.masked_fill_(~allowed[..., None], masked_fill_value(x))
        agg = x.amax(1)  # (B, N, H)
        if allowed is not None:
            agg = torch.where(allowed.any(1)[..., None], agg, 0.0)
        ctx.save_for_backward(x, agg, raw2, wc, *acts, *params[0::2])
        ctx.layers, ctx.raw_shape, ctx.receiver_shape, ctx.sender_shape = L, raw.shape, receiver.shape, sender.shape
        return agg

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g: torch.Tensor):
        x, agg, raw2, wc, *rest = ctx.saved_tensors
        L = ctx.layers
        acts, weights = rest[:L], rest[L:]
        B, n, _, H = x.shape
        # 1.0 at the maximal senders, 0.0 elsewhere (x <= agg; masked senders lie far below). Computed
        # in the buffer of x, which the backward no longer needs.
        hit = x.sub_(agg.unsqueeze(1)).sign_().add_(1.0)  # (B, N, N, H)
        share = g / hit.sum(1).clamp(min=1.0)  # (B, N, H): ties split the gradient
        gx = hit.mul_(share.unsqueeze(1)).view(-1, H)  # (R, H) gradient of the last layer's output
        grads: list[torch.Tensor] = []
        for k in reversed(range(L)):
            a = acts[k]
            grads = [gx.t() @ a, gx.sum(0)] + grads  # weight (out, in), bias
            ga = torch.mm(gx, weights[k])  # (R, H) gradient of this layer's input a = relu(previous)
            gx = torch.ops.aten.threshold_backward.grad_input(ga, a, 0.0, grad_input=ga)  # in place
        g0 = gx.view(B, n, n, H)  # gradient of receiver + sender + raw @ wc
        need = ctx.needs_input_grad
        grad_receiver = g0.sum_to_size(ctx.receiver_shape) if need[0] else None
        grad_sender = g0.sum_to_size(ctx.sender_shape) if need[1] else None
        grad_raw = (gx @ wc.t()).view(ctx.raw_shape) if need[2] and raw2.shape[1] else None
        grad_wc = raw2.t() @ gx if need[3] else None
        return (grad_receiver, grad_sender, grad_raw, grad_wc, None, *grads)
