"""Graph families for the graph algorithms: other distributions than the benchmark's own ER sampler.

CLRS-30 draws every graph algorithm's input from an Erdos-Renyi sampler (`relreason.data.samplers`),
so a model is only ever tested on one kind of graph. SALSA-CLRS (Minder et al. 2023) tests on ER,
Watts-Strogatz and Delaunay graphs up to n = 1,600; this module offers those and more, each a
registered family with documented parameters:

    spec = parse_graph("ws:k=4,p=0.1")        # GraphSpec, or None for "clrs" (the benchmark's sampler)
    adj = spec.adjacency(rng, 64)              # bool [N, N], symmetric, no self-loops
    A = spec.draw(rng, 64, weighted=True)      # an algorithm's graph input, drawn as the benchmark draws

`relreason generate|train|eval --graph ws:k=4,p=0.1` use it through the samplers' `graph` option.

Parameters take a value (`p=0.1`), a range drawn uniformly per graph (`p=0.05..0.2`, numbers only) or a
choice drawn uniformly per graph (`k=4|6|8`). Defaults follow SALSA-CLRS where it has the family
(`salsaclrs/data.py` SALSA_CLRS_DATASETS and `sampler.py` of github.com/jkminder/SALSA-CLRS).

From a family graph to an algorithm's input (`GraphSpec.draw`), in this draw order:
1. parameters given as ranges or choices are drawn;
2. the family draws its undirected graph in the structure's own node order (ring order, rows of the
   grid, arrival order);
3. the nodes are relabelled by a uniform random permutation, so a node's index (the `pos` input) says
   nothing about its place in the structure, as in the benchmark's exchangeable ER graphs;
4. directed algorithms (dfs, strongly_connected_components) get each edge in one direction, chosen by
   a fair coin per edge; acyclic ones (topological_sort, dag_shortest_paths) get every edge directed
   from the earlier to the later node of a uniformly random order (the benchmark: upper triangle,
   then a random permutation), so the graph is a DAG whose order is independent of `pos`;
5. weighted algorithms get the benchmark's weights (`samplers.random_weights`: U[0, 1), symmetrised
   as sqrt(W W^T + 1e-3) when undirected).
Family graphs have no self-loops (the benchmark's undirected ER has them with probability p, an
artifact of `mat *= mat.T`; `adj` sets the diagonal in every case). Every graph algorithm here is
defined on disconnected graphs (unreached nodes point to themselves, Kruskal gives a spanning forest),
so no family is conditioned on connectivity unless its parameters ask (`er:connected=1`).

Everything is vectorised numpy except where each step depends on the last (Watts-Strogatz rewiring,
preferential attachment, Pruefer decoding, Delaunay insertion), which loop over nodes in O(N) Python
steps; at n = 1,600 a graph takes 2-40 ms of CPU on the development machine (scripts/bench_families.py).
"""

from __future__ import annotations

import difflib
import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from relreason.data.samplers import RandomState, random_weights
from relreason.errors import RelreasonError
from relreason.registry import Registry

BENCHMARK = "clrs"  # `--graph clrs`: the benchmark's own sampler (its ER graphs, its SCC communities)
MAX_REDRAWS = 100  # `er:connected=1` gives up after this many disconnected draws (one-line error)


# -- parameter values ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Uniform:
    """A number drawn per graph from U[low, high) (written `low..high`)."""

    low: float
    high: float

    def __str__(self) -> str:
        return f"{format_value(self.low)}..{format_value(self.high)}"


@dataclass(frozen=True)
class OneOf:
    """A value drawn per graph uniformly from `values` (written `a|b|c`)."""

    values: tuple

    def __str__(self) -> str:
        return "|".join(format_value(v) for v in self.values)


def format_value(v: Any) -> str:
    """A parameter value as `--graph` writes it (`0.1`, `1..3`, `4|6|8`, booleans as 0 / 1)."""
    if isinstance(v, (Uniform, OneOf)):
        return str(v)
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, float):
        text = repr(v)  # the shortest text that reads back as the same float: labels name the value used
        return text[:-2] if text.endswith(".0") else text
    return str(v)


def _members(v: Any) -> tuple:
    """The fixed values a parameter value can take (both bounds of a range)."""
    if isinstance(v, Uniform):
        return (v.low, v.high)
    if isinstance(v, OneOf):
        return v.values
    return (v,)


