"""Geometry against independent references: segment intersection by exact-fraction orientation tests,
convex hulls by Andrew's monotone chain in exact arithmetic, the collinearity check by a plain loop over
triples, and the samplers by the reference's literal call sequences; plus hand-traced tiny examples."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from relreason.data import generate, run_algorithm
from relreason.data.algorithms import geometry
from relreason.data.samplers import RandomState
from relreason.errors import RelreasonError


def orientation(p, q, r) -> int:
    """Sign of (q - p) x (r - p), exactly: 1 left turn, -1 right turn, 0 collinear."""
    (px, py), (qx, qy), (rx, ry) = [(Fraction(x), Fraction(y)) for x, y in (p, q, r)]
    v = (qx - px) * (ry - py) - (qy - py) * (rx - px)
    return (v > 0) - (v < 0)


def in_box(p, q, r) -> bool:
    return min(p[0], q[0]) <= r[0] <= max(p[0], q[0]) and min(p[1], q[1]) <= r[1] <= max(p[1], q[1])


def segments_cross(pts) -> bool:
    """Closed segments (p0, p1) and (p2, p3) share a point: exact orientations, collinear overlaps included."""
    p0, p1, p2, p3 = pts
    d = [orientation(p2, p3, p0), orientation(p2, p3, p1), orientation(p0, p1, p2), orientation(p0, p1, p3)]
    if d[0] * d[1] < 0 and d[2] * d[3] < 0:
        return True
    return any(d[k] == 0 and in_box(*seg, pts[k]) for k, seg in ((0, (p2, p3)), (1, (p2, p3)), (2, (p0, p1)), (3, (p0, p1))))


def monotone_chain(pts) -> list[int]:
    """Indices of the strict convex hull (no collinear edge points), counterclockwise, starting at the
    lowest point (leftmost among the lowest). Andrew's algorithm in exact arithmetic."""
    order = sorted(range(len(pts)), key=lambda i: (pts[i][0], pts[i][1]))

    def half(seq):
        out: list[int] = []
        for i in seq:
            while len(out) >= 2 and orientation(pts[out[-2]], pts[out[-1]], pts[i]) <= 0:
                out.pop()
            out.append(i)
        return out[:-1]

    hull = half(order) + half(order[::-1]) if len(pts) > 1 else order
    start = min(hull, key=lambda i: (pts[i][1], pts[i][0]))
    k = hull.index(start)
    return hull[k:] + hull[:k]


def points(xs, ys):
    return list(zip(xs.tolist(), ys.tolist()))


def index(x: np.ndarray) -> np.ndarray:
    return x.argmax(axis=-1)


# --- segments_intersect ------------------------------------------------------------------------------


def test_segments_against_exact_orientation():
    ds = generate("segments_intersect", num=400, size=4, seed=5)
    for b in range(len(ds)):
        pts = points(ds.inputs["x"][b], ds.inputs["y"][b])
        assert ds.outputs["intersect"][b] == segments_cross(pts)
        dirs, on_seg = ds.hints["dir"][b, -1], ds.hints["on_seg"][b, -1]
        for k, (i, j) in zip(range(4), ((2, 3), (2, 3), (0, 1), (0, 1))):
            assert np.sign(dirs[k]) == orientation(pts[i], pts[k], pts[j])  # dir = (p_k - p_i) x (p_j - p_i)
            assert on_seg[k] == in_box(pts[i], pts[j], pts[k])
    assert 0.3 < ds.outputs["intersect"].mean() < 0.7  # the sampler's fair coin


def test_segments_hint_schedule():
    tr = run_algorithm("segments_intersect", np.array([0.0, 2, 0, 2]), np.array([0.0, 2, 2, 0]))
    assert [index(tr.hints[k]).tolist() for k in "ijk"] == [[0, 2, 2, 0, 0], [0, 3, 3, 1, 1], [0, 0, 1, 2, 3]]
    # p0 = (0, 0), p1 = (2, 2), p2 = (0, 2), p3 = (2, 0): e.g. dir[0] = (p0 - p2) x (p3 - p2) = (0, -2) x (2, -2) = 4
    assert tr.hints["dir"].tolist() == [[0, 0, 0, 0], [4, 0, 0, 0], [4, -4, 0, 0], [4, -4, -4, 0], [4, -4, -4, 4]]
    assert tr.outputs["intersect"] == 1


