"""The DFS-based graph algorithms of CLRS-30 (CLRS chapter 22, plus DAG shortest paths).

dfs, topological_sort, articulation_points, bridges, strongly_connected_components (Kosaraju) and
dag_shortest_paths all run the reference's iterative depth-first search: an explicit stack threaded
through `s_prev` (s_prev[v] is the node below v on the stack, a root points to itself), `s_last` its
top, and a probe pushed at each of its natural points: a new root, a node's discovery, a tree edge,
a back edge (articulation points and bridges), a node's finish. `_walk` is that search, written once;
the algorithms differ only in the bookkeeping they ask of it (`_Walk`) and in what they record.

Why it is built this way (speed): the search's control flow differs from sample to sample, so it is
not batched. Each sample runs `_walk` on plain Python lists and logs, per probe point, one record of
the per-step values (s, u, v, s_last, time, ...) and, per node feature, only its changes
(step, node, value). `_Trace` then assembles the whole batch's [B, T, ...] hint arrays in a few
vectorized passes (a forward fill of the changes along T) and hands them to the recorder in one call.
Every array is built with its padding already zero (written once, or never), so the recorder leaves
it alone. dag_shortest_paths' relaxation phase, whose control flow is the same for every sample (one
node of the topological order per step), runs for the whole batch at once.
"""

from __future__ import annotations

import enum

import numpy as np

from relreason.data import samplers
from relreason.data.algorithms import register
from relreason.data.probes import Recorder, fill_steps, graph_adjacency, positions

_TICK = 0.01  # the reference's clock step for discovery and finish times (and child counts)
_COLORS = 3  # white (unvisited), gray (on the stack), black (finished)
_WHITE, _GRAY, _BLACK = range(_COLORS)


class _Walk(enum.Enum):
    """The bookkeeping a depth-first walk does besides colors and the stack."""

    TIMED = "timed"  # parents, discovery/finish times d, f and the clock: dfs, strongly_connected_components
    TOPO = "topo"  # no clock; each finished node is prepended to the `topo` list: topological_sort, dag
    CUT = "cut"  # TIMED + low, child counts, back-edge probes and cut vertices: articulation_points
    BRIDGE = "bridge"  # TIMED + low, back-edge probes and bridge edges: bridges


class _Push(enum.IntEnum):
    """What a probe point is; each kind implies fixed state changes (see `_Trace.derived`)."""

    ROOT = 0  # a new root s, before its discovery
    DISCOVER = 1  # u turns gray and (timed walks) gets d[u] = time
    TREE = 2  # tree edge u -> v: v turns gray, s_prev[v] = u (the old top), pi[v] = u
    BACK = 3  # a non-tree neighbour v of u (articulation points, bridges)
    FINISH = 4  # u turns black, f[u] = time; then (unless u is the root) it is popped: s_prev[u] = u
    OTHER = 5  # a probe outside the walk (dag_shortest_paths' relaxations)


class _Col(enum.IntEnum):
    """Fields of a push record: what kind of probe point, and the per-step values."""

    KIND = 0
    S = 1  # the current root
    U = 2
    V = 3
    S_LAST = 4  # the top of the stack
    # One field, two meanings: walks with a clock keep no topo list, and topo walks keep no clock.
    TIME = 5  # the clock
    TOPO_HEAD = 5  # the head of the topo list


_RECORD = len(_Col)
# The push kinds as plain ints, for the hot loop.
_ROOT, _DISCOVER, _TREE, _BACK, _FINISH, _OTHER = map(int, _Push)

# Node features whose changes are logged as they happen (the rest follow from the push kinds).
_LOGGED = ("color", "low", "child_cnt", "is_cut", "topo", "scc_id")

_Events = tuple[np.ndarray, np.ndarray, np.ndarray]  # push index g [E], node [E], value [E]


def _floats(values: list) -> np.ndarray:
    """A flat list of Python numbers as float64 (fromiter: faster than np.array for long lists)."""
    return np.fromiter(values, dtype=np.float64, count=len(values))


