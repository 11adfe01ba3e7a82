"""Graph algorithms (CLRS chapters 22-25, plus DAG shortest paths), recorded with the reference's probes.

They are registered in the reference's order (google-deepmind/clrs specs.py), which is the order of
the `graphs` and `clrs30` task groups. Two engines run them.

Lockstep (bfs, bellman_ford, dijkstra, mst_prim, floyd_warshall): one loop iteration is one hint step
for every sample still running, and the textbook's inner loops over nodes become masked array
operations over [B, N] or [B, N, N]. Where the sequential code reads state it has just written in the
same step, the vectorized form must give the same answer; each function says why it does. They keep
each step's state arrays and build the [B, T, ...] storage arrays once at the end (`_StepHints`): the
recorder's per-step `rec.hint` would copy every step's state three times, which at n = 64 costs more
than the algorithm.

Depth-first walks (dfs, topological_sort, articulation_points, bridges, strongly_connected_components
(Kosaraju) and dag_shortest_paths) all run the reference's iterative depth-first search: an explicit
stack threaded through `s_prev` (s_prev[v] is the node below v on the stack, a root points to itself),
`s_last` its top, and a probe pushed at each of its natural points: a new root, a node's discovery, a
tree edge, a back edge (articulation points and bridges), a node's finish. `_walk` is that search,
written once; the algorithms differ only in the bookkeeping they ask of it (`_Walk`) and in what they
record. The search's control flow differs from sample to sample, so it is not batched: each sample runs
`_walk` on plain Python lists and logs, per probe point, one record of the per-step values (s, u, v,
s_last, time, ...) and, per node feature, only its changes (step, node, value). `_Trace` then assembles
the whole batch's [B, T, ...] hint arrays in a few vectorized passes (a forward fill of the changes
along T) and hands them to the recorder in one call. Every array is built with its padding already
zero (written once, or never), so the recorder leaves it alone. dag_shortest_paths' relaxation phase,
whose control flow is the same for every sample (one node of the topological order per step), runs for
the whole batch at once. mst_kruskal, whose steps also differ per sample, logs per sample the same way.

Samplers are the reference's: Erdos-Renyi graphs (`samplers.graph_sampler`), p = 0.5 except Kruskal,
articulation points and bridges (p = 0.2); directed for dfs, topological sort and DAG shortest paths
(acyclic for the last two), undirected otherwise; weighted for the shortest paths and spanning trees;
a uniformly drawn source where the reference function takes one; and the reference's community graphs
for strongly connected components.
"""

from __future__ import annotations

import enum
from array import array

import numpy as np

from relreason.data import samplers
from relreason.data.algorithms import CLRS_TEXT_LENGTHS, StreamForm, TextForm, register
from relreason.data.algorithms.sorting import one_hot
from relreason.data.probes import Recorder, fill_steps, graph_adjacency, positions
from relreason.data.specs import Type
from relreason.data.trajectory import storage_dtype


# --- the lockstep engine --------------------------------------------------------------------------

# Extract-min pushes nodes outside the queue past every queued one by this offset (the reference's
# `argsort(d + (1 - in_queue) * 1e9)[0]`); keeping the same float expression keeps the same ties.
_NOT_QUEUED = 1e9


class _StepHints:
    """A lockstep batch's hints, kept step by step and handed to the Recorder as [B, T, ...] arrays
    built once, in storage form (the per-step `rec.hint` path copies every value three times).

    `push` records one step for every sample: values [B, ...], or an index [B] for a mask_one or
    categorical (one-hot at `finish`). Values are kept by reference, so the caller must not change
    them in place afterwards (the algorithms here rebind their state arrays instead). `finish` passes
    each sample's number of steps; the Recorder zeroes the steps past it."""

    def __init__(self, rec: Recorder):
        self.rec = rec
        self.steps: dict[str, list[np.ndarray]] = {}

    def push(self, **values: np.ndarray) -> None:
        for name, x in values.items():
            self.steps.setdefault(name, []).append(x)

    def finish(self, lengths: np.ndarray, zero_padded: tuple[str, ...] = (), **ready: np.ndarray) -> None:
        """Records the hints; `ready` holds hint arrays built whole ([B, T, ...], storage form), those
        named in `zero_padded` with zeros past every length already."""
        B, n = len(lengths), self.rec.n
        arrays = dict(ready)
        for name, steps in self.steps.items():
            f = self.rec.spec[name]
            index = f.type in (Type.MASK_ONE, Type.CATEGORICAL) and np.ndim(steps[0]) == len(f.shape(n))
            out = np.empty((B, len(steps)) + np.shape(steps[0])[1:], np.int64 if index else storage_dtype(f))
            for t, x in enumerate(steps):  # one step at a time: np.stack converting the dtype is 2-3x slower
                out[:, t] = x
            arrays[name] = one_hot(out, f.shape(n)[-1]) if index else out
        self.rec.hint_sequence(lengths, zero_padded=zero_padded, **arrays)


