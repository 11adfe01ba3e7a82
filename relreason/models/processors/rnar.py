"""RNAR: a recurrent aggregator in place of max (Xu & Veličković 2024, arXiv 2409.07154, "Recurrent Aggregators
in Neural Algorithmic Reasoning").

Each receiver j reads its incoming messages as a list in node order, i = 0, 1, ..., N-1, through an LSTM,
and the aggregate is the LSTM's last output (the paper's list reduction z(j)_t = LSTM(psi(x_j, x_t),
z(j)_{t-1}), §2):

    m_ij           = the MPNN message from sender i to receiver j (relreason.models.processors.mpnn)
    (a, c)_{j,0}   = (0, 0)
    gates          = Wx m_ij + Wa a_{j,i-1} + b   ->  in, forget, cell, out  (sigmoid, sigmoid, tanh, sigmoid)
                     (`forget_bias` added to the forget gate's pre-activation: 0 as PyTorch's nn.LSTM, 1 as
                     Haiku's hk.LSTM, haiku/_src/recurrent.py `f = jax.nn.sigmoid(f + 1)`)
    c_{j,i}        = forget * c_{j,i-1} + in * cell;   a_{j,i} = out * tanh(c_{j,i})
    agg_j          = a_{j,N-1}   (a sender that may not send, a padded node, leaves (a, c) unchanged)

and the rest is Triplet-GMPNN's step (relreason.models.processors.gnn: update, LayerNorm, its gate, the
triplet edge messages), of which RNAR replaces the aggregator only. The aggregate is not invariant to the
order of the nodes: this processor is not permutation equivariant, by design (the paper's point: CLRS-30
nodes carry a natural order, their `pos`), so the registry's equivariance test checks the opposite for it.

The N sender steps are one Python loop over a shape (no branch on tensor values), each a (B N, H) x (H, 4H)
matmul pair; the messages themselves are built whole, (B, N, N, H), as the MPNN's autograd form.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from relreason.models.encoders import EdgeInput, linear
from relreason.models.processors.base import Processor, State, register_processor
from relreason.models.processors.gnn import TripletGMPNN, TripletGMPNNConfig, edge_linear
from relreason.models.processors.mpnn import fused_linear, message_mlp
from relreason.models.sparse import SparseForm, SparseGraph


@dataclass
class RNARConfig(TripletGMPNNConfig):
    """RNAR's options: Triplet-GMPNN's (its base here, see relreason/recipes/rnar.yaml); the LSTM is as wide as the messages."""

    forget_bias: float = 0.0  # on the forget gate's pre-activation: PyTorch nn.LSTM's 0 (hk.LSTM: 1; authors' unknown)


class LSTMAggregator(nn.Module):
    """The LSTM that folds each receiver's messages, in sender order, into one vector (module docstring)."""

    def __init__(self, hidden: int, forget_bias: float):
        super().__init__()
        self.hidden = hidden
        self.forget_bias = forget_bias  # a constant on the forget gate's pre-activation (RNARConfig.forget_bias)
        self.inputs = linear(hidden, 4 * hidden)  # Wx (with the bias b): in | forget | cell | out
        self.recurrent = linear(hidden, 4 * hidden, bias=False)  # Wa

    def forward(self, messages: torch.Tensor, senders: torch.Tensor) -> torch.Tensor:
        """messages (B, I, J, H) from sender i to receiver j; senders (B, I) bool, the i that send. -> (B, J, H)."""
        b, n, nj, h = messages.shape
        pre = self.inputs(messages)  # (B, I, J, 4H): the input half of every step at once
        out = messages.new_zeros(b, nj, h)  # a
        cell = messages.new_zeros(b, nj, h)  # c
        for i in range(n):
            gates = pre[:, i] + self.recurrent(out)  # (B, J, 4H)
            g_in, g_forget, g_cell, g_out = gates.split(h, dim=-1)
            new_cell = torch.sigmoid(g_forget + self.forget_bias) * cell + torch.sigmoid(g_in) * torch.tanh(g_cell)
            new_out = torch.sigmoid(g_out) * torch.tanh(new_cell)
            sends = senders[:, i, None, None]  # (B, 1, 1)
            cell = torch.where(sends, new_cell, cell)
            out = torch.where(sends, new_out, out)
        return out


@register_processor("rnar", RNARConfig, "Triplet-GMPNN with an LSTM over each node's messages in node order",
                    paper="Xu & Veličković 2024", recipes={"clrs": "rnar"})
class RNAR(TripletGMPNN):
    """Triplet-GMPNN (gnn.py) whose max aggregation is `LSTMAggregator`; see the module docstring."""

    permutation_equivariant = False  # the LSTM reads the senders in node order
    sparse_form = SparseForm.NONE  # the list of all senders in order is the model

    def __init__(self, cfg: RNARConfig, hidden: int):
        super().__init__(cfg, hidden)
        self.lstm = LSTMAggregator(hidden, cfg.forget_bias)

    def aggregate(self, z: torch.Tensor, edge_in: torch.Tensor | EdgeInput, graph_in: torch.Tensor,
                  adj: torch.Tensor, node_mask: torch.Tensor,
                  m12: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """agg_j = LSTM over the real senders i, in order, of MLP(relu(m1(z_j) + m2(z_i) + me(e_ij) + mg(g))): (B, N, H)."""
        m1, m2 = m12 if m12 is not None else fused_linear(z, self.m1, self.m2)
        pre = (m1[:, None, :, :] + (m2 + self.mg(graph_in)[:, None, :])[:, :, None, :]
               + edge_linear(edge_in, self.me.weight, self.me.bias))  # (B, I, J, H): sender i, receiver j
        return self.lstm(message_mlp(pre, self.mlp), node_mask)

    def forward_sparse(self, node_in, edge_in, graph_in, state: State, graph: SparseGraph, node_mask) -> State:
        return Processor.forward_sparse(self, node_in, edge_in, graph_in, state, graph, node_mask)