def _draw(rng: RandomState, v: Any) -> Any:
    if isinstance(v, Uniform):
        return float(rng.uniform(v.low, v.high))
    if isinstance(v, OneOf):
        return v.values[rng.randint(0, len(v.values))]
    return v


# -- families and their parameters ---------------------------------------------------------------

@dataclass(frozen=True)
class Param:
    """One parameter of a family: its type, default and meaning."""

    name: str
    kind: type  # int, float or bool (written 0 / 1)
    default: Any  # a value, a Uniform or a OneOf; None: unset, an alternative to another parameter
    doc: str  # what it means; where the default comes from
    check: Callable[[Any], str | None] = lambda v: None  # what is wrong with one fixed value, or None


@dataclass(frozen=True)
class GraphFamily:
    """A registered family: `build(rng, n, **params)` -> bool [N, N], symmetric, no self-loops."""

    name: str
    build: Callable[..., np.ndarray]
    params: tuple[Param, ...]
    doc: str  # one paragraph: the model, its defining property, its defaults' source
    min_size: Callable[[dict], int] = lambda params: 2  # smallest n for these (resolved) parameters
    alternatives: tuple[str, ...] = ()  # at most one of these is given; unset ones have default None
    # degree(n, **fixed parameters), as `build` takes them: the expected mean degree at n nodes (None: not known)
    degree: Callable[..., float] | None = None

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.params) or "no parameters"
        raise RelreasonError(f"graph family {self.name} has no parameter {name!r}", f"{self.name} takes: {known}")


FAMILIES: Registry[GraphFamily] = Registry("graph family", "relreason list graphs")


def register_family(name: str, params: tuple[Param, ...] = (), min_size: Callable[[dict], int] | None = None,
                    alternatives: tuple[str, ...] = (), degree: Callable[..., float] | None = None) -> Callable:
    """Decorator registering `build(rng, n, **params)` as graph family `name` (its docstring is its doc);
    `degree(n, **params)`: the expected mean degree of its graphs (what memory estimates read)."""

    def add(build: Callable) -> Callable:
        doc = " ".join((build.__doc__ or "").split())
        extra = {"min_size": min_size} if min_size is not None else {}
        FAMILIES.register(name, GraphFamily(name, build, params, doc, alternatives=alternatives, degree=degree,
                                            **extra))
        return build

    return add


def _probability(v) -> str | None:
    return None if 0.0 <= v <= 1.0 else "must be a probability in [0, 1]"


def _positive(v) -> str | None:
    return None if v > 0 else "must be positive"


def _at_least_one(v) -> str | None:
    return None if v >= 1 else "must be at least 1"


def _even(v) -> str | None:
    return None if v >= 2 and v % 2 == 0 else "must be an even integer >= 2 (k/2 neighbours on each side)"


# -- the graph specification a sampler carries -----------------------------------------------------

@dataclass(frozen=True)
class GraphSpec:
    """A family with its resolved parameters; `str(spec)` is the canonical text (every parameter, in
    the family's order), which names it in labels, dataset metadata and file names."""

    family: str
    params: tuple[tuple[str, Any], ...] = field(default=())

    def __str__(self) -> str:
        body = ",".join(f"{k}={format_value(v)}" for k, v in self.params)
        return f"{self.family}:{body}" if body else self.family

    @property
    def values(self) -> dict[str, Any]:
        return dict(self.params)

    def min_size(self) -> int:
        """The smallest number of nodes every draw of these parameters can be built on."""
        return FAMILIES.get(self.family).min_size(self.values)

    def mean_degree(self, n: int) -> float | None:
        """The expected mean degree of a graph of n nodes at the densest of these parameters (every
        combination of a range's ends and a choice's values tried), or None where the family does not say.
        Memory estimates of sparse evaluation read it (relreason.eval.memory)."""
        degree = FAMILIES.get(self.family).degree
        if degree is None:
            return None
        names = [k for k, _ in self.params]
        return max(degree(n, **dict(zip(names, fixed)))
                   for fixed in itertools.product(*(_members(v) for _, v in self.params)))

    def draw_params(self, rng: RandomState) -> dict[str, Any]:
        """The parameters of one graph: ranges and choices drawn (in the family's order), values as given."""
        return {k: _draw(rng, v) for k, v in self.params}

    def adjacency(self, rng: RandomState, n: int) -> np.ndarray:
        """One graph: bool [N, N], symmetric, no self-loops, nodes relabelled at random (steps 1-3 of
        the module docstring)."""
        fam = FAMILIES.get(self.family)
        if n < self.min_size():
            raise RelreasonError(f"graph {self} needs at least {self.min_size()} nodes, got {n}",
                                 "use a larger size or smaller parameters")
        adj = fam.build(rng, n, **self.draw_params(rng))  # [N, N] bool
        perm = rng.permutation(n)
        return adj[perm][:, perm]

    def draw(self, rng: RandomState, n: int, *, directed: bool = False, acyclic: bool = False,
             weighted: bool = False, low: float = 0.0, high: float = 1.0) -> np.ndarray:
        """An algorithm's graph input [N, N] (every step of the module docstring): int64 0/1 like the
        benchmark's unweighted graphs, float64 weights when `weighted`."""
        adj = self.adjacency(rng, n)
        if directed:
            adj = orient(rng, adj, acyclic)
        if weighted:
            return adj * random_weights(rng, n, directed=directed, low=low, high=high)
        return adj.astype(np.int64)