def _extract_min(value: np.ndarray, in_queue: np.ndarray) -> np.ndarray:
    """The reference's extract-min `argsort(value + (1 - in_queue) * 1e9)[0]` per row of value and
    in_queue [B, N], as indices [B].

    argmin gives the same node whenever the least queued value is unique (a queued value is far
    below 1e9, so nodes outside the queue can be left at +inf); rows where it is not are argsorted on
    the reference's own keys (argsort, unlike argmin, need not pick the first of equal keys). A row
    with nothing queued stops its sample, so its pick is moot."""
    keys = np.where(in_queue, value, np.inf)
    u = keys.argmin(axis=1)
    least = keys[np.arange(len(keys)), u]
    queued = np.where(least < np.inf, least, np.nan)  # NaN equals nothing: rows with no queue drop out
    hits = keys == queued[:, None]  # [B, N]: one hit per queued row unless its least value is tied
    if np.count_nonzero(hits) > np.count_nonzero(least < np.inf):
        ties = np.count_nonzero(hits, axis=1) > 1
        u[ties] = np.argsort(value[ties] + (~in_queue[ties]) * _NOT_QUEUED, axis=1)[:, 0]
    return u


# --- the depth-first walks ------------------------------------------------------------------------

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


# --- the algorithms, in the reference's order -----------------------------------------------------

@register(
    "dfs", family="graphs",
    inputs="pos N sc, A E sc, adj E m", outputs="pi N ptr",
    hints="pi_h N ptr, color N cat, d N sc, f N sc, s_prev N ptr, s N m1, u N m1, v N m1, s_last N m1, time G sc",
    classes={"color": _COLORS},
    sample=samplers.graph_sampler(0.5, directed=True),
    text=TextForm(integer_inputs={"A"}, train_lengths=CLRS_TEXT_LENGTHS[:8], val_stop=21))
def dfs(A: np.ndarray):
    """Depth-first search (Moore, 1959) from every white node in index order. A: [B, N, N]."""
    B, n, _ = A.shape
    rec = Recorder("dfs", n, batch=B)
    rec.input(pos=positions(n, B), A=A, adj=graph_adjacency(A))
    tr, states = _run_walks(A, _Walk.TIMED)
    tr.finish(rec, pi_h=_parents(tr), **_walk_hints(tr, timed=True))
    rec.output(pi=np.array([st.pi for st in states]))
    return rec.finish()


@register(
    "bfs", family="graphs",
    inputs="pos N sc, s N m1, A E sc, adj E m", outputs="pi N ptr", hints="reach_h N m, pi_h N ptr",
    sample=samplers.graph_sampler(0.5, source=True),
    text=TextForm(integer_inputs={"A"}, train_lengths=CLRS_TEXT_LENGTHS, val_stop=42))
