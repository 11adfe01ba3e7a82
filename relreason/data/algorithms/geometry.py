"""Computational geometry (CLRS chapter 33): segment intersection and two convex hulls, with the
reference's probes.

All three run as lockstep batches over points given as coordinate arrays xs, ys [B, N]. Every
orientation test is written with the reference's operand order (the same products and differences),
so a float tie or sign falls exactly as it does there.

- segments_intersect: segment (p0, p1) against (p2, p3); five fixed hint steps.
- graham_scan: lowest point (then leftmost), the others sorted by polar angle around it, then the
  stack scan; one loop iteration is one probe point of every running sample (a pop or a push).
- jarvis_march: gift wrapping from the lowest point; one hint per point examined and one per hull
  point added.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from relreason.data import samplers
from relreason.data.algorithms import CLRS_TEXT_LENGTHS, StreamForm, TextForm, register
from relreason.data.probes import Recorder, positions
from relreason.errors import RelreasonError

DISK_RADIUS = 2.0  # convex-hull points are uniform in this disk ...
DISK_ORIGIN = (0.0, 0.0)  # ... around this centre
COLLINEAR_EPS = 1e-12  # |cross product| below this makes a triple collinear: the sampler redraws
COLLINEAR_ATTEMPTS = 1000  # redraws before giving up, as the reference
_CROSS_BLOCK = 1 << 22  # entries of the triple cross-product array computed at once (bounds memory)


def _check_points(name: str, xs: np.ndarray, ys: np.ndarray, count: int | None = None) -> tuple[np.ndarray, ...]:
    xs, ys = np.asarray(xs, dtype=np.float64), np.asarray(ys, dtype=np.float64)
    if xs.ndim != 2 or xs.shape != ys.shape or xs.shape[1] < 1:
        raise RelreasonError(f"{name} needs x and y coordinates as two 1-D arrays of equal length",
                             f"e.g. run_algorithm('{name}', xs, ys)")
    if count is not None and xs.shape[1] != count:
        raise RelreasonError(f"{name} takes exactly {count} points, got {xs.shape[1]}",
                             "pass the endpoints of two segments: (x0, x1, x2, x3), (y0, y1, y2, y3)")
    if not (np.isfinite(xs).all() and np.isfinite(ys).all()):
        raise RelreasonError(f"{name}: coordinates must be finite numbers", "remove NaN and inf values")
    return xs, ys


# --- segments_intersect -------------------------------------------------------------------------------


def _ccw(ax: float, ay: float, bx: float, by: float, cx: float, cy: float) -> bool:
    """The sampler's quick orientation test (collinear counts as clockwise)."""
    return (cy - ay) * (bx - ax) > (by - ay) * (cx - ax)