def orient(rng: RandomState, adj: np.ndarray, acyclic: bool) -> np.ndarray:
    """Directs each edge of a symmetric bool adjacency once: by a fair coin per edge, or (acyclic) from
    the earlier to the later node of a uniformly random order. Returns bool [N, N]."""
    u, v = np.nonzero(np.triu(adj, 1))  # each undirected edge once, row-major
    if acyclic:
        rank = rng.permutation(len(adj))
        forward = rank[u] < rank[v]
    else:
        forward = rng.random_sample(len(u)) < 0.5
    out = np.zeros_like(adj)
    out[np.where(forward, u, v), np.where(forward, v, u)] = True
    return out


def parse_graph(text: str) -> GraphSpec | None:
    """`"ws:k=4,p=0.1"` -> GraphSpec (defaults filled in); `"clrs"` -> None, the benchmark's sampler.

    Raises RelreasonError (one line) for an unknown family, parameter or value."""
    if isinstance(text, GraphSpec):
        return text
    text = str(text).strip()
    name, sep, body = text.partition(":")
    name = name.strip()
    if not name:
        raise RelreasonError(f"graph {text!r} names no family", f"give one of: {', '.join(family_names())}")
    if name == BENCHMARK:
        if sep:
            raise RelreasonError(f"graph {text!r}: {BENCHMARK} (the benchmark's sampler) takes no parameters",
                                 f"write {BENCHMARK}")
        return None
    if name not in FAMILIES:
        close = difflib.get_close_matches(name, family_names(), n=2, cutoff=0.5)
        guess = f"did you mean {' or '.join(map(repr, close))}? " if close else ""
        raise RelreasonError(f"unknown graph family {name!r}", f"{guess}families: {', '.join(family_names())}")
    fam = FAMILIES.get(name)
    given: dict[str, Any] = {}
    for item in (x.strip() for x in body.split(",")) if sep else ():
        key, eq, raw = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise RelreasonError(f"graph {text!r}: {item!r} is not NAME=VALUE", _usage(fam))
        param = fam.param(key)
        if key in given:
            raise RelreasonError(f"graph {text!r}: {key} is given twice", "give each parameter once")
        given[key] = _parse_value(text, param, raw.strip())
    chosen = [k for k in fam.alternatives if k in given]
    if len(chosen) > 1:
        raise RelreasonError(f"graph {text!r}: give one of {' or '.join(fam.alternatives)}, not both",
                             _usage(fam))
    params = []
    for p in fam.params:
        if p.name in given:
            value = given[p.name]
        elif p.name in fam.alternatives and chosen:
            continue  # the other alternative was given
        else:
            value = p.default
        if value is not None:
            params.append((p.name, value))
    return GraphSpec(name, tuple(params))


def parse_graphs(text: str) -> list[GraphSpec | None]:
    """A comma list of graphs, `"er,ws:k=4,p=0.1,delaunay"`: an item with `=` and no `:` is one more
    parameter of the family before it. Duplicates are refused."""
    groups: list[str] = []
    for item in (x.strip() for x in str(text).split(",")):
        if "=" in item and ":" not in item and groups:
            groups[-1] += "," + item
        else:
            groups.append(item)
    specs = [parse_graph(g) for g in groups]
    names = [graph_name(s) for s in specs]
    dup = sorted({x for x in names if names.count(x) > 1})
    if dup:
        raise RelreasonError(f"graphs {text!r} name {', '.join(dup)} more than once", "give each graph once")
    return specs


