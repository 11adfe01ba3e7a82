"""Greedy algorithms against brute force over all subsets, plus their hint invariants.

The reference's task scheduling accepts a task when the count of tasks taken so far is below its
deadline (it puts the task in the next free slot). That is not the matroid greedy's test (would the
set stay schedulable?), so it is optimal only when the heavier tasks never have the later deadlines;
we are faithful to it, so the brute-force optimum is checked in that regime, feasibility everywhere.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relreason.data import generate, run_algorithm
from relreason.data.algorithms import ALGORITHMS
from relreason.data.samplers import RandomState


def compatible(s: np.ndarray, f: np.ndarray, chosen) -> bool:
    """No two chosen activities overlap: one starts no earlier than the other finishes."""
    return all(s[b] >= f[a] or s[a] >= f[b] for a, b in itertools.combinations(chosen, 2))


def most_activities(s: np.ndarray, f: np.ndarray) -> int:
    n = len(s)
    return max(r for r in range(n + 1) for c in itertools.combinations(range(n), r) if compatible(s, f, c))


def schedulable(d: np.ndarray, chosen) -> bool:
    """Unit tasks fit before their deadlines iff at most t of them are due by time t, for every t."""
    due = sorted(d[i] for i in chosen)
    return all(due[t] >= t + 1 for t in range(len(due)))


def heaviest_schedule(d: np.ndarray, w: np.ndarray) -> float:
    n = len(d)
    return max(sum(w[i] for i in c) for r in range(n + 1) for c in itertools.combinations(range(n), r)
               if schedulable(d, c))


grid = st.integers(0, 6).map(lambda k: k / 6)  # a coarse grid: ties in start and finish times happen


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(grid, grid).filter(lambda t: t[0] != t[1]), min_size=1, max_size=7))
def test_activity_selector_selects_as_many_as_brute_force(pairs):
    # Positive durations, as the textbook assumes: with zero-length activities and tied finish times
    # earliest-finish-first can take the empty one first and lose an activity.
    s = np.array([min(a, b) for a, b in pairs])
    f = np.array([max(a, b) for a, b in pairs])
    chosen = np.flatnonzero(run_algorithm("activity_selector", s, f).outputs["selected"])
    assert compatible(s, f, chosen)
    assert len(chosen) == most_activities(s, f)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_task_scheduling_is_feasible_and_optimal_when_heavier_tasks_are_due_sooner(data):
    n = data.draw(st.integers(1, 7))
    d = np.array(data.draw(st.lists(st.integers(1, n), min_size=n, max_size=n)))
    w = np.array(data.draw(st.lists(grid, min_size=n, max_size=n)))
    chosen = np.flatnonzero(run_algorithm("task_scheduling", d, w).outputs["selected"])
    assert schedulable(d, chosen)
    # The same deadlines handed out so that heavier tasks are due no later: then the greedy is optimal.
    heavy_first = sorted(range(n), key=lambda i: (-w[i], i))
    d_sorted = np.empty(n, np.int64)
    d_sorted[heavy_first] = np.sort(d)
    if len(set(w.tolist())) < n:  # tied weights are processed in the sort's order: give them one deadline
        d_sorted = np.array([d_sorted[w == w[i]].min() for i in range(n)])
    best = heaviest_schedule(d_sorted, w)
    chosen = np.flatnonzero(run_algorithm("task_scheduling", d_sorted, w).outputs["selected"])
    assert w[chosen].sum() == pytest.approx(best)


def test_task_scheduling_follows_the_reference_rule_not_the_optimum():
    # Heaviest first: task 0 (due 2) takes slot 1; task 1 (due 1) then finds 1 task taken, not < 1, and
    # is dropped, although scheduling both (1 then 0) weighs 1.4.
    tr = run_algorithm("task_scheduling", np.array([2, 1]), np.array([0.9, 0.5]))
    np.testing.assert_array_equal(tr.outputs["selected"], [1, 0])
    assert heaviest_schedule(np.array([2, 1]), np.array([0.9, 0.5])) == pytest.approx(1.4)


def test_activity_selector_hand_example():
    # by finish time: 2 [0, .2) taken; 0 [.1, .4) overlaps; 1 [.3, .6) taken; 3 [.5, .9) overlaps.
    tr = run_algorithm("activity_selector", np.array([0.1, 0.3, 0.0, 0.5]), np.array([0.4, 0.6, 0.2, 0.9]))
    np.testing.assert_array_equal(tr.outputs["selected"], [0, 1, 1, 0])
    np.testing.assert_array_equal(tr.hints["m"].argmax(-1), [0, 2, 0, 1, 3])
    np.testing.assert_array_equal(tr.hints["k"].argmax(-1), [0, 2, 2, 1, 1])
    np.testing.assert_array_equal(tr.hints["pred_h"][0], [0, 0, 1, 2])


def test_task_scheduling_hand_example():
    # heaviest first: task 1 (due 1) fits; task 0 (due 1) does not; task 2 (due 2) fits second.
    tr = run_algorithm("task_scheduling", np.array([1, 1, 2]), np.array([0.5, 0.9, 0.3]))
    np.testing.assert_array_equal(tr.outputs["selected"], [0, 1, 1])
    np.testing.assert_array_equal(tr.hints["i"].argmax(-1), [0, 1, 0, 2])
    np.testing.assert_array_equal(tr.hints["t"], [0, 1, 1, 2])


@pytest.mark.parametrize("name", ["activity_selector", "task_scheduling"])
def test_greedy_hints_grow_the_selection_one_decision_at_a_time(name):
    ds = generate(name, num=40, size=9, seed=5)
    sel = ds.hints["selected_h"]  # [B, T, N]
    assert np.all(ds.lengths == ds.n + 1)
    assert not sel[:, 0].any()
    np.testing.assert_array_equal(sel[:, -1], ds.outputs["selected"])
    grows = np.diff(sel, axis=1)  # each decision adds at most the element it considers
    assert set(np.unique(grows)) <= {0, 1} and np.all(grows.sum(-1) <= 1)
    considered = ds.hints["m" if name == "activity_selector" else "i"][:, 1:]  # [B, N, N] one-hot
    assert np.all(grows <= considered)
    np.testing.assert_array_equal(considered.sum(1), np.ones((len(ds), ds.n)))  # each element once
    key = ds.inputs["f"] if name == "activity_selector" else -ds.inputs["w"]
    order = considered.argmax(-1)
    assert np.all(np.diff(np.take_along_axis(key, order, 1), axis=1) >= 0)  # in the greedy order
    if name == "activity_selector":  # k is always the latest selected activity
        k = ds.hints["k"][:, 1:].argmax(-1)
        assert np.all(np.take_along_axis(sel[:, 1:], k[..., None], 2) == 1)
    else:  # t counts the scheduled tasks
        np.testing.assert_array_equal(ds.hints["t"], sel.sum(-1))


def test_samplers_draw_the_reference_distributions():
    rng = RandomState(0)
    s, f = ALGORITHMS.get("activity_selector").sample(rng, 50)
    assert s.shape == (50,) and np.all(0 <= s) and np.all(s <= f) and np.all(f < 1)
    d, w = ALGORITHMS.get("task_scheduling").sample(rng, 50)
    assert d.dtype.kind == "i" and d.min() >= 1 and d.max() <= 50 and np.all((0 <= w) & (w < 1))
    # Same stream as the reference: two uniform arrays for activities, then deadlines before weights.
    rng, ref = RandomState(3), RandomState(3)
    s, f = ALGORITHMS.get("activity_selector").sample(rng, 4)
    a, b = ref.uniform(size=4), ref.uniform(size=4)
    np.testing.assert_array_equal(s, np.minimum(a, b))
    np.testing.assert_array_equal(f, np.maximum(a, b))