class _Trace:
    """One batch's probes as the walks log them, and their assembly into [B, T, ...] hint arrays.

    Push g (counted over the whole batch) is `records[g * 6 : g * 6 + 6]`. A state change at push g
    is first shown by push g: it happened after push g - 1. Changes implied by a push's kind are not
    logged (`derived` recovers them); the others are logged as flat triples (g, node, value).
    """

    def __init__(self, n: int):
        self.n = n
        self.records: list = []  # flat push records, _RECORD values each
        self.count = 0  # pushes so far
        self.changes: dict[str, list] = {k: [] for k in _LOGGED}  # flat (g, node, value) triples
        self.edge_changes: list[tuple[int, int, int]] = []  # (g, u, v): is_bridge[u, v] = is_bridge[v, u] = 1
        self.starts = [0]  # first push of each sample, then the total

    def end_sample(self) -> None:
        self.starts.append(self.count)

    def assemble(self) -> None:
        """Freezes the logs into index arrays; call after the last sample."""
        starts = np.asarray(self.starts, dtype=np.int64)
        self.lengths = np.diff(starts)  # [B] pushes per sample
        self.B, self.T = len(self.lengths), int(self.lengths.max())
        self.record = _floats(self.records).reshape(-1, _RECORD)  # [G, 6]
        self.kind = self.record[:, _Col.KIND].astype(np.int8)
        sample = np.repeat(np.arange(self.B), self.lengths)  # [G] the sample of each push
        self.row = sample * self.T + np.arange(len(sample)) - starts[sample]  # [G] its row in [B * T]

    def derived(self, kind: _Push, node: _Col, value: _Col | float) -> _Events:
        """The change each push of `kind` shows: feature[record[node]] = record[value] (or a constant)."""
        g = np.flatnonzero(self.kind == kind)
        values = self.record[g, value] if isinstance(value, _Col) else np.full(len(g), float(value))
        return g, self.record[g, node], values

    def pops(self) -> _Events:
        """s_prev[u] = u when a finished u leaves the stack, shown from the next push (roots stay)."""
        g = np.flatnonzero(self.kind == _Push.FINISH)
        g = g[self.record[g, _Col.U] != self.record[g, _Col.S]]
        return g + 1, self.record[g, _Col.U], self.record[g, _Col.U]

    def mask_one(self, col: _Col) -> np.ndarray:
        """A mask_one hint [B, T, N] float32 from a per-push node index."""
        out = np.zeros((self.B, self.T, self.n), np.float32)
        out.reshape(-1, self.n)[self.row, self.record[:, col].astype(np.int64)] = 1
        return out

    def graph(self, values: _Col | np.ndarray, dtype: type) -> np.ndarray:
        """A graph-level hint [B, T] from a per-push value (a record field or [G] values)."""
        out = np.zeros((self.B, self.T), dtype)
        out.reshape(-1)[self.row] = self.record[:, values] if isinstance(values, _Col) else values
        return out

    def node(self, name: str, init: np.ndarray, *derived: _Events, classes: int = 0) -> np.ndarray:
        """A node hint [B, T, N] from its value at the first push, its logged changes and `derived`
        ones; with `classes`, a categorical one-hot [B, T, N, classes] float32.

        init: [B, N]. Each step holds the previous step's values plus the changes it first shows (a
        node never changes twice between two pushes), zero past the sample's length (`fill_steps`).
        """
        log = _floats(self.changes.get(name, [])).reshape(-1, 3)  # [E, 3]: g, node, value
        g, node, value = (np.concatenate([log[:, k]] + [ev[k] for ev in derived]) for k in range(3))
        sample, step = np.divmod(self.row[g.astype(np.int64)], self.T)
        if classes:
            one_hot = np.eye(classes, dtype=np.float32)
            init, value = one_hot[init], one_hot[value.astype(np.int64)]
        return fill_steps(init, self.lengths, self.T, sample, step, node.astype(np.int64), value)

    def constant(self, value: np.ndarray) -> np.ndarray:
        """A hint that never changes: value [B, ...] at every step of a sample, zero past its length.

        Every byte is written once (np.zeros would write the whole array a first time when its memory
        is reused rather than fresh from the OS)."""
        out = np.empty((self.B, self.T) + value.shape[1:], value.dtype)
        for b, length in enumerate(self.lengths.tolist()):
            out[b, :length] = value[b]
            out[b, length:] = 0
        return out

    def finish(self, rec: Recorder, **hints: np.ndarray) -> None:
        """Hands the hints to the recorder: every array built here is zero past each sample's length."""
        rec.hint_sequence(self.lengths, zero_padded=hints.keys(), **hints)