def graph_name(spec: GraphSpec | str | None) -> str:
    """The canonical text of a graph: `str(spec)`, or "clrs" for the benchmark's sampler (None)."""
    spec = parse_graph(spec) if isinstance(spec, str) else spec
    return BENCHMARK if spec is None else str(spec)


def family_names() -> list[str]:
    """Every name `--graph` accepts: the benchmark's sampler, then the registered families."""
    return [BENCHMARK, *FAMILIES.names()]


def _usage(fam: GraphFamily) -> str:
    if not fam.params:
        return f"{fam.name} takes no parameters"
    return f"{fam.name} takes " + ", ".join(f"{p.name}={format_value(p.default) if p.default is not None else '...'}"
                                            for p in fam.params)


def _parse_value(text: str, param: Param, raw: str) -> Any:
    def bad(why: str) -> RelreasonError:
        return RelreasonError(f"graph {text!r}: {param.name}={raw} {why}", f"{param.name}: {param.doc}")

    if "|" in raw:
        values = tuple(_parse_one(bad, param, x.strip()) for x in raw.split("|"))
        if len(set(values)) < len(values):
            raise bad("repeats a value")
        return OneOf(values) if len(values) > 1 else values[0]
    if ".." in raw:
        if param.kind is not float:
            raise bad(f"is a range, but {param.name} is a whole number (draw from a choice instead: a|b|c)")
        lo, _, hi = raw.partition("..")
        low, high = _parse_one(bad, param, lo.strip()), _parse_one(bad, param, hi.strip())
        if not low < high:
            raise bad("is an empty range (write low..high with low < high)")
        return Uniform(low, high)
    return _parse_one(bad, param, raw)


def _parse_one(bad: Callable[[str], RelreasonError], param: Param, raw: str) -> Any:
    if param.kind is bool:
        if raw.lower() in ("1", "true"):
            value: Any = True
        elif raw.lower() in ("0", "false"):
            value = False
        else:
            raise bad("is not 0 or 1")
    elif param.kind is int:
        try:
            value = int(raw)
        except ValueError:
            raise bad("is not an integer") from None
    else:
        try:
            value = float(raw)
        except ValueError:
            raise bad("is not a number") from None
        if not math.isfinite(value):
            raise bad("is not a finite number")
    why = param.check(value)
    if why is not None:
        raise bad(why)
    return value


# -- helpers shared by the families and their tests -------------------------------------------------

