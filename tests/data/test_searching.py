"""Searching algorithms against independent answers (argmin, bisection, sorting) and against plain
sequential textbook traces, in batches whose samples take different numbers of steps and with ties."""

from __future__ import annotations

import bisect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relreason.data import generate, run_algorithm
from relreason.data.algorithms import ALGORITHMS
from probe_traces import array_probe, observed




def minimum_trace(keys) -> list[dict]:
    same = array_probe(list(range(len(keys))))
    best, steps = 0, [dict(pred_h=same, min_h=0, i=0)]
    for i in range(1, len(keys)):
        if keys[best] > keys[i]:
            best = i
        steps.append(dict(pred_h=same, min_h=best, i=i))
    return steps


def binary_search_trace(x, keys) -> list[dict]:
    same = array_probe(list(range(len(keys))))
    low, high = 0, len(keys) - 1
    steps = [dict(pred_h=same, low=low, high=high, mid=(low + high) // 2)]
    while low < high:
        mid = (low + high) // 2
        if x <= keys[mid]:
            high = mid
        else:
            low = mid + 1
        steps.append(dict(pred_h=same, low=low, high=high, mid=(low + high) // 2))
    return steps


def quickselect_trace(keys) -> tuple[list[dict], int]:
    A, pos, n = list(keys), list(range(len(keys))), len(keys)
    steps = []

    def partition(p: int, r: int, target: int) -> int:
        i = p - 1
        for j in range(p, r):
            if A[j] <= A[r]:
                i += 1
                A[i], A[j], pos[i], pos[j] = A[j], A[i], pos[j], pos[i]
            steps.append(dict(pred_h=array_probe(pos), p=pos[p], r=pos[r], i=pos[i + 1], j=pos[j],
                              i_rank=(i + 1) / n, target=target / n, pivot=pos[r]))
        A[i + 1], A[r], pos[i + 1], pos[r] = A[r], A[i + 1], pos[r], pos[i + 1]
        steps.append(dict(pred_h=array_probe(pos), p=pos[p], r=pos[r], i=pos[i + 1], j=pos[r],
                          i_rank=(i + 1 - p) / n, target=target / n, pivot=pos[i + 1]))
        return i + 1

    p, r, target = 0, n - 1, n // 2
    while True:
        q = partition(p, r, target)
        if target == q - p:
            return steps, pos[q]
        if target < q - p:
            r = q - 1
        else:
            p, target = q + 1, target - (q - p) - 1


sizes = st.integers(2, 8)


@settings(max_examples=40, deadline=None)
@given(n=sizes, data=st.data())
def test_minimum_batch_with_ties(n, data):
    keys = np.array(data.draw(st.lists(st.lists(st.integers(0, 3), min_size=n, max_size=n), min_size=1, max_size=5)),
                    dtype=float)
    ds = ALGORITHMS.get("minimum").run(keys)
    for b in range(len(ds)):
        traj = ds.trajectory(b)
        assert observed(traj) == minimum_trace(list(keys[b]))
        assert traj.outputs["min"].argmax() == np.argmin(keys[b])  # the first of equal minima


@settings(max_examples=60, deadline=None)
@given(n=sizes, data=st.data())
def test_binary_search_batch_with_ties(n, data):
    B = data.draw(st.integers(1, 5))
    keys = np.sort(np.array(data.draw(st.lists(st.lists(st.integers(0, 3), min_size=n, max_size=n),
                                               min_size=B, max_size=B)), dtype=float), axis=1)
    x = np.array(data.draw(st.lists(st.integers(-1, 4), min_size=B, max_size=B)), dtype=float)
    ds = ALGORITHMS.get("binary_search").run(x, keys)
    for b in range(B):
        traj = ds.trajectory(b)
        assert observed(traj) == binary_search_trace(x[b], list(keys[b]))
        # The first key >= x, or the last slot when every key is smaller.
        assert traj.outputs["return"].argmax() == min(bisect.bisect_left(list(keys[b]), x[b]), n - 1)
        assert traj.length <= int(np.ceil(np.log2(n))) + 1


def test_binary_search_takes_target_first():
    traj = run_algorithm("binary_search", 0.35, np.array([0.1, 0.2, 0.3, 0.4, 0.5]))
    assert float(traj.inputs["target"]) == 0.35
    assert traj.outputs["return"].argmax() == 3
    # [0, 4] -> mid 2 (0.3 < x) -> [3, 4] -> mid 3 (0.4 >= x) -> [3, 3]
    assert traj.hints["low"].argmax(-1).tolist() == [0, 3, 3]
    assert traj.hints["high"].argmax(-1).tolist() == [4, 4, 3]
    assert traj.hints["mid"].argmax(-1).tolist() == [2, 3, 3]


def test_quickselect_mixed_length_batch_matches_textbook_trace():
    ds = generate("quickselect", num=24, size=9, seed=4)
    assert len(set(ds.lengths.tolist())) > 1
    for b in range(len(ds)):
        keys = list(ds.inputs["key"][b])
        steps, median = quickselect_trace(keys)
        traj = ds.trajectory(b)
        assert observed(traj) == steps
        assert traj.outputs["median"].argmax() == median
        assert keys[median] == sorted(keys)[len(keys) // 2]


@settings(max_examples=40, deadline=None)
@given(n=sizes, data=st.data())
def test_quickselect_batch_with_ties(n, data):
    keys = np.array(data.draw(st.lists(st.lists(st.integers(0, 3), min_size=n, max_size=n), min_size=1, max_size=5)),
                    dtype=float)
    ds = ALGORITHMS.get("quickselect").run(keys)
    for b in range(len(ds)):
        steps, median = quickselect_trace(list(keys[b]))
        traj = ds.trajectory(b)
        assert observed(traj) == steps
        assert keys[b][traj.outputs["median"].argmax()] == sorted(keys[b])[n // 2]


@pytest.mark.parametrize("name", ["minimum", "quickselect"])
def test_inputs_are_not_modified(name):
    keys = np.array([0.5, 0.1, 0.4, 0.2])
    traj = run_algorithm(name, keys)
    assert keys.tolist() == [0.5, 0.1, 0.4, 0.2] == traj.inputs["key"].tolist()