class _State:
    """One sample's search state, on plain lists (the reference's arrays)."""

    def __init__(self, n: int, trace: _Trace):
        self.n, self.trace = n, trace
        self.color, self.pi, self.s_prev = [_WHITE] * n, list(range(n)), list(range(n))
        self.d, self.f, self.low, self.child_cnt = [0.0] * n, [0.0] * n, [0.0] * n, [0.0] * n
        self.is_cut, self.topo, self.scc_id = [0] * n, list(range(n)), list(range(n))
        self.children: list[list[int]] = []  # per node, its tree children (walks with back edges)
        self.bridges: list[tuple[int, int]] = []
        self.time = 0.0
        self.topo_head = 0
        self.u = self.v = self.s_last = 0  # as the last walk left them (dag_shortest_paths keeps probing them)

    def set(self, name: str, i: int, value) -> None:
        """Changes one node's logged value between pushes, logging it if it differs."""
        values = getattr(self, name)
        if values[i] != value:
            values[i] = value
            self.trace.changes[name].extend((self.trace.count, i, value))


def _walk(st: _State, rows: list[int], roots, kind: _Walk, label: bool = False) -> None:
    """The reference's iterative DFS from each still-white node of `roots`, recording every probe point.

    rows[u]: u's out-neighbours as a bit set (bit v set iff A[u, v] != 0). Every node must be white.
    label: Kosaraju's second pass, which sets scc_id[u] = root at every turn of the loop.
    The hot loop: changes implied by a push's kind are not logged, the rest are logged inline.
    """
    n, tr = st.n, st.trace
    color, pi, d, f, s_prev, low, scc_id = st.color, st.pi, st.d, st.f, st.s_prev, st.low, st.scc_id
    log_low, log_scc = tr.changes["low"].extend, tr.changes["scc_id"].extend
    record = tr.records.extend
    timed = kind is not _Walk.TOPO
    back_edges = kind is _Walk.CUT or kind is _Walk.BRIDGE
    # The reference scans v = 0..n-1 for the first white neighbour of u: the lowest bit of
    # rows[u] & white, with `white` the bit set of white nodes.
    white = (1 << n) - 1
    if back_edges:
        st.children = [[] for _ in range(n)]
    g, time, topo_head, u, v, s_last = tr.count, st.time, st.topo_head, st.u, st.v, st.s_last
    for s in roots:
        if color[s] != _WHITE:
            continue
        s_last = u = v = s
        record((_ROOT, s, u, v, s_last, time if timed else topo_head))
        g += 1
        while True:
            if label and scc_id[u] != s:
                scc_id[u] = s
                log_scc((g, u, s))
            # Discovery: a root, or (timed walks) a node whose time is not yet set.
            if color[u] == _WHITE or (timed and d[u] == 0.0):
                white &= ~(1 << u)
                if timed:
                    time += _TICK
                    d[u] = time
                    if back_edges:
                        low[u] = time
                color[u] = _GRAY
                record((_DISCOVER, s, u, v, s_last, time if timed else topo_head))
                g += 1
            candidates = rows[u] & white
            first = candidates & -candidates  # the bit of the first white neighbour (0 if none)
            if back_edges:  # a probe for each non-white neighbour before the first white one, but the parent
                seen = rows[u] & ~white & (first - 1 if first else -1)
                while seen:
                    bit = seen & -seen
                    seen ^= bit
                    w = bit.bit_length() - 1
                    if w != pi[u]:
                        if d[w] < low[u]:
                            low[u] = d[w]
                            log_low((g, u, d[w]))
                        record((_BACK, s, u, w, s_last, time))
                        g += 1
            if first:  # tree edge u -> v: v goes on the stack (s_last == u here)
                v = first.bit_length() - 1
                white ^= first
                if timed:
                    pi[v] = u
                color[v] = _GRAY
                s_prev[v] = u
                s_last = v
                if back_edges:
                    st.children[u].append(v)
                    if kind is _Walk.CUT:
                        st.child_cnt[u] += _TICK
                        tr.changes["child_cnt"].extend((g, u, st.child_cnt[u]))
                record((_TREE, s, u, v, s_last, time if timed else topo_head))
                g += 1
            else:
                v = n - 1  # where the reference's `for v in range(n)` loop ends
            if s_last == u:  # no white neighbour left: u finishes
                color[u] = _BLACK
                if timed:
                    time += _TICK
                    f[u] = time
                if back_edges:
                    tr.count = g
                    _finish_low(st, u, kind)
                    v = n - 1  # the reference loops over v again here
                elif kind is _Walk.TOPO:
                    if color[topo_head] == _BLACK:
                        st.topo[u] = topo_head
                        tr.changes["topo"].extend((g, u, topo_head))
                    topo_head = u
                record((_FINISH, s, u, v, s_last, time if timed else topo_head))
                g += 1
                if s_prev[u] == u:
                    break
                s_last = s_prev[u]  # pop u
                s_prev[u] = u
            u = s_last
    tr.count, st.time, st.topo_head, st.u, st.v, st.s_last = g, time, topo_head, u, v, s_last


