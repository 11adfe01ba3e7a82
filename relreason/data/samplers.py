"""Random input distributions, drawn exactly as the reference benchmark draws them.

Every sampler takes a `numpy.random.RandomState` and a `length` and returns one sample's raw inputs
(the positional arguments of the algorithm). Drawing the same calls in the same order as the
reference (google-deepmind/clrs `samplers.py`) from `RandomState(seed)`, one sample after the other,
makes our canonical splits the benchmark's splits value for value. The draws are cheap; the order is
what matters, so keep every draw exactly where it is: a call may only be replaced by one that draws
the same numbers (see `bernoulli` and `graph_sampler`). Graph samplers also draw many samples at once
(`GraphSampler.batch`, through `draw`): the same calls in the same order, the arithmetic batched.

Samplers with options are frozen dataclasses whose fields are named like the reference sampler's
keyword arguments (`p`, `length_needle`, and ours, `graph`: a graph family in place of the benchmark's
graphs, `relreason.data.families`); `with_options(sample, p=0.3)` gives the variant. Options a
sampler does not take are ignored, as the reference's `build_sampler` ignores them; this is how the
training stream (`relreason.data.stream`) asks for its per-sample edge probabilities and needle lengths.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np

RandomState = np.random.RandomState
SampleFn = Callable[[RandomState, int], tuple]


def random_sequence(rng: RandomState, length: int, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    return rng.uniform(low=low, high=high, size=(length,))


def random_string(rng: RandomState, length: int, chars: int = 4) -> np.ndarray:
    return rng.randint(0, high=chars, size=(length,))


def bernoulli(rng: RandomState, p: float, shape: tuple[int, ...]) -> np.ndarray:
    """`rng.binomial(1, p, shape)` exactly (same values, same draws), three times faster at 64 x 64.

    The legacy binomial draws each element by inversion (n = 1, p' = min(p, 1 - p)): one uniform U,
    X = [U > qn] with qn = exp(log(1 - p')), the result X (or 1 - X when p > 1/2). Only when
    U - qn > p' qn / (1 - p') (U within rounding of 1) is the element redrawn with the next U. The
    same uniforms come from `random_sample`, so the comparison runs vectorized; the redraw case is
    reproduced, so equality holds for every seed."""
    law = _Inversion.of(p)
    hits = law.hits(rng, rng.random_sample(math.prod(shape)))
    return (~hits if law.flip else hits).astype(np.int64).reshape(shape)


@dataclass(frozen=True)
class _Inversion:
    """The legacy binomial's inversion for n = 1 (see `bernoulli`): an element is a hit when its
    uniform exceeds qn, and is redrawn when its uniform minus qn exceeds px."""

    flip: bool  # p > 1/2: the draw is for 1 - p and the result is negated
    qn: float
    px: float

    @staticmethod
    def of(p: float) -> "_Inversion":
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p = {p} is not a probability")
        p1 = 1.0 - p if p > 0.5 else p
        q = 1.0 - p1
        qn = math.exp(1 * math.log(q))  # libm, as numpy's C code computes it
        return _Inversion(p > 0.5, qn, (p1 * qn) / q)  # px: the inversion's next probability

    def redraws(self, u: np.ndarray) -> bool:
        """Whether some uniform of `u` is redrawn (u - qn rounds monotonically: the largest decides)."""
        return u.size > 0 and float(u.max()) - self.qn > self.px

    def hits(self, rng: RandomState, u: np.ndarray) -> np.ndarray:
        """The hits [U > qn] of the uniforms u, drawing the redrawn elements' next uniforms from rng."""
        out = np.empty(len(u), bool)
        start = 0
        while True:
            hit = u > self.qn
            redraw = hit & (u - self.qn > self.px)
            if not redraw.any():
                out[start:] = hit
                return out
            r = int(redraw.argmax())  # element start + r draws again: it takes the next uniform, all later ones shift
            out[start: start + r] = hit[:r]
            start += r
            u = np.concatenate([u[r + 1:], rng.random_sample(1)])


def random_er_graph(rng: RandomState, nb_nodes: int, p: float = 0.5, directed: bool = False,
                    acyclic: bool = False, weighted: bool = False, low: float = 0.0,
                    high: float = 1.0) -> np.ndarray:
    """Erdos-Renyi graph [N, N]. Undirected: mat *= mat.T (so off-diagonal edges have prob. p^2);
    acyclic (directed only): strict upper triangle, then a random node permutation; weighted:
    U[low, high) weights, symmetrised as sqrt(W * W.T + 1e-3) when undirected."""
    mat = bernoulli(rng, p, (nb_nodes, nb_nodes))  # = rng.binomial(1, p, size=(nb_nodes, nb_nodes))
    if not directed:
        mat *= np.transpose(mat)
    elif acyclic:
        mat = np.triu(mat, k=1)
        perm = rng.permutation(nb_nodes)
        mat = mat[perm, :][:, perm]
    if weighted:
        mat = mat.astype(float) * random_weights(rng, nb_nodes, directed=directed, low=low, high=high)
    return mat


def random_weights(rng: RandomState, nb_nodes: int, directed: bool = False, low: float = 0.0,
                   high: float = 1.0) -> np.ndarray:
    """Edge weights [N, N] as the reference draws them: U[low, high), symmetrised as sqrt(W * W.T + 1e-3)
    when undirected (so in [sqrt(1e-3), sqrt(high^2 + 1e-3)) for low = 0). Graph families use it too."""
    weights = rng.uniform(low=low, high=high, size=(nb_nodes, nb_nodes))
    if not directed:
        weights *= np.transpose(weights)
        weights = np.sqrt(weights + 1e-3)
    return weights


def random_community_graph(rng: RandomState, nb_nodes: int, k: int = 4, p: float = 0.5, eps: float = 0.01,
                           directed: bool = False, acyclic: bool = False, weighted: bool = False,
                           low: float = 0.0, high: float = 1.0) -> np.ndarray:
    """k ER communities of size n // k (the last takes the rest), sparse eps links between them that
    never point from a later community to an earlier one, then a random node permutation."""
    if k > nb_nodes:
        raise ValueError(f"cannot make {k} communities from {nb_nodes} nodes")
    mat = np.zeros((nb_nodes, nb_nodes))
    bounds = []
    lo = 0
    for i in range(k):
        hi = nb_nodes if i == k - 1 else lo + nb_nodes // k
        mat[lo:hi, lo:hi] = random_er_graph(rng, hi - lo, p=p, directed=directed, acyclic=acyclic,
                                            weighted=weighted, low=low, high=high)
        bounds.append((lo, hi))
        lo = hi
    toggle = random_er_graph(rng, nb_nodes, p=eps, directed=directed, acyclic=acyclic, weighted=weighted,
                             low=low, high=high)
    for i, (lo_i, hi_i) in enumerate(bounds):
        for lo_j, hi_j in bounds[:i]:
            toggle[lo_i:hi_i, lo_j:hi_j] = 0
    mat = np.where(toggle > 0.0, (1.0 - (mat > 0.0)) * toggle, mat)
    perm = rng.permutation(nb_nodes)
    return mat[perm, :][:, perm]


class GraphSource(Protocol):
    """A graph distribution in place of the benchmark's (`relreason.data.families.GraphSpec`): draws an
    algorithm's graph input [N, N], directed / acyclic / weighted as the algorithm's sampler asks."""

    def draw(self, rng: RandomState, n: int, *, directed: bool = False, acyclic: bool = False,
             weighted: bool = False) -> np.ndarray: ...


@dataclass(frozen=True)
class GraphSampler:
    """ER-graph sampler as the reference's graph samplers: `rng.choice((p,))` first (it is part of the
    draw order), then the graph, then (with `source`) a uniformly drawn source node. With the option
    `graph` (a graph family, `with_options(sample, graph=parse_graph("ws"))`) the graph comes from the
    family instead, directed, acyclic and weighted as the algorithm needs; `p` is then unused.

    Both `choice` calls are written as the cheaper calls they reduce to in the legacy RandomState
    stream (frozen by numpy, NEP 19): `choice` over one option is `randint(0, 1)`, which draws
    nothing, and `choice(length)` is `randint(0, length)`. `choice` costs ~15 us per sample, more
    than the graph itself at n = 16."""

    p: float  # edge probability (the reference's option `p`, one value here: a tuple is drawn by the caller)
    directed: bool = False
    acyclic: bool = False
    weighted: bool = False
    source: bool = False
    graph: GraphSource | None = None  # a graph family instead of the benchmark's ER; None: the benchmark's

    def __call__(self, rng: RandomState, length: int) -> tuple:
        if self.graph is None:
            graph = random_er_graph(rng, length, p=self.p, directed=self.directed, acyclic=self.acyclic,
                                    weighted=self.weighted)
        else:
            graph = self.graph.draw(rng, length, directed=self.directed, acyclic=self.acyclic,
                                    weighted=self.weighted)
        if self.source:
            return graph, rng.randint(0, length)
        return (graph,)

    def batch(self, rng: RandomState, length: int, count: int) -> list[np.ndarray] | None:
        """`count` samples drawn as `count` calls would draw them, stacked ([count, N, N], and the sources
        [count]); None with a graph family (draw them one by one).

        Each sample still draws its numbers with the same calls in the same order (the uniforms of its
        edges, its permutation, its weights' uniforms, its source); what `random_er_graph` computes from
        them runs on blocks of samples (about _BLOCK_ELEMENTS edges, so that a block stays in cache),
        with the same floating-point operations: 0/1 edges times weights, W * W^T + 1e-3 and its root."""
        if self.graph is not None:
            return None
        law = _Inversion.of(self.p)
        n = length
        out = np.empty((count, n, n), float if self.weighted else np.int64)
        sources = np.empty(count, np.int64)
        block = max(1, min(count, _BLOCK_ELEMENTS // (n * n)))
        edges = np.empty((block, n * n), bool)  # [U > qn] of the edges' uniforms
        weights = np.empty((block, n, n))  # the weights' uniforms
        perms = np.empty((block, n), np.int64)
        for lo in range(0, count, block):
            m = min(block, count - lo)
            for k in range(m):
                u = rng.random_sample(n * n)
                if law.redraws(u):  # rare: the redrawn elements take the next uniforms, before the rest
                    edges[k] = law.hits(rng, u)
                else:
                    np.greater(u, law.qn, out=edges[k])
                if self.acyclic:
                    perms[k] = rng.permutation(n)
                if self.weighted:  # uniform(0, 1) is 0 + 1 * U: the same numbers as random_sample
                    weights[k] = rng.random_sample((n, n))
                if self.source:
                    sources[lo + k] = rng.randint(0, length)
            hits = edges[:m].reshape(m, n, n)  # [m, N, N]
            if law.flip:
                hits = ~hits
            if not self.directed:
                hits &= np.swapaxes(hits, 1, 2)  # mat *= mat.T
            elif self.acyclic:  # np.triu(mat, k=1)[perm, :][:, perm]: rows, then rows of the transpose
                rows, perm = np.arange(m)[:, None], perms[:m]
                hits = np.swapaxes(np.swapaxes(hits[rows, perm], 1, 2)[rows, perm], 1, 2)
                hits &= perm[:, :, None] < perm[:, None, :]  # kept where perm[i] < perm[j]: the upper triangle
            if not self.weighted:
                out[lo:lo + m] = hits
                continue
            w = weights[:m]
            if not self.directed:
                w *= np.swapaxes(w, 1, 2)
                w += 1e-3
                np.sqrt(w, out=w)
            np.multiply(hits, w, out=out[lo:lo + m])  # mat.astype(float) * weights
        return [out, sources] if self.source else [out]


_BLOCK_ELEMENTS = 1 << 15  # edges per block of GraphSampler.batch: its float64 buffers stay in cache


def graph_sampler(p: float, directed: bool = False, acyclic: bool = False, weighted: bool = False,
                  source: bool = False) -> GraphSampler:
    """The ER-graph sampler of an algorithm (see `GraphSampler`)."""
    return GraphSampler(p, directed, acyclic, weighted, source)


@dataclass(frozen=True)
class CommunitySampler:
    """k-community graph sampler (the reference's SCC sampler): `choice((p,))`, which draws nothing,
    then `random_community_graph`. With the option `graph` the graph comes from that family instead,
    each edge given a random direction (`relreason.data.families`); `p`, `k` and `eps` are then unused."""

    p: float  # edge probability inside a community (the reference's option `p`)
    k: int = 4  # communities (SccSampler's default)
    eps: float = 0.01  # probability of the links between communities (SccSampler's default)
    directed: bool = True  # SCC needs directed graphs
    graph: GraphSource | None = None  # a graph family instead of the communities; None: the benchmark's

    def __call__(self, rng: RandomState, length: int) -> tuple:
        if self.graph is not None:
            return (self.graph.draw(rng, length, directed=self.directed),)
        return (random_community_graph(rng, length, k=self.k, p=self.p, eps=self.eps, directed=self.directed),)


def truncate(values: tuple, decimals: int | None) -> tuple:
    """A sample's inputs with every float array and float truncated toward zero to `decimals`
    (the reference's `Sampler._trunc_array`: np.trunc(x * 10**d) / 10**d); integer inputs untouched.
    CLRS-Text draws its samples so (`relreason.data.text`); None leaves them as drawn."""
    if decimals is None:
        return values
    scale = 10**decimals
    out = []
    for v in values:
        if isinstance(v, np.ndarray) and np.issubdtype(v.dtype, np.floating):
            v = np.trunc(v * scale) / scale
        elif isinstance(v, float):  # Python floats and np.float64 (binary_search's target)
            v = float(np.trunc(v * scale) / scale)
        out.append(v)
    return tuple(out)


def draw(sample: SampleFn, rng: RandomState, length: int, count: int) -> list[np.ndarray]:
    """`count` samples' inputs, stacked (one array per positional input), drawn as `count` calls of
    `sample` would draw them: in one batch where the sampler has one (`GraphSampler.batch`)."""
    batch = getattr(sample, "batch", None)
    stacked = batch(rng, length, count) if batch is not None else None
    if stacked is not None:
        return stacked
    samples = [sample(rng, length) for _ in range(count)]
    return [np.stack([np.asarray(s[i]) for s in samples]) for i in range(len(samples[0]))]


def takes_option(sample: SampleFn, option: str) -> bool:
    """Whether `sample` has the reference sampler option `option` (a field of a sampler dataclass)."""
    return dataclasses.is_dataclass(sample) and option in {f.name for f in dataclasses.fields(sample)}


def with_options(sample: SampleFn, **options) -> SampleFn:
    """`sample` with the options it takes set to the given values; the others are ignored."""
    taken = {k: v for k, v in options.items() if takes_option(sample, k)}
    return dataclasses.replace(sample, **taken) if taken else sample