def sample_segments(rng: samplers.RandomState, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Four points in U[0, 1)^2 (length is ignored): a fair coin says whether the segments (p0, p1)
    and (p2, p3) should cross, then points are redrawn until the quick test agrees.

    The reference draws xs then ys with two `uniform(0, 1, size=4)` calls per attempt. One
    `random_sample(8)` is the same stream and the same values (each value consumes one double, and
    uniform(0, 1) computes 0 + 1 * U = U exactly), split in halves, at a quarter of the call overhead:
    the draws dominate this sampler, about three attempts per sample."""
    del length
    crossing = rng.binomial(1, 0.5)
    while True:
        u = rng.random_sample(8)
        x0, x1, x2, x3, y0, y1, y2, y3 = u.tolist()  # Python floats: the same IEEE arithmetic, faster
        intersect = (_ccw(x0, y0, x2, y2, x3, y3) != _ccw(x1, y1, x2, y2, x3, y3)
                     and _ccw(x0, y0, x1, y1, x2, y2) != _ccw(x0, y0, x1, y1, x3, y3))
        if intersect == crossing:
            return u[:4], u[4:]


# The four orientation tests in the reference's order: segment (p_I, p_J) against point p_K. Test t
# fills entry K[t] = t of `dir` and `on_seg`, and is recorded as hint step t + 1 (step 0: all zero).
_I, _J, _K = np.array([2, 2, 0, 0]), np.array([3, 3, 1, 1]), np.arange(4)
_SCHEDULE = [np.concatenate([[0], v]) for v in (_I, _J, _K)]  # i, j, k per hint step
_DONE = _K[None, :] < np.arange(5)[:, None]  # [step, k]: test k has run by hint step `step`


@register(
    "segments_intersect", family="geometry",
    inputs="pos N sc, x N sc, y N sc", outputs="intersect G m",
    hints="i N m1, j N m1, k N m1, dir N sc, on_seg N m",
    eval_multiplier=64,
    sample=sample_segments,
    text=TextForm(train_lengths=CLRS_TEXT_LENGTHS, val_stop=65))
def segments_intersect(xs: np.ndarray, ys: np.ndarray):
    """CLRS SEGMENTS-INTERSECT for (p0, p1) and (p2, p3). xs, ys: [B, 4].

    Hints: an all-zero step, then one step per orientation test filling `dir` (the cross product
    (p_k - p_i) x (p_j - p_i), in the reference's operand order) and `on_seg` (p_k in the bounding box
    of the segment) for the tested point k."""
    xs, ys = _check_points("segments_intersect", xs, ys, count=4)
    B = xs.shape[0]
    rec = Recorder("segments_intersect", 4, batch=B)
    rec.input(pos=positions(4, B), x=xs, y=ys)
    xi, yi, xj, yj, xk, yk = xs[:, _I], ys[:, _I], xs[:, _J], ys[:, _J], xs[:, _K], ys[:, _K]  # [B, 4] each
    d = (xk - xi) * (yj - yi) - (xj - xi) * (yk - yi)
    on = ((np.minimum(xi, xj) <= xk) & (xk <= np.maximum(xi, xj)) &
          (np.minimum(yi, yj) <= yk) & (yk <= np.maximum(yi, yj)))
    steps = len(_DONE)
    i_h, j_h, k_h = (np.broadcast_to(v, (B, steps)) for v in _SCHEDULE)
    rec.hint_sequence(np.full(B, steps), i=i_h, j=j_h, k=k_h, dir=np.where(_DONE, d[:, None, :], 0.0),
                      on_seg=(_DONE & on[:, None, :]).astype(np.float32))
    straddle = (((d[:, 0] > 0) & (d[:, 1] < 0)) | ((d[:, 0] < 0) & (d[:, 1] > 0))) & \
               (((d[:, 2] > 0) & (d[:, 3] < 0)) | ((d[:, 2] < 0) & (d[:, 3] > 0)))
    touching = ((d == 0) & on).any(axis=1)  # an endpoint on the other segment
    rec.output(intersect=(straddle | touching).astype(np.float32))
    return rec.finish()


# --- convex hulls: sampler ----------------------------------------------------------------------------


@functools.lru_cache(maxsize=8)  # at most _CROSS_BLOCK booleans each
def _ordered_triples(n: int, start: int, stop: int) -> np.ndarray:
    """Mask [stop - start, N, N] of the triples i < j < k with i in [start, stop)."""
    i = np.arange(start, stop)[:, None, None]
    j = np.arange(n)[None, :, None]
    k = np.arange(n)[None, None, :]
    return (i < j) & (j < k)


def has_collinear_triple(xs: np.ndarray, ys: np.ndarray, eps: float = COLLINEAR_EPS) -> bool:
    """Whether some points i < j < k have |(p_j - p_i) x (p_k - p_i)| < eps (the reference's test, for all
    triples at once; the same products, so the same float results)."""
    n = xs.shape[0]
    dx = xs[None, :] - xs[:, None]  # [i, j] = x_j - x_i
    dy = ys[None, :] - ys[:, None]
    block = max(1, _CROSS_BLOCK // max(n * n, 1))
    for start in range(0, n, block):
        stop = min(n, start + block)
        a, b = dx[start:stop], dy[start:stop]
        cross = a[:, :, None] * b[:, None, :] - b[:, :, None] * a[:, None, :]  # [i, j, k]
        if (np.abs(cross) < eps)[_ordered_triples(n, start, stop)].any():
            return True
    return False


def sample_disk_points(rng: samplers.RandomState, length: int) -> tuple[np.ndarray, np.ndarray]:
    """`length` points uniform in the disk (angle U[0, 2 pi), radius R sqrt(U)); a draw with a collinear
    triple is redrawn whole (Graham scan would have several correct traces)."""
    for _ in range(COLLINEAR_ATTEMPTS):
        thetas = samplers.random_sequence(rng, length, 0.0, 2.0 * np.pi)
        rs = DISK_RADIUS * np.sqrt(samplers.random_sequence(rng, length, 0.0, 1.0))
        xs = rs * np.cos(thetas) + DISK_ORIGIN[0]
        ys = rs * np.sin(thetas) + DISK_ORIGIN[1]
        if not has_collinear_triple(xs, ys, COLLINEAR_EPS):
            return xs, ys
    raise RelreasonError(f"could not draw {length} points without a collinear triple in {COLLINEAR_ATTEMPTS} tries",
                         "use fewer points")


def _truncated_disk_points(rng: samplers.RandomState, length: int, decimals: int) -> tuple[np.ndarray, np.ndarray]:
    """The convex-hull sampler as the reference runs it with truncation (CLRS-Text): its ConvexHullSampler
    truncates the points *inside* the collinearity loop (so a draw is rejected when the truncated points
    are collinear, which changes the stream), and the sampler truncates them once more afterwards
    (`samplers.truncate` after the draw), which moves ~0.6% of the coordinates by 0.001. The draws are
    `sample_disk_points`'."""
    for _ in range(COLLINEAR_ATTEMPTS):
        thetas = samplers.random_sequence(rng, length, 0.0, 2.0 * np.pi)
        rs = DISK_RADIUS * np.sqrt(samplers.random_sequence(rng, length, 0.0, 1.0))
        xs, ys = samplers.truncate((rs * np.cos(thetas) + DISK_ORIGIN[0], rs * np.sin(thetas) + DISK_ORIGIN[1]),
                                   decimals)
        if not has_collinear_triple(xs, ys):
            return xs, ys
    raise RelreasonError(f"could not draw {length} points without a collinear triple in {COLLINEAR_ATTEMPTS} tries",
                         "use fewer points")


# --- convex hulls: algorithms -------------------------------------------------------------------------


def _lowest(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Index [B] of the lowest point, the leftmost among equally low ones, the first among equal points."""
    low = ys == ys.min(axis=1, keepdims=True)
    left = low & (xs == np.where(low, xs, np.inf).min(axis=1, keepdims=True))
    return np.argmax(left, axis=1)


def _cross(xs: np.ndarray, ys: np.ndarray, rows: np.ndarray, i: np.ndarray, j: np.ndarray, k: np.ndarray) -> np.ndarray:
    """(p_j - p_i) x (p_k - p_i) per sample, in the reference's operand order."""
    xi, yi = xs[rows, i], ys[rows, i]
    return (xs[rows, j] - xi) * (ys[rows, k] - yi) - (ys[rows, j] - yi) * (xs[rows, k] - xi)


class _Steps:
    """Per-step hint values collected in lockstep, stacked to [B, T, ...] for `hint_sequence`."""

    def __init__(self, B: int):
        self.values: dict[str, list] = {}
        self.lengths = np.zeros(B, np.int64)

    def push(self, active: np.ndarray, **values) -> None:
        self.lengths += active
        for k, v in values.items():
            self.values.setdefault(k, []).append(np.array(v))

    def stacked(self) -> dict[str, np.ndarray]:
        return {k: np.stack(v, axis=1) for k, v in self.values.items()}


@register(
    "graham_scan", family="geometry",
    inputs="pos N sc, x N sc, y N sc", outputs="in_hull N m",
    hints="best N m1, atans N sc, in_hull_h N m, stack_prev N ptr, last_stack N m1, i N m1, phase G cat",
    classes={"phase": 5},
    sample=sample_disk_points,
    text=TextForm(train_lengths=CLRS_TEXT_LENGTHS, val_stop=32, truncated_sample=_truncated_disk_points),
    groups=("core8",))
def graham_scan(xs: np.ndarray, ys: np.ndarray):
    """Graham scan (1972). xs, ys: [B, N].

    Phases (the categorical `phase`): 0 start, 1 lowest point found, 2 polar angles computed, 3 a pop
    (the stack top is not a left turn), 4 a push. The stack is the linked list `stack_prev` from
    `last_stack` down; popped points point to themselves again."""
    xs, ys = _check_points("graham_scan", xs, ys)
    B, n = xs.shape
    rows = np.arange(B)
    rec = Recorder("graham_scan", n, batch=B)
    rec.input(pos=positions(n, B), x=xs, y=ys)
    best = _lowest(xs, ys)
    in_hull = np.zeros((B, n), np.float32)
    stack_prev = np.tile(np.arange(n), (B, 1))
    zero = np.zeros(B, np.int64)
    no_angles = np.zeros((B, n))
    steps = _Steps(B)
    on = np.ones(B, bool)
    steps.push(on, best=zero, atans=no_angles, in_hull_h=in_hull, stack_prev=stack_prev, last_stack=zero, i=zero,
               phase=zero)
    in_hull[rows, best] = 1
    steps.push(on, best=best, atans=no_angles, in_hull_h=in_hull, stack_prev=stack_prev, last_stack=best, i=best,
               phase=np.full(B, 1))
    # math.atan2 point by point, as the reference: a vectorized arctan2 may round differently
    dy = (ys - ys[rows, best][:, None]).ravel().tolist()
    dx = (xs - xs[rows, best][:, None]).ravel().tolist()
    atans = np.array(list(map(math.atan2, dy, dx))).reshape(B, n)
    atans[rows, best] = -123456789  # sorts first
    order = np.argsort(atans, axis=1)  # [B, N]: points by polar angle
    atans[rows, best] = 0
    steps.push(on, best=best, atans=atans, in_hull_h=in_hull, stack_prev=stack_prev, last_stack=best, i=best,
               phase=np.full(B, 2))

    last = best.copy()
    it = np.ones(B, np.int64)  # position in `order` being added
    running = it < n
    while running.any():
        cur = order[rows, np.minimum(it, n - 1)]
        below = stack_prev[rows, last]
        pop = running & (it >= 3) & (_cross(xs, ys, rows, below, last, cur) <= 0)
        add = running & ~pop
        top = last[pop]
        stack_prev[rows[pop], top] = top
        in_hull[rows[pop], top] = 0
        last[pop] = below[pop]
        new = cur[add]
        in_hull[rows[add], new] = 1
        stack_prev[rows[add], new] = last[add]
        last[add] = new
        steps.push(running, best=best, atans=atans, in_hull_h=in_hull, stack_prev=stack_prev, last_stack=last,
                   i=cur, phase=np.where(pop, 3, 4))
        it += add
        running &= it < n
    rec.hint_sequence(steps.lengths, **steps.stacked())
    rec.output(in_hull=in_hull)
    return rec.finish()


@register(
    "jarvis_march", family="geometry",
    inputs="pos N sc, x N sc, y N sc", outputs="in_hull N m",
    hints="pred_h N ptr, in_hull_h N m, best N m1, last_point N m1, endpoint N m1, i N m1, phase G cat",
    classes={"phase": 2},
    sample=sample_disk_points,
    text=TextForm(train_lengths=CLRS_TEXT_LENGTHS[:5], val_stop=14, truncated_sample=_truncated_disk_points),
    stream=StreamForm(pred_as_input=True))
def jarvis_march(xs: np.ndarray, ys: np.ndarray):
    """Jarvis march (1973). xs, ys: [B, N].

    From the lowest point, each sweep over all points i keeps as `endpoint` the most clockwise candidate
    seen (one hint per i); the endpoint joins the hull (one more hint) unless it is already on it, which
    ends the march. `phase` is 0 for the first hint only."""
    xs, ys = _check_points("jarvis_march", xs, ys)
    B, n = xs.shape
    rows = np.arange(B)
    rec = Recorder("jarvis_march", n, batch=B)
    rec.input(pos=positions(n, B), x=xs, y=ys)
    pred = np.broadcast_to(np.maximum(np.arange(n) - 1, 0).astype(np.int32), (B, n))  # the array's order
    best = _lowest(xs, ys)
    in_hull = np.zeros((B, n), np.float32)
    zero = np.zeros(B, np.int64)
    one = np.ones(B, np.int64)
    steps = _Steps(B)
    on = np.ones(B, bool)
    steps.push(on, in_hull_h=in_hull, best=zero, last_point=zero, endpoint=zero, i=zero, phase=zero)
    in_hull[rows, best] = 1
    last = best.copy()
    endpoint = zero.copy()
    steps.push(on, in_hull_h=in_hull, best=best, last_point=last, endpoint=endpoint, i=zero, phase=one)

    it = np.zeros(B, np.int64)  # the point examined next; n: the sweep is over
    running = on.copy()
    while True:
        sweeping = running & (it < n)
        closing = running & ~sweeping
        running &= ~(closing & (in_hull[rows, endpoint] > 0))  # back at the start: done
        if not running.any():
            break
        closing &= running
        k = np.minimum(it, n - 1)
        turn = (k != last) & (k != endpoint) & (_cross(xs, ys, rows, last, endpoint, k) <= 0)
        endpoint = np.where(sweeping & ((endpoint == last) | turn), k, endpoint)
        in_hull[rows[closing], endpoint[closing]] = 1
        last = np.where(closing, endpoint, last)
        endpoint = np.where(closing, 0, endpoint)
        steps.push(running, in_hull_h=in_hull, best=best, last_point=last, endpoint=endpoint,
                   i=np.where(sweeping, k, 0), phase=one)
        it = np.where(sweeping, it + 1, 0)
    hints = steps.stacked()
    hints["pred_h"] = np.ascontiguousarray(np.broadcast_to(pred[:, None], hints["i"].shape + (n,)))
    rec.hint_sequence(steps.lengths, **hints)
    rec.output(in_hull=in_hull)
    return rec.finish()