def symmetric(n: int, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """bool [N, N] with the undirected edges (u[i], v[i])."""
    adj = np.zeros((n, n), bool)
    adj[u, v] = True
    adj[v, u] = True
    return adj


def components(adj: np.ndarray) -> np.ndarray:
    """Connected-component labels [N] of a symmetric adjacency (each node labelled by the smallest node
    of its component): min-label propagation over the edge list with pointer jumping, O(E) per round."""
    n = len(adj)
    u, v = np.nonzero(adj)
    labels = np.arange(n)
    while True:
        new = labels.copy()
        np.minimum.at(new, u, labels[v])
        new = new[new]  # pointer jumping: follow the label's own label (halves the rounds on long paths)
        if np.array_equal(new, labels):
            return labels
        labels = new


def is_connected(adj: np.ndarray) -> bool:
    return len(adj) == 0 or bool((components(adj) == 0).all())


# -- the families ---------------------------------------------------------------------------------

def _er_edges(rng: RandomState, n: int, p: float) -> np.ndarray:
    upper = np.triu(rng.random_sample((n, n)) < p, 1)  # each unordered pair once, independently
    return upper | upper.T


def _er_probability(n: int, p: float | None, c: float | None) -> float:
    """er's edge probability: p, or c ln(n) / n clipped to 1."""
    return min(1.0, c * math.log(n) / n) if p is None else p


@register_family("er", params=(
    Param("p", float, None, "edge probability of each pair (not p^2 as in the benchmark's undirected "
                            "ER); give p or c", _probability),
    Param("c", float, Uniform(1.0, 3.0), "p = c ln(n) / n, clipped to 1 (default: SALSA-CLRS's p drawn "
                                         "per graph from U(ln n / n, 3 ln n / n))", _positive),
    Param("connected", bool, True, "redraw until connected, as SALSA-CLRS's ER (0: plain G(n, p))"),
), alternatives=("p", "c"), degree=lambda n, p=None, c=None, connected=True: (n - 1) * _er_probability(n, p, c))
def er_graph(rng: RandomState, n: int, p: float | None = None, c: float | None = None,
             connected: bool = True) -> np.ndarray:
    """Erdos-Renyi G(n, p): every pair an edge independently with probability p. Defining property:
    edge density p. Default: SALSA-CLRS's sparse ER, p = c ln(n)/n with c drawn from U(1, 3) per graph,
    redrawn until connected (c > 1 is above the connectivity threshold)."""
    prob = _er_probability(n, p, c)
    for _ in range(MAX_REDRAWS):
        adj = _er_edges(rng, n, prob)
        if not connected or is_connected(adj):
            return adj
    raise RelreasonError(f"graph er with p={prob:.4g} gave no connected graph at n={n} in {MAX_REDRAWS} draws",
                         "raise p (connectivity needs p above ln(n)/n) or pass connected=0")


@register_family("ws", params=(
    Param("k", int, OneOf((4, 6, 8)), "mean degree: each node starts linked to its k/2 nearest ring "
                                      "neighbours on each side (default: SALSA-CLRS's test sets)", _even),
    Param("p", float, Uniform(0.05, 0.2), "probability of rewiring each ring edge to a uniformly drawn "
                                          "node (default: SALSA-CLRS's test sets)", _probability),
), min_size=lambda params: max(_members(params["k"])) + 1, degree=lambda n, k=4, p=0.1: min(k, n - 1))
def ws_graph(rng: RandomState, n: int, k: int = 4, p: float = 0.1) -> np.ndarray:
    """Watts-Strogatz small world: a ring lattice of mean degree k whose edges are each rewired with
    probability p to a uniformly drawn node (no self-loops, no multi-edges; networkx's order: layer by
    layer, node by node). Defining properties: mean degree exactly k; at p = 0 the clustering
    coefficient is 3(k-2)/(4(k-1)). SALSA-CLRS additionally redraws disconnected graphs, which at its
    k >= 4, p <= 0.2 are vanishingly rare."""
    half = k // 2
    nodes = np.arange(n)
    adj = np.zeros((n, n), bool)
    for j in range(1, half + 1):
        adj[nodes, (nodes + j) % n] = True
        adj[(nodes + j) % n, nodes] = True
    rewire = rng.random_sample((half, n)) < p  # the coin of edge (u, u + j), layer j - 1, row-major
    layers, starts = np.nonzero(rewire)
    first = rng.randint(0, n, size=len(starts))  # each rewiring's first candidate; rejected ones redraw
    degree = adj.sum(1)
    for j, u, w in zip((layers + 1).tolist(), starts.tolist(), first.tolist()):
        if degree[u] >= n - 1:
            continue  # linked to every node already: nowhere to rewire to
        while w == u or adj[u, w]:
            w = int(rng.randint(0, n))
        v = (u + j) % n
        adj[u, v] = adj[v, u] = False
        adj[u, w] = adj[w, u] = True
        degree[v] -= 1
        degree[w] += 1
    return adj


@register_family("delaunay", degree=lambda n: 2 * max(n - 1, 3 * n - 6) / n)  # a triangulation: <= 3N - 6 edges
def delaunay_graph(rng: RandomState, n: int) -> np.ndarray:
    """Delaunay triangulation of n points uniform in the unit square (SALSA-CLRS's delaunay): planar
    (E <= 3N - 6), connected, every bounded face a triangle whose circumcircle holds no other point.
    Built by Bowyer-Watson insertion (`delaunay_triangles`)."""
    points = rng.random_sample((n, 2))
    return triangulation_adjacency(n, delaunay_triangles(points))


@register_family("ba", params=(
    Param("m", int, 2, "edges each new node brings (default: mean degree about 4, as ws's smallest k)",
          _at_least_one),
), min_size=lambda params: max(_members(params["m"])) + 1,
   degree=lambda n, m=2: 2 * (m * (m + 1) // 2 + m * (n - m - 1)) / n)
def ba_graph(rng: RandomState, n: int, m: int = 2) -> np.ndarray:
    """Barabasi-Albert preferential attachment: a complete graph on the first m + 1 nodes, then each new
    node links to m distinct existing nodes drawn with probability proportional to their degree.
    Defining properties: m(m+1)/2 + m(n - m - 1) edges, every degree >= m, a heavy-tailed degree
    distribution (P(d) ~ d^-3: hubs of degree about m sqrt(n))."""
    total = m * (m + 1) // 2 + m * (n - m - 1)
    u = np.empty(total, np.int64)
    v = np.empty(total, np.int64)
    seed_u, seed_v = np.triu_indices(m + 1, 1)
    e = len(seed_u)
    u[:e], v[:e] = seed_u, seed_v
    ends = np.empty(2 * total, np.int64)  # every edge's two endpoints: a uniform pick is degree-proportional
    ends[:e], ends[e:2 * e] = seed_u, seed_v
    filled = 2 * e
    for new in range(m + 1, n):
        chosen: list[int] = []
        while len(chosen) < m:
            for t in ends[rng.randint(0, filled, size=m - len(chosen))].tolist():
                if t not in chosen and len(chosen) < m:
                    chosen.append(t)
        u[e:e + m], v[e:e + m] = new, chosen
        ends[filled:filled + m] = new
        ends[filled + m:filled + 2 * m] = chosen
        e += m
        filled += 2 * m
    return symmetric(n, u, v)


@register_family("sbm", params=(
    Param("blocks", int, 4, "number of blocks, sizes as equal as possible (default: the 4 communities "
                            "of the benchmark's SCC sampler)", _at_least_one),
    Param("p_in", float, 0.5, "edge probability inside a block (default: the benchmark's community p)",
          _probability),
    Param("p_out", float, 0.01, "edge probability between blocks (default: the benchmark's community eps)",
          _probability),
), min_size=lambda params: max(_members(params["blocks"])), degree=lambda n, **k: _sbm_degree(n, **k))
def sbm_graph(rng: RandomState, n: int, blocks: int = 4, p_in: float = 0.5, p_out: float = 0.01) -> np.ndarray:
    """Stochastic block model: nodes split into `blocks` consecutive blocks (sizes differ by at most
    one); each pair an edge independently with probability p_in inside a block, p_out between blocks.
    Defining property: edge densities p_in inside and p_out between blocks."""
    label = np.repeat(np.arange(blocks), block_sizes(n, blocks))
    prob = np.where(label[:, None] == label[None, :], p_in, p_out)  # [N, N]
    upper = np.triu(rng.random_sample((n, n)) < prob, 1)
    return upper | upper.T


def _sbm_degree(n: int, blocks: int = 4, p_in: float = 0.5, p_out: float = 0.01) -> float:
    """sbm's expected mean degree: 2 E[edges] / n."""
    inside = sum(s * (s - 1) for s in block_sizes(n, blocks)) / 2
    return 2 * (p_in * inside + p_out * (n * (n - 1) / 2 - inside)) / n


def block_sizes(n: int, blocks: int) -> list[int]:
    """Sizes of sbm's blocks: as equal as possible, the first n % blocks one larger."""
    return [n // blocks + (i < n % blocks) for i in range(blocks)]


@register_family("grid", params=(
    Param("periodic", bool, False, "wrap rows and columns of at least 3 nodes into rings, a torus "
                                   "(default: open, as SALSA-CLRS's grid)"),
), degree=lambda n, periodic=False: 2 * (2 * n - (0 if periodic else sum(grid_shape(n)))) / n)  # torus: <= 2N edges
def grid_graph(rng: RandomState, n: int, periodic: bool = False) -> np.ndarray:
    """2-D lattice, near-square for any n: `grid_shape(n)` = (rows, cols) with cols = ceil(sqrt(n)),
    rows filled in order, the last one possibly short. Defining properties: degrees 1..4 (2..4 on a
    full rectangle, 4 on a full torus of sides >= 3); an open grid has 2N - rows - cols edges.
    Deterministic: its randomness is the relabelling."""
    rows, cols = grid_shape(n)
    ids = np.arange(n)
    right = ids[(ids % cols < cols - 1) & (ids + 1 < n)]
    down = ids[ids + cols < n]
    u, v = [right, down], [right + 1, down + cols]
    if periodic:
        for r in range(rows):  # each row of >= 3 nodes closes into a ring
            first, last = r * cols, min(n, (r + 1) * cols) - 1
            if last - first >= 2:
                u.append(np.array([last]))
                v.append(np.array([first]))
        for c in range(min(cols, n)):  # each column of >= 3 nodes too
            height = len(range(c, n, cols))
            if height >= 3:
                u.append(np.array([c + (height - 1) * cols]))
                v.append(np.array([c]))
    return symmetric(n, np.concatenate(u), np.concatenate(v))


def grid_shape(n: int) -> tuple[int, int]:
    """(rows, cols) of the grid on n nodes: cols = ceil(sqrt(n)), rows = ceil(n / cols)."""
    cols = math.isqrt(n - 1) + 1 if n > 1 else 1
    return -(-n // cols), cols


@register_family("tree", degree=lambda n: 2 * (n - 1) / n)
def tree_graph(rng: RandomState, n: int) -> np.ndarray:
    """Uniform random labelled tree: a uniform Pruefer sequence of n - 2 labels, decoded (Cayley: every
    one of the n^(n-2) labelled trees equally likely; depth about sqrt(n)). Defining properties:
    connected with N - 1 edges."""
    if n == 2:
        return symmetric(2, np.array([0]), np.array([1]))
    seq = rng.randint(0, n, size=n - 2).tolist()
    degree = [1] * n
    for x in seq:
        degree[x] += 1
    u, v = [], []
    ptr = degree.index(1)
    leaf = ptr
    for x in seq:  # the linear-time decoding: the smallest leaf is joined to the next label
        u.append(leaf)
        v.append(x)
        degree[x] -= 1
        if degree[x] == 1 and x < ptr:
            leaf = x
        else:
            ptr += 1
            while degree[ptr] != 1:
                ptr += 1
            leaf = ptr
    u.append(leaf)
    v.append(n - 1)
    return symmetric(n, np.array(u), np.array(v))


# -- Delaunay triangulation ------------------------------------------------------------------------

def delaunay_triangles(points: np.ndarray) -> np.ndarray:
    """The Delaunay triangles [T, 3] (counter-clockwise node triples) of points [N, 2] in general position.

    Bowyer-Watson insertion with a ghost vertex: besides the real triangles, each convex-hull edge
    u -> v (outside on its left) stands for a ghost triangle, the half-plane beyond it, so no
    super-triangle is needed and the hull comes out exact. Inserting a point removes every triangle it
    conflicts with (a real one whose circumcircle contains it, a ghost whose half-plane contains it or
    whose hull edge it lies on) and joins the point to the boundary of that cavity. Real triangles are
    screened by their cached circumcircles (vectorised, with a margin), then decided by the exact
    in-circle determinant. Floating point: exact for points in general position, which random points
    are with probability one. Points are inserted along a snake over a sqrt(N) x sqrt(N) grid of
    cells (short cavities); the triangulation does not depend on the order."""
    points = np.asarray(points, np.float64)
    n = len(points)
    if n < 3:
        return np.zeros((0, 3), np.int64)
    xy = points.tolist()
    order = _insertion_order(points).tolist()
    a, b = order[0], order[1]
    k = next((i for i in range(2, n) if _orient(xy[a], xy[b], xy[order[i]]) != 0), None)
    if k is None:  # every point on one line: no triangle
        return np.zeros((0, 3), np.int64)
    c = order.pop(k)
    if _orient(xy[a], xy[b], xy[c]) < 0:
        b, c = c, b
    # real triangles in slots: nodes [S, 3], circumcentres and screening radii^2 (-1: a free slot)
    cap = 2 * n + 8
    tri = np.zeros((cap, 3), np.int64)
    cx, cy, lim = np.zeros(cap), np.zeros(cap), np.full(cap, -1.0)
    free = list(range(cap - 1, 0, -1))
    tri[0], (cx[0], cy[0], lim[0]) = (a, b, c), _circle(xy[a], xy[b], xy[c])
    hull = {(b, a), (c, b), (a, c)}  # ghost triangles: hull edges u -> v with the outside on their left
    for p in order[2:]:  # a, b and c (popped) are in
        px, py = xy[p]
        dx, dy = cx - px, cy - py
        bad = np.flatnonzero(dx * dx + dy * dy < lim).tolist()
        bad = [t for t in bad if _in_circle(xy, tri[t].tolist(), px, py)]
        edges = set()
        for t in bad:
            u, v, w = tri[t].tolist()
            edges.update(((u, v), (v, w), (w, u)))
        gone = [(u, v) for u, v in hull if _beyond(xy[u], xy[v], px, py)]
        hull.difference_update(gone)
        for u, v in gone:
            edges.update(((u, v), (v, -1), (-1, u)))  # -1: the ghost vertex
        new = []
        for x, y in edges:
            if (y, x) in edges:
                continue  # inside the cavity
            if x == -1:
                hull.add((y, p))
            elif y == -1:
                hull.add((p, x))
            else:
                new.append((x, y))
        lim[bad] = -1.0
        free.extend(bad)
        for x, y in new:
            if not free:  # never at 2N + 8 slots (a triangulation has < 2N triangles); kept for safety
                grow = len(lim)
                tri = np.concatenate([tri, np.zeros((grow, 3), np.int64)])
                cx, cy = np.concatenate([cx, np.zeros(grow)]), np.concatenate([cy, np.zeros(grow)])
                lim = np.concatenate([lim, np.full(grow, -1.0)])
                free.extend(range(2 * grow - 1, grow - 1, -1))
            t = free.pop()
            tri[t] = (x, y, p)
            cx[t], cy[t], lim[t] = _circle(xy[x], xy[y], xy[p])
    return tri[lim >= 0]


def _circle(a, b, c) -> tuple[float, float, float]:
    """Circumcentre of triangle abc and its squared radius widened by a margin (screening only: the
    exact in-circle test decides), so rounding in the centre never hides a conflict."""
    bx, by, cx, cy = b[0] - a[0], b[1] - a[1], c[0] - a[0], c[1] - a[1]
    d = 2.0 * (bx * cy - by * cx)
    if d == 0.0:  # collinear (degenerate input): always screened in, the exact test decides
        return 0.0, 0.0, math.inf
    b2, c2 = bx * bx + by * by, cx * cx + cy * cy
    ux, uy = (cy * b2 - by * c2) / d, (bx * c2 - cx * b2) / d
    r2 = ux * ux + uy * uy
    return a[0] + ux, a[1] + uy, r2 * (1.0 + 1e-6) + 1e-12


def _in_circle(xy, t, px: float, py: float) -> bool:
    """Whether (px, py) lies strictly inside the circumcircle of the counter-clockwise triangle t."""
    (ax, ay), (bx, by), (cx, cy) = xy[t[0]], xy[t[1]], xy[t[2]]
    ax, ay, bx, by, cx, cy = ax - px, ay - py, bx - px, by - py, cx - px, cy - py
    return ((ax * ax + ay * ay) * (bx * cy - by * cx) + (bx * bx + by * by) * (cx * ay - cy * ax)
            + (cx * cx + cy * cy) * (ax * by - ay * bx)) > 0


def _beyond(u, v, px: float, py: float) -> bool:
    """Whether (px, py) conflicts with the ghost of hull edge u -> v: strictly on its outer (left) side,
    or on the edge itself between its ends."""
    ux, uy, vx, vy = u[0] - px, u[1] - py, v[0] - px, v[1] - py
    side = ux * vy - uy * vx  # orientation of (u, v, p)
    return side > 0 or (side == 0 and ux * vx + uy * vy < 0)


def _orient(a, b, c) -> float:
    return float((b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]))


def _insertion_order(points: np.ndarray) -> np.ndarray:
    """Indices of the points along a boustrophedon over a grid of about one point per cell."""
    n = len(points)
    side = max(1, math.isqrt(n))
    lo, hi = points.min(0), points.max(0)
    cell = np.minimum(((points - lo) / np.maximum(hi - lo, 1e-300) * side).astype(np.int64), side - 1)
    row, col = cell[:, 1], cell[:, 0]
    snake = np.where(row % 2 == 0, col, side - 1 - col)
    return np.lexsort((snake, row))


def triangulation_adjacency(n: int, triangles: np.ndarray) -> np.ndarray:
    """bool [N, N] of the triangles' edges (for n = 2 the single edge; collinear points: none)."""
    if n == 2:
        return symmetric(2, np.array([0]), np.array([1]))
    u = triangles[:, [0, 1, 2]].reshape(-1)
    v = triangles[:, [1, 2, 0]].reshape(-1)
    return symmetric(n, u, v)
