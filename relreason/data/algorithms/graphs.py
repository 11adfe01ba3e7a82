"""Graph algorithms (CLRS chapters 22-25), recorded with the reference's probes.

Every algorithm here is written as a lockstep batch: one loop iteration is one hint step for every
sample still running (`rec.hint(active=running, ...)`), and the textbook's inner loops over nodes
become masked array operations over [B, N] or [B, N, N]. Where the sequential code reads state it
has just written in the same step, the vectorized form must give the same answer; each function
says why it does.

Samplers are the reference's: undirected Erdos-Renyi graphs (`samplers.graph_sampler`), p = 0.5
except Kruskal (p = 0.2), weighted except BFS, with a uniformly drawn source where the reference
function takes one.
"""

from __future__ import annotations

import enum

import numpy as np

from relreason.data import samplers
from relreason.data.algorithms import register
from relreason.data.probes import Recorder, graph_adjacency, positions

# Extract-min pushes nodes outside the queue past every queued one by this offset (the reference's
# `argsort(d + (1 - in_queue) * 1e9)[0]`); keeping the same float expression keeps the same ties.
_NOT_QUEUED = 1e9


@register("bfs", sample=samplers.graph_sampler(0.5, source=True), batched=True)
def bfs(A: np.ndarray, s: np.ndarray):
    """Breadth-first search (Moore, 1959) from source s. A: [B, N, N] (edge where A > 0), s: [B].

    One hint per frontier expansion. A node first reached in a step takes as parent the lowest
    reached node with an edge to it (the sequential `for i, for j` visits i in increasing order)."""
    B, n, _ = A.shape
    rec = Recorder("bfs", n, batch=B)
    rows, nodes = np.arange(B), np.arange(n)
    rec.input(pos=positions(n, B), s=s, A=A, adj=graph_adjacency(A))
    edge = A > 0  # [B, I, J]
    reach = np.zeros((B, n), bool)
    reach[rows, s] = True
    pi = np.tile(nodes, (B, 1))  # [B, N]
    orphan = nodes[None, :] != s[:, None]  # only non-source nodes adopt a parent
    running = np.ones(B, bool)
    while running.any():
        prev_reach = reach.copy()
        rec.hint(active=running, reach_h=prev_reach, pi_h=pi)
        via = edge & prev_reach[:, :, None] & running[:, None, None]  # [B, I, J]
        hit = via.any(axis=1)  # [B, J]
        # pi[j] == j holds for a non-source j exactly until it is first reached.
        adopt = hit & (pi == nodes) & orphan
        pi = np.where(adopt, via.argmax(axis=1), pi)  # argmax of a bool axis = lowest i
        reach |= hit
        running &= np.any(reach != prev_reach, axis=1)
    rec.output(pi=pi)
    return rec.finish()


@register("bellman_ford", sample=samplers.graph_sampler(0.5, weighted=True, source=True), batched=True)
def bellman_ford(A: np.ndarray, s: np.ndarray):
    """Bellman-Ford (1958) from source s. A: [B, N, N] weights (0 = no edge), s: [B]."""
    B, n, _ = A.shape
    rec = Recorder("bellman_ford", n, batch=B)
    rows = np.arange(B)
    rec.input(pos=positions(n, B), s=s, A=A, adj=graph_adjacency(A))
    d = np.zeros((B, n))
    pi = np.tile(np.arange(n), (B, 1))
    msk = np.zeros((B, n), bool)
    msk[rows, s] = True
    edge = A != 0
    running = np.ones(B, bool)
    while running.any():
        prev_d, prev_msk = d.copy(), msk.copy()
        rec.hint(active=running, pi_h=pi, d=prev_d, msk=prev_msk)
        valid = edge & prev_msk[:, :, None] & running[:, None, None]  # [B, U, V]
        cand = np.where(valid, prev_d[:, :, None] + A, np.inf)
        best, arg = cand.min(axis=1), cand.argmin(axis=1)  # [B, V]; argmin takes the lowest u on ties
        reached = valid.any(axis=1)
        better = reached & (~prev_msk | (best < prev_d))
        d = np.where(better, best, d)
        pi = np.where(better, arg, pi)
        msk |= reached
        running &= ~np.all(d == prev_d, axis=1)
    rec.output(pi=pi)
    return rec.finish()