def _finish_low(st: _State, u: int, kind: _Walk) -> None:
    """At u's finish: low[u] takes its children's lows; the cut-vertex or bridge test on each child."""
    low, d = st.low, st.d
    low_u, root = low[u], st.pi[u] == u
    for c in st.children[u]:
        low_u = min(low_u, low[c])
        if kind is _Walk.CUT:
            if not root and low[c] >= d[u]:
                st.set("is_cut", u, 1)
        elif low[c] > d[u]:
            st.trace.edge_changes.append((st.trace.count, u, c))
            st.bridges.append((u, c))
    st.set("low", u, low_u)
    if kind is _Walk.CUT and root and st.child_cnt[u] > _TICK:
        st.set("is_cut", u, 1)


def _bit_rows(A: np.ndarray) -> list[list[int]]:
    """Per sample, per node u: the bit set of v with A[b, u, v] != 0, as a Python int. A: [B, N, N]."""
    packed = np.packbits(A != 0, axis=-1, bitorder="little")  # [B, N, ceil(N / 8)], bit v of row u
    if packed.shape[-1] <= 8:  # one 64-bit word per row
        words = np.zeros(packed.shape[:2] + (8,), np.uint8)
        words[..., :packed.shape[-1]] = packed
        return words.view("<u8")[..., 0].tolist()
    return [[int.from_bytes(row.tobytes(), "little") for row in sample] for sample in packed]


def _identity(B: int, n: int) -> np.ndarray:
    return np.tile(np.arange(n, dtype=np.int32), (B, 1))  # [B, N]: every node points to itself