@pytest.mark.parametrize("xs, ys, expected", [
    ([0, 2, 1, 1], [0, 0, 0, 3], 1),  # an endpoint on the other segment
    ([0, 2, 1, 3], [0, 0, 0, 0], 1),  # collinear, overlapping
    ([0, 1, 2, 3], [0, 0, 0, 0], 0),  # collinear, apart
    ([0, 2, 0, 2], [0, 0, 1, 1], 0),  # parallel
    ([0, 4, 1, 2], [0, 4, 2, 5], 0),  # the lines cross, the segments do not
])
def test_segments_hand_cases(xs, ys, expected):
    tr = run_algorithm("segments_intersect", np.array(xs, float), np.array(ys, float))
    assert tr.outputs["intersect"] == expected == segments_cross(list(zip(xs, ys)))


def reference_segments(rng: RandomState) -> tuple[np.ndarray, np.ndarray]:
    """The reference's segment sampler, literally: coin, then xs and ys per attempt."""
    def ccw(a, b, c):
        return (c[1] - a[1]) * (b[0] - a[0]) > (b[1] - a[1]) * (c[0] - a[0])
    coin = rng.binomial(1, 0.5)
    while True:
        xs, ys = rng.uniform(low=0.0, high=1.0, size=(4,)), rng.uniform(low=0.0, high=1.0, size=(4,))
        p = list(zip(xs, ys))
        if (ccw(p[0], p[2], p[3]) != ccw(p[1], p[2], p[3]) and ccw(p[0], p[1], p[2]) != ccw(p[0], p[1], p[3])) == coin:
            return xs, ys


def test_segment_sampler_draws_the_reference_stream():
    ours, ref = RandomState(9), RandomState(9)
    for _ in range(300):
        for a, b in zip(geometry.sample_segments(ours, 16), reference_segments(ref)):
            assert np.array_equal(a, b)
    assert ours.randint(1 << 30) == ref.randint(1 << 30)


def test_segments_need_four_points():
    with pytest.raises(RelreasonError):
        run_algorithm("segments_intersect", np.zeros(5), np.zeros(5))


# --- convex hulls ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["graham_scan", "jarvis_march"])
@pytest.mark.parametrize("size", [3, 7, 20])
def test_hull_is_the_monotone_chain(name, size):
    ds = generate(name, num=30, size=size, seed=size)
    for b in range(len(ds)):
        hull = monotone_chain(points(ds.inputs["x"][b], ds.inputs["y"][b]))
        assert np.flatnonzero(ds.outputs["in_hull"][b]).tolist() == sorted(hull)
        tr = ds.trajectory(b)
        assert np.array_equal(tr.hints["in_hull_h"][-1], ds.outputs["in_hull"][b])
        assert index(tr.hints["best"][-1]) == hull[0]  # the lowest point


@pytest.mark.parametrize("size", [5, 16])
def test_graham_final_stack_walks_the_hull(size):
    ds = generate("graham_scan", num=20, size=size, seed=1)
    for b in range(len(ds)):
        tr = ds.trajectory(b)
        pts = points(tr.inputs["x"], tr.inputs["y"])
        hull = monotone_chain(pts)
        prev, top = tr.hints["stack_prev"][-1], int(index(tr.hints["last_stack"][-1]))
        stack = [top]
        while prev[stack[-1]] != stack[-1]:
            stack.append(int(prev[stack[-1]]))
        assert stack[::-1] == hull  # bottom (the lowest point) to top, counterclockwise
        phase = index(tr.hints["phase"]).tolist()
        assert phase[:3] == [0, 1, 2] and set(phase[3:]) <= {3, 4} and phase.count(4) == size - 1
        angles = np.arctan2(np.array(pts)[:, 1] - pts[hull[0]][1], np.array(pts)[:, 0] - pts[hull[0]][0])
        angles[hull[0]] = 0
        np.testing.assert_allclose(tr.hints["atans"][-1], angles, atol=1e-12)


