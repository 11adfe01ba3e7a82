"""G-ForgetNet (relreason/models/processors/forgetnet.py): its forget gate on a 3-node graph at width 2 with
weights set by hand, computed in plain Python, in front of Triplet-GMPNN's step; a closed gate forgets the
previous state entirely (ForgetNet) and an open one is Triplet-GMPNN itself. (Shapes, equivariance, padding
and fitting are the registry-wide tests of test_processors.py.)"""

from __future__ import annotations

import math

import torch

from relreason.models.processors import PROCESSORS, State
from relreason.models.processors.forgetnet import GForgetNet, GForgetNetConfig

B, N, H = 1, 3, 2


def inputs(seed: int):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    mask = torch.ones(B, N, dtype=torch.bool)
    return r(B, N, H), r(B, N, N, H), r(B, H), State(r(B, N, H), None, r(B, H)), mask[:, :, None] & mask[:, None, :], mask


def processors():
    """G-ForgetNet and a Triplet-GMPNN with the same base weights."""
    torch.manual_seed(0)
    proc = GForgetNet(GForgetNetConfig(), H).double()
    base = PROCESSORS.get("triplet_gmpnn").build(PROCESSORS.get("triplet_gmpnn").config(), H).double()
    base.load_state_dict({k: v for k, v in proc.state_dict().items() if not k.startswith("forget_")})
    return proc, base


def test_the_gate_matches_its_equation_and_feeds_the_gated_state_to_triplet_gmpnn():
    proc, base = processors()
    w_node, w_state, bias = [[0.5, -0.25], [0.75, 0.0]], [[-0.5, 0.25], [0.25, 1.0]], [0.1, -0.3]
    with torch.no_grad():
        proc.forget_node.weight.copy_(torch.tensor(w_node)), proc.forget_node.bias.copy_(torch.tensor(bias))
        proc.forget_state.weight.copy_(torch.tensor(w_state))
    node, edge, graph, state, adj, mask = inputs(1)
    x, h = node[0].tolist(), state.node[0].tolist()
    kept = [[1 / (1 + math.exp(-(sum(w_node[c][q] * x[i][q] + w_state[c][q] * h[i][q] for q in range(H)) + bias[c])))
             * h[i][c] for c in range(H)] for i in range(N)]  # g_i * h_i, one number at a time
    got = proc(node, edge, graph, state, adj, mask)
    want = base(node, edge, graph, State(torch.tensor([kept], dtype=torch.float64), None, state.graph), adj, mask)
    torch.testing.assert_close(got.node, want.node)
    torch.testing.assert_close(got.edge, want.edge)


def test_a_closed_gate_forgets_the_previous_state_and_an_open_one_is_triplet_gmpnn():
    proc, base = processors()
    node, edge, graph, state, adj, mask = inputs(2)
    moved = State(state.node + 3.0, None, state.graph)
    with torch.no_grad():
        proc.forget_node.bias.fill_(-1e3)  # g = 0: ForgetNet, the previous state unread
    torch.testing.assert_close(proc(node, edge, graph, state, adj, mask).node,
                               proc(node, edge, graph, moved, adj, mask).node)
    with torch.no_grad():
        proc.forget_node.bias.fill_(1e3)  # g = 1: the plain Triplet-GMPNN step
    torch.testing.assert_close(proc(node, edge, graph, state, adj, mask).node,
                               base(node, edge, graph, state, adj, mask).node)