def _walk_hints(tr: _Trace, *, timed: bool, root: bool = True) -> dict[str, np.ndarray]:
    """The hints of every walk: color, s_prev, (with `root`) s, u, v, s_last (and with the clock: d, f, time)."""
    B, n = tr.B, tr.n
    U, V, TIME = _Col.U, _Col.V, _Col.TIME
    gray = (tr.derived(_Push.DISCOVER, U, _GRAY), tr.derived(_Push.TREE, V, _GRAY))
    hints = {
        "color": tr.node("color", np.zeros((B, n), np.int8), *gray, tr.derived(_Push.FINISH, U, _BLACK),
                         classes=_COLORS),
        "s_prev": tr.node("s_prev", _identity(B, n), tr.derived(_Push.TREE, V, U), tr.pops()),
        "u": tr.mask_one(_Col.U),
        "v": tr.mask_one(_Col.V),
        "s_last": tr.mask_one(_Col.S_LAST),
    }
    if root:
        hints["s"] = tr.mask_one(_Col.S)
    if timed:
        zeros = np.zeros((B, n))
        hints.update(d=tr.node("d", zeros, tr.derived(_Push.DISCOVER, U, TIME)),
                     f=tr.node("f", zeros, tr.derived(_Push.FINISH, U, TIME)), time=tr.graph(TIME, np.float64))
    return hints


def _parents(tr: _Trace) -> np.ndarray:
    """pi_h of the timed walks: pi[v] = u on each tree edge."""
    return tr.node("pi", _identity(tr.B, tr.n), tr.derived(_Push.TREE, _Col.V, _Col.U))


def _lows(tr: _Trace) -> np.ndarray:
    """low of articulation points and bridges: d[u] at discovery, then the logged updates."""
    return tr.node("low", np.zeros((tr.B, tr.n)), tr.derived(_Push.DISCOVER, _Col.U, _Col.TIME))


def _run_walks(A: np.ndarray, kind: _Walk) -> tuple[_Trace, list[_State]]:
    """One full walk (roots 0..n-1 in order) per sample of A [B, N, N]."""
    n = A.shape[1]
    tr = _Trace(n)
    states = []
    for rows in _bit_rows(A):
        st = _State(n, tr)
        _walk(st, rows, range(n), kind)
        tr.end_sample()
        states.append(st)
    tr.assemble()
    return tr, states


@register("dfs", sample=samplers.graph_sampler(0.5, directed=True))
def dfs(A: np.ndarray):
    """Depth-first search (Moore, 1959) from every white node in index order. A: [B, N, N]."""
    B, n, _ = A.shape
    rec = Recorder("dfs", n, batch=B)
    rec.input(pos=positions(n, B), A=A, adj=graph_adjacency(A))
    tr, states = _run_walks(A, _Walk.TIMED)
    tr.finish(rec, pi_h=_parents(tr), **_walk_hints(tr, timed=True))
    rec.output(pi=np.array([st.pi for st in states]))
    return rec.finish()


@register("topological_sort", sample=samplers.graph_sampler(0.5, directed=True, acyclic=True))
def topological_sort(A: np.ndarray):
    """Topological sort (Knuth, 1973): finished nodes are prepended to a linked list. A: [B, N, N]."""
    B, n, _ = A.shape
    rec = Recorder("topological_sort", n, batch=B)
    rec.input(pos=positions(n, B), A=A, adj=graph_adjacency(A))
    tr, states = _run_walks(A, _Walk.TOPO)
    tr.finish(rec, topo_h=tr.node("topo", _identity(B, n)), topo_head_h=tr.mask_one(_Col.TOPO_HEAD),
              **_walk_hints(tr, timed=False))
    rec.output(topo=np.array([st.topo for st in states]), topo_head=np.array([st.topo_head for st in states]))
    return rec.finish()


@register("articulation_points", sample=samplers.graph_sampler(0.2))
def articulation_points(A: np.ndarray):
    """Cut vertices from DFS low points. A: [B, N, N] undirected."""
    B, n, _ = A.shape
    rec = Recorder("articulation_points", n, batch=B)
    rec.input(pos=positions(n, B), A=A, adj=graph_adjacency(A))
    tr, states = _run_walks(A, _Walk.CUT)
    zeros = np.zeros((B, n))
    tr.finish(rec, is_cut_h=tr.node("is_cut", np.zeros((B, n), np.float32)), pi_h=_parents(tr), low=_lows(tr),
              child_cnt=tr.node("child_cnt", zeros), **_walk_hints(tr, timed=True))
    rec.output(is_cut=np.array([st.is_cut for st in states]))
    return rec.finish()