@pytest.mark.parametrize("size", [5, 16])
def test_jarvis_adds_the_hull_in_order(size):
    ds = generate("jarvis_march", num=20, size=size, seed=2)
    for b in range(len(ds)):
        tr = ds.trajectory(b)
        hull = monotone_chain(points(tr.inputs["x"], tr.inputs["y"]))
        h = len(hull)
        assert tr.length == 2 + h * size + (h - 1)  # a sweep of all points per hull point, plus the adds
        grew = np.flatnonzero(np.diff(tr.hints["in_hull_h"].sum(axis=1)) > 0) + 1
        assert index(tr.hints["last_point"][grew]).tolist() == hull
        sweep = index(tr.hints["i"][2:2 + size]).tolist()
        assert sweep == list(range(size))


def test_hull_hand_example():
    # a square with one inside point: Graham pops it once; Jarvis sweeps 5 points per hull corner
    xs, ys = np.array([0.0, 2, 2, 0, 1]), np.array([0.0, 0, 2, 2, 0.5])
    tr = run_algorithm("graham_scan", xs, ys)
    assert index(tr.hints["phase"]).tolist() == [0, 1, 2, 4, 4, 3, 4, 4]
    assert index(tr.hints["i"]).tolist() == [0, 0, 0, 1, 4, 2, 2, 3]
    assert tr.outputs["in_hull"].tolist() == [1, 1, 1, 1, 0]
    tr = run_algorithm("jarvis_march", xs, ys)
    assert tr.length == 2 + 4 * 5 + 3 and tr.outputs["in_hull"].tolist() == [1, 1, 1, 1, 0]
    assert tr.hints["pred_h"][0].tolist() == [0, 0, 1, 2, 3]


@pytest.mark.parametrize("eps", [1e-12, 1e-3, 5e-2])
def test_collinearity_check_is_the_loop_over_triples(eps):
    rng = np.random.default_rng(0)
    outcomes = set()
    for n in (3, 6, 12, 25):
        for _ in range(10):
            xs, ys = rng.uniform(-2, 2, n), rng.uniform(-2, 2, n)
            loop = any(abs((xs[j] - xs[i]) * (ys[k] - ys[i]) - (ys[j] - ys[i]) * (xs[k] - xs[i])) < eps
                       for i, j, k in itertools.combinations(range(n), 3))
            assert geometry.has_collinear_triple(xs, ys, eps) == loop
            outcomes.add(loop)
    assert outcomes == ({False} if eps == 1e-12 else {False, True})


def reference_disk(rng: RandomState, length: int, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """The reference's convex-hull sampler, literally (rejection over every triple in a loop)."""
    while True:
        thetas = rng.uniform(low=0.0, high=2.0 * np.pi, size=(length,))
        rs = 2.0 * np.sqrt(rng.uniform(low=0.0, high=1.0, size=(length,)))
        xs, ys = rs * np.cos(thetas) + 0.0, rs * np.sin(thetas) + 0.0
        p = np.stack([xs, ys], axis=1)
        if not any(abs((b - a)[0] * (c - a)[1] - (b - a)[1] * (c - a)[0]) < eps for a, b, c in itertools.combinations(p, 3)):
            return xs, ys


@pytest.mark.parametrize("eps", [1e-12, 2e-2])  # the large eps makes redraws frequent
def test_disk_sampler_draws_the_reference_stream(eps, monkeypatch):
    monkeypatch.setattr(geometry, "COLLINEAR_EPS", eps)
    ours, ref = RandomState(4), RandomState(4)
    for _ in range(30):
        xs, ys = geometry.sample_disk_points(ours, 8)
        assert all(np.array_equal(a, b) for a, b in zip((xs, ys), reference_disk(ref, 8, eps)))
        assert np.all(np.hypot(xs, ys) <= 2.0)
    assert ours.randint(1 << 30) == ref.randint(1 << 30)


def test_unreachable_sampler_is_a_user_error(monkeypatch):
    monkeypatch.setattr(geometry, "COLLINEAR_EPS", 10.0)
    monkeypatch.setattr(geometry, "COLLINEAR_ATTEMPTS", 3)
    with pytest.raises(RelreasonError):
        geometry.sample_disk_points(RandomState(0), 5)