def bfs(A: np.ndarray, s: np.ndarray):
    """Breadth-first search (Moore, 1959) from source s. A: [B, N, N] (edge where A > 0), s: [B].

    One hint per frontier expansion, the last repeating the final state (at most N hints). A node
    first reached in a step takes as parent the lowest reached node with an edge to it (the
    sequential `for i, for j` visits i in increasing order)."""
    B, n, _ = A.shape
    rec = Recorder("bfs", n, batch=B)
    nodes = np.arange(n)
    rec.input(pos=positions(n, B), s=s, A=A, adj=graph_adjacency(A))
    edge = A > 0  # [B, I, J]
    reach = nodes == s[:, None]  # [B, N]
    pi = np.tile(nodes, (B, 1))  # [B, N]
    orphan = ~reach  # only non-source nodes adopt a parent
    hints = _StepHints(rec)
    lengths = np.zeros(B, np.int64)
    running = np.ones(B, bool)
    while running.any():
        hints.push(reach_h=reach, pi_h=pi)
        lengths += running
        via = edge & reach[:, :, None] & running[:, None, None]  # [B, I, J]
        hit = via.any(axis=1)  # [B, J]
        # pi[j] == j holds for a non-source j exactly until it is first reached.
        adopt = hit & (pi == nodes) & orphan
        pi = np.where(adopt, via.argmax(axis=1), pi)  # argmax of a bool axis = lowest i
        grown = reach | hit
        running &= np.any(grown != reach, axis=1)
        reach = grown
    hints.finish(lengths)
    rec.output(pi=pi)
    return rec.finish()


@register(
    "topological_sort", family="graphs",
    inputs="pos N sc, A E sc, adj E m", outputs="topo N ptr, topo_head N m1",
    hints="topo_h N ptr, topo_head_h N m1, color N cat, s_prev N ptr, s N m1, u N m1, v N m1, s_last N m1",
    classes={"color": _COLORS},
    sample=samplers.graph_sampler(0.5, directed=True, acyclic=True),
    text=TextForm(integer_inputs={"A"}, train_lengths=CLRS_TEXT_LENGTHS[:8], val_stop=22))
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


@register(
    "articulation_points", family="graphs",
    inputs="pos N sc, A E sc, adj E m", outputs="is_cut N m",
    hints=("is_cut_h N m, pi_h N ptr, color N cat, d N sc, f N sc, low N sc, child_cnt N sc, s_prev N ptr, "
           "s N m1, u N m1, v N m1, s_last N m1, time G sc"),
    classes={"color": _COLORS},
    sample=samplers.graph_sampler(0.2),
    text=TextForm(integer_inputs={"A"}, train_lengths=CLRS_TEXT_LENGTHS[:7], val_stop=20),
    stream=StreamForm(sparse=True))
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


@register(
    "bridges", family="graphs",
    inputs="pos N sc, A E sc, adj E m", outputs="is_bridge E m",
    hints=("is_bridge_h E m, pi_h N ptr, color N cat, d N sc, f N sc, low N sc, s_prev N ptr, s N m1, u N m1, "
           "v N m1, s_last N m1, time G sc"),
    classes={"color": _COLORS},
    sample=samplers.graph_sampler(0.2),
    text=TextForm(integer_inputs={"A"}, train_lengths=CLRS_TEXT_LENGTHS[:2], val_stop=8),
    stream=StreamForm(sparse=True))
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


@register(
    "strongly_connected_components", family="graphs",
    inputs="pos N sc, A E sc, adj E m", outputs="scc_id N ptr",
    hints=("scc_id_h N ptr, A_t E m, color N cat, d N sc, f N sc, s_prev N ptr, s N m1, u N m1, v N m1, "
           "s_last N m1, time G sc, phase G m"),
    classes={"color": _COLORS}, min_size=4,
    sample=samplers.CommunitySampler(0.5),
    text=TextForm(train_lengths=CLRS_TEXT_LENGTHS[:6], val_stop=17))
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


class KruskalPhase(enum.IntEnum):
    """Classes of Kruskal's `phase` hint (graph categorical of 3). The phase of a step is also what
    the sample does next, so it doubles as the state of the lockstep loop."""

    UNION = 0  # the initial state and the step that joins (or not) the two trees; next: take an edge
    FIND_U = 1  # a new edge (u, v), then each step up from u towards its root
    FIND_V = 2  # each step up from v towards its root


