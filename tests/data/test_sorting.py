"""Sorting algorithms against Python's `sorted` and against plain sequential textbook traces.

The package runs the sorts as vectorized lockstep batches; the traces here are the textbook loops
(CLRS 2.1, 2-2, 6.4, 7.1), one sample at a time on Python lists, recording the same probe points. A
batch whose samples take different numbers of steps, and keys with ties (integer keys), are where a
lockstep rewrite can go wrong, so both are exercised.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relreason.data import generate, run_algorithm
from relreason.data.algorithms import ALGORITHMS
from probe_traces import array_probe, observed

SORTS = ("insertion_sort", "bubble_sort", "heapsort", "quicksort")



def heap_probe(order: list[int], size: int) -> list[int]:
    probe = list(range(len(order)))
    for k in range(1, size):
        probe[order[k]] = order[(k - 1) // 2]
    return probe


def insertion_trace(keys) -> list[dict]:
    A, pos = list(keys), list(range(len(keys)))
    steps = [dict(pred_h=array_probe(pos), i=0, j=0)]
    for j in range(1, len(A)):
        key, i = A[j], j - 1
        while i >= 0 and A[i] > key:
            A[i + 1], pos[i + 1] = A[i], pos[i]
            i -= 1
        A[i + 1] = key
        stored, pos[i + 1] = pos[i + 1], j
        steps.append(dict(pred_h=array_probe(pos), i=stored, j=j))
    return steps


def bubble_trace(keys) -> list[dict]:
    A, pos = list(keys), list(range(len(keys)))
    steps = [dict(pred_h=array_probe(pos), i=0, j=0)]
    for i in range(len(A) - 1):
        for j in range(len(A) - 1, i, -1):
            if A[j] < A[j - 1]:
                A[j - 1], A[j] = A[j], A[j - 1]
                pos[j - 1], pos[j] = pos[j], pos[j - 1]
            steps.append(dict(pred_h=array_probe(pos), i=pos[i], j=pos[j]))
    return steps


def heapsort_trace(keys) -> list[dict]:
    A, pos, n = list(keys), list(range(len(keys))), len(keys)
    steps = [dict(pred_h=array_probe(pos), parent=heap_probe(pos, n), i=n - 1, j=n - 1, largest=n - 1,
                  heap_size=n - 1, phase=0)]

    def heapify(i: int, size: int, ind: int, phase: int) -> None:
        left, right = 2 * i + 1, 2 * i + 2
        largest = left if left < size and A[left] > A[i] else i
        if right < size and A[right] > A[largest]:
            largest = right
        A[i], A[largest] = A[largest], A[i]
        pos[i], pos[largest] = pos[largest], pos[i]
        steps.append(dict(pred_h=array_probe(pos), parent=heap_probe(pos, size), i=pos[ind], j=pos[i],
                          largest=pos[largest], heap_size=pos[size - 1], phase=phase))
        if largest != i:
            heapify(largest, size, ind, phase)

    for i in reversed(range(n)):
        heapify(i, n, i, 0)
    size = n
    for i in reversed(range(1, n)):
        A[0], A[i] = A[i], A[0]
        pos[0], pos[i] = pos[i], pos[0]
        size -= 1
        steps.append(dict(pred_h=array_probe(pos), parent=heap_probe(pos, size), i=pos[0], j=pos[i], largest=0,
                          heap_size=pos[size - 1], phase=1))
        heapify(0, size, i, 2)
    return steps


def quicksort_trace(keys) -> list[dict]:
    A, pos = list(keys), list(range(len(keys)))
    steps = []

    def note(p: int, r: int, i: int, j: int) -> None:
        steps.append(dict(pred_h=array_probe(pos), p=pos[p], r=pos[r], i=pos[i], j=pos[j]))

    def sort(p: int, r: int) -> None:
        if p >= r:
            return
        i = p - 1
        for j in range(p, r):
            if A[j] <= A[r]:
                i += 1
                A[i], A[j], pos[i], pos[j] = A[j], A[i], pos[j], pos[i]
            note(p, r, i + 1, j)
        A[i + 1], A[r], pos[i + 1], pos[r] = A[r], A[i + 1], pos[r], pos[i + 1]
        note(p, r, i + 1, r)
        sort(p, i)
        sort(i + 2, r)

    sort(0, len(A) - 1)
    return steps


TRACES = {"insertion_sort": insertion_trace, "bubble_sort": bubble_trace, "heapsort": heapsort_trace,
          "quicksort": quicksort_trace}



def decode_order(pred: np.ndarray) -> list[int]:
    """The order an "array" pointer output describes: from the element pointing to itself onwards."""
    succ = {int(p): e for e, p in enumerate(pred) if p != e}
    order = [int(np.flatnonzero(pred == np.arange(len(pred)))[0])]
    while order[-1] in succ:
        order.append(succ[order[-1]])
    return order


def check_against_trace(name: str, traj, keys) -> None:
    want = TRACES[name](list(keys))
    assert observed(traj) == want
    assert traj.outputs["pred"].tolist() == want[-1]["pred_h"]  # the last hint is the sorted state


integer_keys = st.lists(st.integers(0, 3), min_size=2, max_size=7)  # few values: ties are common


@pytest.mark.parametrize("name", SORTS)
def test_mixed_length_batch_matches_textbook_trace(name):
    ds = generate(name, num=24, size=7, seed=5)
    if name in ("heapsort", "quicksort"):
        assert len(set(ds.lengths.tolist())) > 1  # the batch really mixes trajectory lengths
    for b in range(len(ds)):
        check_against_trace(name, ds.trajectory(b), ds.inputs["key"][b])


@pytest.mark.parametrize("name", SORTS)
@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 7), data=st.data())
def test_batch_with_ties_matches_textbook_trace(name, n, data):
    keys = np.array(data.draw(st.lists(st.lists(st.integers(0, 3), min_size=n, max_size=n), min_size=1, max_size=5)),
                    dtype=float)
    ds = ALGORITHMS.get(name).run(keys)
    for b in range(len(ds)):
        check_against_trace(name, ds.trajectory(b), keys[b])


@pytest.mark.parametrize("name", SORTS)
@settings(max_examples=30, deadline=None)
@given(keys=integer_keys)
def test_output_is_a_sorted_permutation(name, keys):
    pred = run_algorithm(name, np.array(keys, dtype=float)).outputs["pred"]
    order = decode_order(pred)
    assert sorted(order) == list(range(len(keys)))
    assert [keys[e] for e in order] == sorted(keys)
    if name in ("insertion_sort", "bubble_sort"):  # stable sorts keep equal keys in input order
        assert order == sorted(range(len(keys)), key=lambda e: keys[e])


def test_step_counts():
    n = 9
    assert (generate("insertion_sort", num=5, size=n, seed=0).lengths == n).all()
    assert (generate("bubble_sort", num=5, size=n, seed=0).lengths == 1 + n * (n - 1) // 2).all()


def test_insertion_sort_by_hand():
    traj = run_algorithm("insertion_sort", np.array([0.3, 0.1, 0.2]))
    assert traj.hints["pred_h"].tolist() == [[0, 0, 1], [1, 1, 0], [2, 1, 1]]
    assert traj.hints["i"].argmax(-1).tolist() == [0, 0, 0]
    assert traj.hints["j"].argmax(-1).tolist() == [0, 1, 2]
    assert traj.outputs["pred"].tolist() == [2, 1, 1]  # order 1, 2, 0: 0.1 < 0.2 < 0.3


def test_quicksort_by_hand():
    # Partition [0.2, 0.3, 0.1] around 0.1: nothing is <= it, so the pivot swaps to the front; then the
    # right part [0.3, 0.2] is partitioned around 0.2. Five hints, no initial one.
    traj = run_algorithm("quicksort", np.array([0.2, 0.3, 0.1]))
    assert traj.length == 5
    assert traj.hints["p"].argmax(-1).tolist() == [0, 0, 2, 1, 0]
    assert traj.hints["r"].argmax(-1).tolist() == [2, 2, 0, 0, 1]
    assert traj.outputs["pred"].tolist() == [2, 0, 2]  # order 2, 0, 1


def test_heapsort_beyond_one_byte_per_slot():
    """Above 256 keys a slot's element no longer fits a byte (heapsort logs its orders as 16-bit values)."""
    ds = generate("heapsort", num=1, size=257, seed=3)
    for b in range(len(ds)):
        check_against_trace("heapsort", ds.trajectory(b), ds.inputs["key"][b])


def test_heapsort_phases_and_heap_pointers():
    traj = run_algorithm("heapsort", np.random.RandomState(0).uniform(size=8))
    phase = traj.hints["phase"].argmax(-1)
    assert phase[0] == 0 and (np.diff(phase[phase != 1]) >= 0).all()  # build, then extract/re-heapify
    assert (phase == 1).sum() == 8 - 1  # one extraction per slot but the root
    assert traj.hints["parent"][-1].tolist() == list(range(8))  # a heap of one: everyone points to itself


def test_inputs_are_not_modified():
    keys = np.array([0.5, 0.1, 0.4, 0.2])
    for name in SORTS:
        traj = run_algorithm(name, keys)
        assert keys.tolist() == [0.5, 0.1, 0.4, 0.2]
        assert traj.inputs["key"].tolist() == keys.tolist()