def _extract_min_tree(name: str, A: np.ndarray, s: np.ndarray, prim: bool):
    """Dijkstra and Prim share their loop: extract the queued node of least value u, mark it, then
    relax every unmarked neighbour v (value d[u] + A[u, v] for Dijkstra, A[u, v] for Prim).

    One hint for the initial state, then one per extracted node; a sample stops when its queue is
    empty. The relaxation of u never touches u itself (it is marked), so reading d[u] once per step
    is what the sequential loop reads."""
    B, n, _ = A.shape
    rec = Recorder(name, n, batch=B)
    rows = np.arange(B)
    rec.input(pos=positions(n, B), s=s, A=A, adj=graph_adjacency(A))
    value_name = "key" if prim else "d"
    value = np.zeros((B, n))  # d (Dijkstra) or key (Prim)
    mark = np.zeros((B, n), bool)
    in_queue = np.zeros((B, n), bool)
    in_queue[rows, s] = True
    pi = np.tile(np.arange(n), (B, 1))
    rec.hint(pi_h=pi, mark=mark, in_queue=in_queue, u=s, **{value_name: value})
    running = np.ones(B, bool)
    for _ in range(n):  # at most one extraction per node
        # argsort (not argmin) so that ties break exactly as the reference's extract-min does.
        u = np.argsort(value + (~in_queue) * _NOT_QUEUED, axis=1)[:, 0]  # [B]
        running &= in_queue[rows, u]
        if not running.any():
            break
        live = rows[running]
        mark[live, u[running]] = True
        in_queue[live, u[running]] = False
        w = A[rows, u]  # [B, V]: edges out of u
        cand = w if prim else value[rows, u][:, None] + w
        relax = running[:, None] & (w != 0) & ~mark & (~in_queue | (cand < value))
        pi = np.where(relax, u[:, None], pi)
        value = np.where(relax, cand, value)
        in_queue |= relax
        rec.hint(active=running, pi_h=pi, mark=mark, in_queue=in_queue, u=u, **{value_name: value})
    rec.output(pi=pi)
    return rec.finish()


@register("dijkstra", sample=samplers.graph_sampler(0.5, weighted=True, source=True), batched=True)
def dijkstra(A: np.ndarray, s: np.ndarray):
    """Dijkstra's shortest paths (1959) from source s. A: [B, N, N] weights (0 = no edge), s: [B]."""
    return _extract_min_tree("dijkstra", A, s, prim=False)


@register("mst_prim", sample=samplers.graph_sampler(0.5, weighted=True, source=True), batched=True)
def mst_prim(A: np.ndarray, s: np.ndarray):
    """Prim's minimum spanning tree (1957) grown from s. A: [B, N, N] weights (0 = no edge), s: [B]."""
    return _extract_min_tree("mst_prim", A, s, prim=True)


@register("floyd_warshall", sample=samplers.graph_sampler(0.5, weighted=True), batched=True)
def floyd_warshall(A: np.ndarray):
    """Floyd-Warshall all-pairs shortest paths (1962). A: [B, N, N] weights (0 = no edge).

    One hint per intermediate node k, recorded before step k; step k is one vectorized update over
    every (i, j). The sequential loop reads the step's previous D and msk, and Pi[k, j], which step
    k never changes (its update of row k would write Pi[k, j] into itself), so nothing it reads
    depends on the order of (i, j)."""
    B, n, _ = A.shape
    rec = Recorder("floyd_warshall", n, batch=B)
    rec.input(pos=positions(n, B), A=A, adj=graph_adjacency(A))
    D = np.array(A, copy=True)  # keeps A's dtype, so sums round as the reference's do
    Pi = np.repeat(np.arange(n, dtype=np.int32)[None, :, None], n, axis=2)  # Pi[i, j] = i
    Pi = np.ascontiguousarray(np.broadcast_to(Pi, (B, n, n)))
    msk = (A + np.eye(n)) != 0  # [B, N, N]; the reference's `graph(A)` exactly (diagonal set)
    for k in range(n):
        rec.hint(Pi_h=Pi, D=D, msk=msk, k=np.full(B, k))
        through = msk[:, :, k, None] & msk[:, None, k, :]  # [B, I, J]: both legs i->k, k->j known
        cand = D[:, :, k, None] + D[:, None, k, :]
        better = through & (~msk | (cand < D))
        D = np.where(better, cand, D)
        Pi = np.where(better, Pi[:, None, k, :], Pi)
        msk |= through
    rec.output(Pi=Pi)
    return rec.finish()


class KruskalPhase(enum.IntEnum):
    """Classes of Kruskal's `phase` hint (graph categorical of 3)."""

    UNION = 0  # the initial state and the step that joins (or not) the two trees
    FIND_U = 1  # a new edge (u, v), then each step up from u towards its root
    FIND_V = 2  # each step up from v towards its root


class _KruskalState(enum.IntEnum):
    """What a sample's next hint step does (the state of the lockstep loop)."""

    NEXT_EDGE = 0
    FIND_U = 1
    FIND_V = 2


