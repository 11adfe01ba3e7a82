"""FloydNet (relreason/models/processors/floydnet.py): one processor step on a 3-node graph at width 2 with
weights set by hand, against the equations written out in plain Python loops; chunked pivots equal whole
ones. (Shapes, equivariance, padding and fitting are the registry-wide tests of test_processors.py.)"""

from __future__ import annotations

import math

import torch

from hand_arithmetic import add, mv, pattern
from relreason.models.processors import State
from relreason.models.processors.floydnet import FloydNet, FloydNetConfig, pivotal_attention

N, H = 3, 2  # nodes, width (= hidden, one head of width 2)


def layer_norm(x, eps=1e-5):
    mean = sum(x) / len(x)
    var = sum((v - mean) ** 2 for v in x) / len(x)
    return [(v - mean) / math.sqrt(var + eps) for v in x]


def dot(a, b):
    return sum(x * y for x, y in zip(a, b))


def reference(node, edge, graph, prev, w):
    """The FloydNet step of the module docstring, one number at a time."""
    e = [[add(mv(w["sender"], node[i]), w["sender_b"], mv(w["receiver"], node[k]), mv(w["edge"], edge[i][k]),
              mv(w["graph"], graph), mv(w["state"], prev[i][k])) for k in range(N)] for i in range(N)]
    x = [[layer_norm(add(e[i][k], mv(w["mix"], e[k][i]))) for k in range(N)] for i in range(N)]
    proj = [[mv(w["qkv"], x[i][k]) for k in range(N)] for i in range(N)]  # q | k1 | k2 | v1 | v2, 2 each
    q, k1, k2, v1, v2 = ([[proj[i][k][2 * p:2 * p + 2] for k in range(N)] for i in range(N)] for p in range(5))
    out = [[None] * N for _ in range(N)]
    for i in range(N):
        for k in range(N):
            scores = [(dot(q[i][k], k1[i][j]) + dot(q[i][k], k2[j][k])) / math.sqrt(2 * H) for j in range(N)]
            top = max(scores)
            weights = [math.exp(s - top) for s in scores]
            weights = [a / sum(weights) for a in weights]
            y = [sum(weights[j] * (v1[i][j][c] + v2[j][k][c]) for j in range(N)) for c in range(H)]
            e2 = add(e[i][k], mv(w["proj"], y))
            hidden = [max(0.0, v) for v in mv(w["ffn_in"], layer_norm(e2))]
            out[i][k] = add(e2, [w["scale"] * v for v in mv(w["ffn_out"], hidden)])
    mean = [sum(out[i][k][c] for i in range(N) for k in range(N)) / N ** 2 for c in range(H)]
    return out, add(mv(w["readout"], mean), w["readout_b"])


def test_one_step_matches_the_equations_written_out():
    w = {"sender": pattern(H, H, 0), "sender_b": [0.1, -0.2], "receiver": pattern(H, H, 1), "edge": pattern(H, H, 2),
         "graph": pattern(H, H, 3), "state": pattern(H, H, 4), "mix": pattern(H, H, 5), "qkv": pattern(5 * H, H, 6),
         "proj": pattern(H, H, 2), "ffn_in": pattern(H, H, 1), "ffn_out": pattern(H, H, 3), "scale": 0.7,
         "readout": pattern(H, H, 6), "readout_b": [0.05, 0.3]}
    proc = FloydNet(FloydNetConfig(heads=1, ffn_factor=1), H).double()
    block = proc.blocks[0]
    t = lambda x: torch.tensor(x, dtype=torch.float64)  # noqa: E731
    with torch.no_grad():
        for layer, key in ((proc.from_sender, "sender"), (proc.from_receiver, "receiver"), (proc.from_edge, "edge"),
                           (proc.from_graph, "graph"), (proc.from_state, "state"), (block.mix, "mix"),
                           (block.qkv, "qkv"), (block.proj, "proj"), (block.ffn_in, "ffn_in"),
                           (block.ffn_out, "ffn_out"), (proc.readout, "readout")):
            layer.weight.copy_(t(w[key]))
        proc.from_sender.bias.copy_(t(w["sender_b"]))
        proc.readout.bias.copy_(t(w["readout_b"]))
        block.ffn_scale.fill_(w["scale"])
    node = [[math.sin(i + 2 * c) for c in range(H)] for i in range(N)]
    edge = [[[math.cos(i - k + c) / 2 for c in range(H)] for k in range(N)] for i in range(N)]
    graph = [0.3, -0.6]
    prev = [[[((i * 5 + k * 3 + c) % 4 - 1.5) / 3 for c in range(H)] for k in range(N)] for i in range(N)]
    want_edge, want_graph = reference(node, edge, graph, prev, w)

    mask = torch.ones(1, N, dtype=torch.bool)
    got = proc(t([node]), t([edge]), t([graph]), State(torch.zeros(1, N, H, dtype=torch.float64), t([prev])),
               mask[:, :, None] & mask[:, None, :], mask)
    torch.testing.assert_close(got.edge[0], t(want_edge))
    torch.testing.assert_close(got.node[0], t([want_edge[i][i] for i in range(N)]))  # the diagonal
    torch.testing.assert_close(got.graph[0], t(want_graph))


def test_pivot_chunks_give_the_whole_computation():
    g = torch.Generator().manual_seed(0)
    parts = [torch.randn(2, 2, 5, 5, 3, generator=g, dtype=torch.float64) for _ in range(5)]
    pivots = torch.tensor([[True] * 5, [True, True, True, False, False]])
    whole = pivotal_attention(*parts, pivots=pivots, budget=1 << 30)
    rows = pivotal_attention(*parts, pivots=pivots, budget=1)  # one row i per chunk
    torch.testing.assert_close(rows, whole)