def _sorted_edges(A: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each graph's edges i < j with A[i, j] > 0 in Kruskal's order: listed row-major, then argsorted
    by weight. Returns heads, tails [B, E] (zero past each count) and counts [B].

    One stable sort by (graph, weight) orders every graph at once; it equals the reference's own
    (not necessarily stable) argsort unless two edges of a graph weigh the same, and those graphs
    are re-sorted with exactly the reference's call."""
    B = A.shape[0]
    g, i, j = np.nonzero(np.triu(A > 0, k=1))  # C order: by graph, then row-major
    w = A[g, i, j]
    order = np.lexsort((w, g))  # stable: ties keep the row-major order
    g, i, j, w = g[order], i[order], j[order], w[order]
    counts = np.bincount(g, minlength=B)
    start = np.cumsum(counts) - counts
    slot = np.arange(len(g)) - start[g]
    for b in np.unique(g[1:][(g[1:] == g[:-1]) & (w[1:] == w[:-1])]):
        lo, hi = start[b], start[b] + counts[b]
        bi, bj = np.nonzero(np.triu(A[b] > 0, k=1))
        tie_order = np.argsort(A[b][bi, bj])
        i[lo:hi], j[lo:hi] = bi[tie_order], bj[tie_order]
    width = max(1, int(counts.max()))
    heads = np.zeros((B, width), np.int64)
    tails = np.zeros((B, width), np.int64)
    heads[g, slot], tails[g, slot] = i, j
    return heads, tails, counts


@register(
    "mst_kruskal", family="graphs",
    inputs="pos N sc, A E sc, adj E m", outputs="in_mst E m",
    hints="in_mst_h E m, pi N ptr, u N m1, v N m1, root_u N m1, root_v N m1, mask_u N m, mask_v N m, phase G cat",
    classes={"phase": len(KruskalPhase)},
    sample=samplers.graph_sampler(0.2, weighted=True),
    text=TextForm(train_lengths=CLRS_TEXT_LENGTHS[:3], val_stop=11),
    stream=StreamForm(sparse=True))
def mst_kruskal(A: np.ndarray):
    """Kruskal's minimum spanning forest (1956) with a path-compressing union-find. A: [B, N, N].

    Per edge (u, v) in weight order the reference records: one hint on taking the edge, one per
    step from u up to its root (every node passed so far re-pointed to the new ancestor), the same
    from v, and one for the union (the lower root is attached under the higher); a root already
    final falls through to the next stage in the same step. The steps differ from sample to sample
    (~300 at n = 64, a few array operations each), so each sample runs `_kruskal_steps` on plain
    lists, logging per step its probe indices and the changes of pi and the masks, and the batch's
    [B, T, ...] hints are built from the logs at once (`probes.fill_steps`).

    The [N, N] hint `in_mst_h` only grows, so it is written once at the end from the step at which
    each tree edge joined (at n = 64 a trajectory has ~300 steps, 6 MB per sample as float32)."""
    B, n, _ = A.shape
    rec = Recorder("mst_kruskal", n, batch=B)
    rec.input(pos=positions(n, B), A=A, adj=graph_adjacency(A))
    heads, tails, counts = _sorted_edges(A)
    log = _KruskalLog()
    for h, t, c in zip(heads.tolist(), tails.tolist(), counts.tolist()):
        _kruskal_steps(h[:c], t[:c], n, log)
    lengths = log.counts("steps") // 5
    T = int(lengths.max())
    row = np.repeat(np.arange(B) * T, lengths) + np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    steps = np.zeros((B * T, 5), np.int64)  # per step u, v, root_u, root_v, phase (zero past each length)
    steps[row] = np.frombuffer(log.steps, np.int64).reshape(-1, 5)
    steps = steps.reshape(B, T, 5)
    joined = log.events("joins")  # sample, step, u, v of each union that joined two trees
    hints = {name: one_hot(steps[..., k], 3 if name == "phase" else n)
             for k, name in enumerate(("u", "v", "root_u", "root_v", "phase"))}
    events = {name: log.events(name) for name in ("pi", "mask_u", "mask_v")}
    hints.update(pi=fill_steps(np.tile(np.arange(n, dtype=np.int32), (B, 1)), lengths, T, *events["pi"]),
                 mask_u=fill_steps(np.zeros((B, n), np.float32), lengths, T, *events["mask_u"]),
                 mask_v=fill_steps(np.zeros((B, n), np.float32), lengths, T, *events["mask_v"]))
    in_mst_h, in_mst = _grown_tree(*joined, lengths, T, n)
    rec.hint_sequence(lengths, zero_padded=("in_mst_h", "pi", "mask_u", "mask_v"), in_mst_h=in_mst_h, **hints)
    rec.output(in_mst=in_mst)
    return rec.finish()


class _KruskalLog:
    """A batch's runs, sample after sample: per step (u, v, root_u, root_v, phase), flat; per change of
    pi, mask_u or mask_v (step, node, value), flat; per union that joined two trees (step, u, v), flat.
    `ends[b]`: the logs' lengths after sample b, in `_KruskalLog.NAMES` order (the logs are arrays:
    read without a copy)."""

    NAMES = ("steps", "pi", "mask_u", "mask_v", "joins")

    def __init__(self):
        self.steps, self.pi, self.mask_u, self.mask_v, self.joins = (array("q") for _ in self.NAMES)
        self.ends: list[tuple[int, ...]] = []

    def end_sample(self) -> None:
        self.ends.append((len(self.steps), len(self.pi), len(self.mask_u), len(self.mask_v), len(self.joins)))

    def counts(self, name: str) -> np.ndarray:
        """[B] the values each sample logged in `name`."""
        return np.diff(np.array(self.ends, np.int64)[:, self.NAMES.index(name)], prepend=0)

    def events(self, name: str) -> tuple[np.ndarray, ...]:
        """One kind of change over the batch: sample, step, node, value [E] each."""
        sample = np.repeat(np.arange(len(self.ends)), self.counts(name) // 3)
        step, node, value = np.frombuffer(getattr(self, name), np.int64).reshape(-1, 3).T
        return sample, step, node, value


def _kruskal_steps(heads: list[int], tails: list[int], n: int, log: _KruskalLog) -> None:
    """The reference's Kruskal probes for one sample whose sorted edges are (heads[e], tails[e]), appended to `log`."""
    union_, find_u, find_v = int(KruskalPhase.UNION), int(KruskalPhase.FIND_U), int(KruskalPhase.FIND_V)
    pi = list(range(n))
    push, moved = log.steps.extend, log.pi.extend  # bound once: the loop runs ~300 times per sample at n = 64
    push((0, 0, 0, 0, union_))  # the initial state: every probe index 0
    mask_u: list[int] = []
    mask_v: list[int] = []
    t = 0  # the step being pushed
    for u, v in zip(heads, tails):
        t += 1  # take the edge: the masks become {u} and {v}
        _restart(mask_u, u, t, log.mask_u)
        _restart(mask_v, v, t, log.mask_v)
        mask_u, mask_v = [u], [v]
        root_u, root_v, phase = u, v, find_u
        push((u, v, root_u, root_v, phase))
        while True:
            t += 1
            if phase == find_u and pi[root_u] != root_u:  # one step up from u
                root_u = pi[root_u]
                _climb(pi, mask_u, root_u, t, moved, log.mask_u)
            elif pi[root_v] != root_v:  # u's root is final: one step up from v
                root_v, phase = pi[root_v], find_v
                _climb(pi, mask_v, root_v, t, moved, log.mask_v)
            else:  # both roots final: the lower goes under the higher
                if root_u != root_v:
                    low, high = min(root_u, root_v), max(root_u, root_v)
                    pi[low] = high
                    moved((t, low, high))
                    log.joins.extend((t, u, v))
                push((u, v, root_u, root_v, union_))
                break
            push((u, v, root_u, root_v, phase))
    log.end_sample()


def _restart(mask: list[int], node: int, t: int, changes: array) -> None:
    """A new edge's mask is {node}: the other members leave it at step t."""
    for x in mask:
        if x != node:
            changes.extend((t, x, 0))
    if node not in mask:
        changes.extend((t, node, 1))


def _climb(pi: list[int], mask: list[int], root: int, t: int, moved, mask_changes: array) -> None:
    """One step of a find: every node passed so far points to the new ancestor `root`, which joins them
    (`moved` logs a change of pi)."""
    for x in mask:
        if pi[x] != root:
            pi[x] = root
            moved((t, x, root))
    if root not in mask:
        mask.append(root)
        mask_changes.extend((t, root, 1))


_TREE_CHUNK_BYTES = 1 << 20  # boolean buffer of _grown_tree: ~1 MB, cache-sized


def _grown_tree(sample: np.ndarray, step: np.ndarray, u: np.ndarray, v: np.ndarray, lengths: np.ndarray, T: int,
                n: int) -> tuple[np.ndarray, np.ndarray]:
    """Kruskal's tree edges over time from the steps they joined at (edge (u[e], v[e]) of sample[e]
    at step[e]): `in_mst_h` [B, T, N, N] float32 (each edge set from its step to the sample's last,
    zero past it) and the final `in_mst` [B, N, N].

    About _TREE_CHUNK_BYTES of samples at a time: one comparison, step >= joined-at, and one mask of the steps
    past each sample's length, into a boolean buffer that stays in cache, then one copy into the
    float32 array (comparing straight into float32 is twice as slow): every output byte is written
    once, with no Python step per sample (2.7x faster than per sample at n=16, where most of the
    [B, T] grid is padding: T is the batch's longest trajectory)."""
    B = len(lengths)
    never = np.int32(T)  # the join step of a non-tree edge: beyond every step
    joined_at = np.full((B, n, n), never, np.int32)
    joined_at[sample, u, v] = joined_at[sample, v, u] = step
    in_mst_h = np.empty((B, T, n, n), np.float32)
    steps = np.arange(T, dtype=np.int32)
    chunk = max(1, min(B, _TREE_CHUNK_BYTES // max(1, T * n * n)))
    grown = np.empty((chunk, T, n, n), bool)
    for s in range(0, B, chunk):
        e = min(s + chunk, B)
        g = grown[:e - s]
        np.greater_equal(steps[None, :, None, None], joined_at[s:e, None], out=g)  # (c, T, N, N)
        g &= (steps[None, :] < lengths[s:e, None])[:, :, None, None]  # zero past each sample's end
        in_mst_h[s:e] = g
    return in_mst_h, joined_at < never


def _extract_min_tree(name: str, A: np.ndarray, s: np.ndarray, prim: bool):
    """Dijkstra and Prim share their loop: extract the queued node of least value u, mark it, then
    relax every unmarked neighbour v (value d[u] + A[u, v] for Dijkstra, A[u, v] for Prim).

    One hint for the initial state, then one per extracted node (at most N + 1 hints); a sample
    stops when its queue is empty. The relaxation of u never touches u itself (it is marked), so
    reading d[u] once per step is what the sequential loop reads."""
    B, n, _ = A.shape
    rec = Recorder(name, n, batch=B)
    rows, nodes = np.arange(B), np.arange(n)
    rec.input(pos=positions(n, B), s=s, A=A, adj=graph_adjacency(A))
    value_name = "key" if prim else "d"
    value = np.zeros((B, n))  # d (Dijkstra) or key (Prim)
    mark = np.zeros((B, n), bool)
    in_queue = nodes == s[:, None]
    pi = np.tile(nodes, (B, 1))
    hints = _StepHints(rec)
    hints.push(pi_h=pi, mark=mark, in_queue=in_queue, u=s, **{value_name: value})
    lengths = np.ones(B, np.int64)
    running = np.ones(B, bool)
    for _ in range(n):  # at most one extraction per node
        u = _extract_min(value, in_queue)  # [B]
        running &= in_queue[rows, u]
        if not running.any():
            break
        lengths += running
        extracted = running[:, None] & (nodes == u[:, None])  # [B, N]
        mark = mark | extracted
        in_queue = in_queue & ~extracted
        w = A[rows, u]  # [B, V]: edges out of u
        cand = w if prim else value[rows, u][:, None] + w
        relax = running[:, None] & (w != 0) & ~mark & (~in_queue | (cand < value))
        pi = np.where(relax, u[:, None], pi)
        value = np.where(relax, cand, value)
        in_queue = in_queue | relax
        hints.push(pi_h=pi, mark=mark, in_queue=in_queue, u=u, **{value_name: value})
    hints.finish(lengths)
    rec.output(pi=pi)
    return rec.finish()


@register(
    "mst_prim", family="graphs",
    inputs="pos N sc, s N m1, A E sc, adj E m", outputs="pi N ptr",
    hints="pi_h N ptr, key N sc, mark N m, in_queue N m, u N m1",
    sample=samplers.graph_sampler(0.5, weighted=True, source=True),
    text=TextForm(train_lengths=CLRS_TEXT_LENGTHS[:9], val_stop=27))
def mst_prim(A: np.ndarray, s: np.ndarray):
    """Prim's minimum spanning tree (1957) grown from s. A: [B, N, N] weights (0 = no edge), s: [B]."""
    return _extract_min_tree("mst_prim", A, s, prim=True)


@register(
    "bellman_ford", family="graphs",
    inputs="pos N sc, s N m1, A E sc, adj E m", outputs="pi N ptr", hints="pi_h N ptr, d N sc, msk N m",
    sample=samplers.graph_sampler(0.5, weighted=True, source=True),
    text=TextForm(train_lengths=CLRS_TEXT_LENGTHS, val_stop=33),
    groups=("core8",))
def bellman_ford(A: np.ndarray, s: np.ndarray):
    """Bellman-Ford (1958) from source s. A: [B, N, N] weights (0 = no edge), s: [B].

    One hint per round (the first the initial state, the last repeating the final one). A round
    relaxes every edge (u, v) from the previous round's d of reached nodes u; with unreached nodes and
    missing edges at +inf, that is one [B, U, V] sum and its argmin over u (ties: the lowest u)."""
    B, n, _ = A.shape
    rec = Recorder("bellman_ford", n, batch=B)
    rows = np.arange(B)
    rec.input(pos=positions(n, B), s=s, A=A, adj=graph_adjacency(A))
    d = np.zeros((B, n))
    pi = np.tile(np.arange(n), (B, 1))
    msk = np.zeros((B, n), bool)
    msk[rows, s] = True
    weight = np.where(A != 0, A, np.inf)  # [B, U, V]
    hints = _StepHints(rec)
    lengths = np.zeros(B, np.int64)
    running = np.ones(B, bool)
    while running.any():
        hints.push(pi_h=pi, d=d, msk=msk)
        lengths += running
        cand = np.where(msk, d, np.inf)[:, :, None] + weight  # [B, U, V] prev d[u] + A[u, v]
        arg = cand.argmin(axis=1)  # [B, V] the lowest u among the best
        best = np.take_along_axis(cand, arg[:, None], axis=1)[:, 0]
        reached = (best < np.inf) & running[:, None]
        better = reached & (~msk | (best < d))
        new_d = np.where(better, best, d)
        pi = np.where(better, arg, pi)
        msk = msk | reached
        running &= ~np.all(new_d == d, axis=1)
        d = new_d
    hints.finish(lengths)
    rec.output(pi=pi)
    return rec.finish()


@register(
    "dijkstra", family="graphs",
    inputs="pos N sc, s N m1, A E sc, adj E m", outputs="pi N ptr",
    hints="pi_h N ptr, d N sc, mark N m, in_queue N m, u N m1",
    sample=samplers.graph_sampler(0.5, weighted=True, source=True),
    text=TextForm(train_lengths=CLRS_TEXT_LENGTHS[:9], val_stop=26))
def dijkstra(A: np.ndarray, s: np.ndarray):
    """Dijkstra's shortest paths (1959) from source s. A: [B, N, N] weights (0 = no edge), s: [B]."""
    return _extract_min_tree("dijkstra", A, s, prim=False)


@register(
    "dag_shortest_paths", family="graphs",
    inputs="pos N sc, s N m1, A E sc, adj E m", outputs="pi N ptr",
    hints=("pi_h N ptr, d N sc, mark N m, topo_h N ptr, topo_head_h N m1, color N cat, s_prev N ptr, u N m1, "
           "v N m1, s_last N m1, phase G m"),
    classes={"color": _COLORS},
    sample=samplers.graph_sampler(0.5, directed=True, acyclic=True, weighted=True, source=True),
    text=TextForm(train_lengths=CLRS_TEXT_LENGTHS[:7], val_stop=20))
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
    start = np.asarray(first) - np.asarray(tr.starts[:-1])  # [B] the step that shows each list's head
    pi, relaxed = _relax_in_topological_order(A, heads, start, tr.lengths, tr.T)
    tr.finish(rec, **relaxed, topo_h=tr.node("topo", _identity(B, n)), topo_head_h=tr.mask_one(_Col.TOPO_HEAD),
              phase=tr.graph(tr.kind == _Push.OTHER, np.float32), **hints)
    rec.output(pi=pi)
    return rec.finish()


def _relax_in_topological_order(A: np.ndarray, heads: list[list[int]], start: np.ndarray, lengths: np.ndarray,
                                T: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Phase 1 of dag_shortest_paths for a batch: each sample relaxes the out-edges of every node of its
    topo list `heads[b]` but the last, in list order (A: [B, N, N] weights); ties keep the earlier
    parent (strict <). Step k of the loop is position k of every list; a node never relaxes itself (no
    self-loops), so its out-edges update independently.

    Step start[b] + k of sample b shows its list's k-th node and the state after the relaxations of
    nodes 0..k-1 (the list's head, the source, is marked with d = 0 from step start[b]); the steps
    before show the initial state and those from lengths[b] on are zero. So the loop writes each
    state straight into its steps of the hints pi_h, d and mark [B, T, N]. Returns the final parents
    pi [B, N] and those hints."""
    B, n, _ = A.shape
    size = np.array([len(h) for h in heads])
    # Samples by list size, longest first: at loop step k the samples still relaxing are a prefix.
    by_size = np.argsort(-size, kind="stable")
    size, start, heads = size[by_size], np.asarray(start)[by_size], [heads[b] for b in by_size.tolist()]
    rows = np.arange(B)
    order = np.zeros((B, int(size.max())), np.int64)  # [B, K] the lists, padded
    order[np.repeat(rows, size), np.arange(size.sum()) - np.repeat(np.cumsum(size) - size, size)] = np.concatenate(heads)
    d = np.zeros((B, n))
    pi = np.tile(np.arange(n), (B, 1))
    mark = np.zeros((B, n), bool)
    mark[rows, order[:, 0]] = True  # the source (d = 0)
    past = np.arange(T) >= np.asarray(lengths)[:, None]  # [B, T] padding
    hints = {"pi_h": np.empty((B, T, n), np.int32), "d": np.zeros((B, T, n)), "mark": np.zeros((B, T, n), np.float32)}
    hints["pi_h"][...] = np.arange(n)  # the initial state at every step; the loop overwrites its own steps
    live = np.searchsorted(-size, -np.arange(order.shape[1]), side="right")  # [K] samples with a k-th node
    for k, m in enumerate(live.tolist()):
        at = start[:m] + k
        for name, x in (("pi_h", pi), ("d", d), ("mark", mark)):
            hints[name][by_size[:m], at] = x[:m]
        if k == order.shape[1] - 1:
            break
        head = order[:m, k]
        w = A[by_size[:m], head]  # [m, N] out-edges of each head
        via = d[rows[:m], head][:, None] + w
        dm = d[:m]
        relax = (k + 1 < size[:m])[:, None] & (w != 0) & (~mark[:m] | (via < dm))  # the list's last node relaxes nothing
        d[:m] = np.where(relax, via, dm)
        pi[:m] = np.where(relax, head[:, None], pi[:m])
        mark[:m] |= relax
    for x in hints.values():
        x[past] = 0
    final = np.empty_like(pi)
    final[by_size] = pi
    return final, hints


@register(
    "floyd_warshall", family="graphs",
    inputs="pos N sc, A E sc, adj E m", outputs="Pi E ptr", hints="Pi_h E ptr, D E sc, msk E m, k N m1",
    sample=samplers.graph_sampler(0.5, weighted=True),
    text=TextForm(train_lengths=CLRS_TEXT_LENGTHS[:3], val_stop=12))
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
    Pi = np.ascontiguousarray(np.broadcast_to(np.arange(n)[:, None], (B, n, n)))  # Pi[i, j] = i
    msk = (A + np.eye(n)) != 0  # [B, N, N]; the reference's `graph(A)` exactly (diagonal set)
    hints = _StepHints(rec)
    for k in range(n):
        hints.push(Pi_h=Pi, D=D, msk=msk, k=np.full(B, k))
        through = msk[:, :, k, None] & msk[:, None, k, :]  # [B, I, J]: both legs i->k, k->j known
        cand = D[:, :, k, None] + D[:, None, k, :]
        better = through & (~msk | (cand < D))
        D = np.where(better, cand, D)
        Pi = np.where(better, Pi[:, None, k, :], Pi)
        msk = msk | through
    hints.finish(np.full(B, n))
    rec.output(Pi=Pi)
    return rec.finish()