def _sorted_edges(A: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each graph's edges i < j with A[i, j] > 0, in Kruskal's order: row-major, then a
    (stable-or-not, as the reference's) argsort by weight. Returns heads, tails [B, E] and counts [B]."""
    B = A.shape[0]
    per_graph = []
    for b in range(B):
        i, j = np.nonzero(np.triu(A[b] > 0, k=1))  # row-major, as the reference's double loop
        order = np.argsort(A[b][i, j])
        per_graph.append((i[order], j[order]))
    counts = np.array([len(i) for i, _ in per_graph], dtype=np.int64)
    width = max(1, int(counts.max()))
    heads = np.zeros((B, width), np.int64)
    tails = np.zeros((B, width), np.int64)
    for b, (i, j) in enumerate(per_graph):
        heads[b, : len(i)], tails[b, : len(j)] = i, j
    return heads, tails, counts


@register("mst_kruskal", sample=samplers.graph_sampler(0.2, weighted=True), batched=True)
def mst_kruskal(A: np.ndarray):
    """Kruskal's minimum spanning forest (1956) with a path-compressing union-find. A: [B, N, N].

    Per edge (u, v) in weight order the reference records: one hint on taking the edge, one per
    step from u up to its root (every node passed so far re-pointed to the new ancestor), the same
    from v, and one for the union (the lower root is attached under the higher). Here each sample
    runs that sequence as a small state machine, one hint per loop iteration for all samples."""
    B, n, _ = A.shape
    rec = Recorder("mst_kruskal", n, batch=B)
    rows = np.arange(B)
    rec.input(pos=positions(n, B), A=A, adj=graph_adjacency(A))
    heads, tails, counts = _sorted_edges(A)
    pi = np.tile(np.arange(n), (B, 1))
    in_mst = np.zeros((B, n, n), bool)
    u, v = np.zeros(B, np.int64), np.zeros(B, np.int64)
    root_u, root_v = np.zeros(B, np.int64), np.zeros(B, np.int64)
    mask_u, mask_v = np.zeros((B, n), bool), np.zeros((B, n), bool)
    phase = np.full(B, KruskalPhase.UNION)
    rec.hint(in_mst_h=in_mst, pi=pi, u=u, v=v, root_u=root_u, root_v=root_v, mask_u=mask_u, mask_v=mask_v,
             phase=phase)
    state = np.full(B, _KruskalState.NEXT_EDGE)
    edge = np.zeros(B, np.int64)  # index of the current edge in each sample's sorted list
    running = counts > 0
    while running.any():
        # Take a new edge.
        new = running & (state == _KruskalState.NEXT_EDGE)
        if new.any():
            b = rows[new]
            u[b], v[b] = heads[b, edge[b]], tails[b, edge[b]]
            root_u[b], root_v[b] = u[b], v[b]
            mask_u[b], mask_v[b] = False, False
            mask_u[b, u[b]], mask_v[b, v[b]] = True, True
            phase[b], state[b] = KruskalPhase.FIND_U, _KruskalState.FIND_U
        # A sample whose current root is final falls through to the next stage in the same step.
        busy = running & ~new
        up_u = busy & (state == _KruskalState.FIND_U) & (pi[rows, root_u] != root_u)
        state[busy & ~up_u & (state == _KruskalState.FIND_U)] = _KruskalState.FIND_V
        up_v = busy & (state == _KruskalState.FIND_V) & (pi[rows, root_v] != root_v)
        union = busy & ~up_u & ~up_v
        for up, root, mask, ph in ((up_u, root_u, mask_u, KruskalPhase.FIND_U),
                                   (up_v, root_v, mask_v, KruskalPhase.FIND_V)):
            if up.any():
                b = rows[up]
                root[b] = pi[b, root[b]]
                pi[b] = np.where(mask[b], root[b, None], pi[b])  # compress the path walked so far
                mask[b, root[b]] = True
                phase[b] = ph
        if union.any():
            b = rows[union]
            join = root_u[b] != root_v[b]
            lo = np.minimum(root_u[b], root_v[b])
            hi = np.maximum(root_u[b], root_v[b])
            bj = b[join]
            in_mst[bj, u[bj], v[bj]] = True
            in_mst[bj, v[bj], u[bj]] = True
            pi[bj, lo[join]] = hi[join]
            phase[b], state[b] = KruskalPhase.UNION, _KruskalState.NEXT_EDGE
            edge[b] += 1
        rec.hint(active=running, in_mst_h=in_mst, pi=pi, u=u, v=v, root_u=root_u, root_v=root_v, mask_u=mask_u,
                 mask_v=mask_v, phase=phase)
        running &= edge < counts
    rec.output(in_mst=in_mst)
    return rec.finish()