@register("bridges", sample=samplers.graph_sampler(0.2))
def bridges(A: np.ndarray):
    """Bridges from DFS low points. A: [B, N, N] undirected."""
    B, n, _ = A.shape
    rec = Recorder("bridges", n, batch=B)
    adj = graph_adjacency(A)
    rec.input(pos=positions(n, B), A=A, adj=adj)
    tr, states = _run_walks(A, _Walk.BRIDGE)
    init = adj - 1  # [B, N, N]: edges 0 until found to be bridges, non-edges masked (-1), as the reference
    is_bridge = tr.constant(init)
    for g, u, v in tr.edge_changes:  # a few per sample: 1 from the push that first shows them on
        b, t = divmod(int(tr.row[g]), tr.T)
        end = tr.lengths[b]
        is_bridge[b, t:end, u, v] = is_bridge[b, t:end, v, u] = 1
    final = init.copy()
    for b, st in enumerate(states):
        for u, v in st.bridges:
            final[b, u, v] = final[b, v, u] = 1
    tr.finish(rec, is_bridge_h=is_bridge, pi_h=_parents(tr), low=_lows(tr), **_walk_hints(tr, timed=True))
    rec.output(is_bridge=final)
    return rec.finish()


@register("strongly_connected_components", sample=samplers.CommunitySampler(0.5), min_size=4)
def strongly_connected_components(A: np.ndarray):
    """Kosaraju's strongly connected components (Aho et al., 1974): a DFS of A, then a DFS of A
    transposed with roots in decreasing finish time; each tree of the second pass is one component,
    named by its root. A: [B, N, N]."""
    B, n, _ = A.shape
    rec = Recorder("strongly_connected_components", n, batch=B)
    rec.input(pos=positions(n, B), A=A, adj=graph_adjacency(A))
    A_t = np.swapaxes(A, 1, 2)
    tr = _Trace(n)
    states, second_pass = [], []  # per sample: the first push of the second pass
    for rows, rows_t in zip(_bit_rows(A), _bit_rows(A_t)):
        st = _State(n, tr)
        _walk(st, rows, range(n), _Walk.TIMED)
        for i in range(n):  # second pass: colors reset (s_prev is already back to the identity)
            st.set("color", i, _WHITE)
        order = sorted(range(n), key=st.f.__getitem__, reverse=True)  # finish times are all distinct
        second_pass.append(tr.count)
        _walk(st, rows_t, order, _Walk.TIMED, label=True)
        tr.end_sample()
        states.append(st)
    tr.assemble()
    phase = np.arange(len(tr.row)) >= np.repeat(second_pass, tr.lengths)  # [G] in the second pass
    tr.finish(rec, scc_id_h=tr.node("scc_id", _identity(B, n)), A_t=tr.constant(graph_adjacency(A_t)),
              phase=tr.graph(phase, np.float32), **_walk_hints(tr, timed=True))
    rec.output(scc_id=np.array([st.scc_id for st in states]))
    return rec.finish()


@register("dag_shortest_paths", sample=samplers.graph_sampler(0.5, directed=True, acyclic=True, weighted=True,
                                                                 source=True))
def dag_shortest_paths(A: np.ndarray, s: np.ndarray):
    """Single-source shortest paths in a DAG: a topological sort by DFS from s, then one relaxation
    of each node's out-edges in topological order. A: [B, N, N] weights (0 = no edge), s: [B].

    The walks run per sample; the relaxations (`_relax_in_topological_order`) then run for the whole
    batch at once, one list position per step."""
    B, n, _ = A.shape
    rec = Recorder("dag_shortest_paths", n, batch=B)
    rec.input(pos=positions(n, B), s=s, A=A, adj=graph_adjacency(A))
    tr = _Trace(n)
    heads, first = [], []  # per sample: the topo list from its head, and the push that shows its head
    for rows, source in zip(_bit_rows(A), np.asarray(s).tolist()):
        st = _State(n, tr)
        _walk(st, rows, [source], _Walk.TOPO)
        order = [st.topo_head]  # the list from its head (s, the last to finish) to its tail
        while st.topo[order[-1]] != order[-1]:
            order.append(st.topo[order[-1]])
        first.append(tr.count)
        pushes = [_OTHER, source, st.u, st.v, st.s_last, 0] * len(order)  # one push per list node
        pushes[_Col.TOPO_HEAD::_RECORD] = order
        tr.records.extend(pushes)
        tr.count += len(order)
        heads.append(order)
        tr.end_sample()
    tr.assemble()
    hints = _walk_hints(tr, timed=False, root=False)  # the source is an input here, not a hint
    pi, (g, j, d, i) = _relax_in_topological_order(A, heads, np.asarray(first))
    sources = np.array([order[0] for order in heads])  # the lists' heads: d = 0 and marked from the first relaxation
    mark = (np.concatenate([first, g]), np.concatenate([sources, j]), np.ones(B + len(g)))
    tr.finish(rec, pi_h=tr.node("pi", _identity(B, n), (g, j, i)), d=tr.node("d", np.zeros((B, n)), (g, j, d)),
              mark=tr.node("mark", np.zeros((B, n), np.float32), mark), topo_h=tr.node("topo", _identity(B, n)),
              topo_head_h=tr.mask_one(_Col.TOPO_HEAD), phase=tr.graph(tr.kind == _Push.OTHER, np.float32), **hints)
    rec.output(pi=pi)
    return rec.finish()


def _relax_in_topological_order(A: np.ndarray, heads: list[list[int]], first: np.ndarray) -> tuple[np.ndarray, _Events]:
    """Phase 1 of dag_shortest_paths for a batch: each sample relaxes the out-edges of every node of its
    topo list `heads[b]` but the last, in list order (A: [B, N, N] weights); ties keep the earlier
    parent (strict <). Step k of the loop is position k of every list; a node never relaxes itself (no
    self-loops), so its out-edges update independently.

    The list's k-th node is shown by push first[b] + k, so its relaxations are shown from the next
    push. Returns the final parents pi [B, N] and the relaxations as events (g, j, new d[j], i): each
    sets d[j], pi[j] = i and mark[j] = 1."""
    B, n, _ = A.shape
    rows = np.arange(B)
    size = np.array([len(h) for h in heads])
    order = np.zeros((B, int(size.max())), np.int64)  # [B, K] the lists, padded
    order[np.repeat(rows, size), np.arange(size.sum()) - np.repeat(np.cumsum(size) - size, size)] = np.concatenate(heads)
    d = np.zeros((B, n))
    pi = np.tile(np.arange(n), (B, 1))
    mark = np.zeros((B, n), bool)
    mark[rows, order[:, 0]] = True  # the source (d = 0)
    events = []
    for k in range(order.shape[1] - 1):
        active = k + 1 < size  # the k-th node is not its list's last
        head = order[:, k]
        w = A[rows, head]  # [B, N] out-edges of each head
        via = d[rows, head][:, None] + w
        relax = active[:, None] & (w != 0) & (~mark | (via < d))
        d = np.where(relax, via, d)
        pi = np.where(relax, head[:, None], pi)
        mark |= relax
        b, j = np.nonzero(relax)
        events.append((first[b] + k + 1, j, via[b, j], head[b]))
    g, j, dj, i = (np.concatenate([np.zeros(0)] + [e[c] for e in events]) for c in range(4))
    return pi, (g, j, dj, i)
