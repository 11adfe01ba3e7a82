"""Kadane's maximum subarray against brute force over all subarrays and a sequential textbook trace.

Keys on a grid of quarters keep every sum exact in binary floating point, so the brute-force sums and
the algorithm's running sums compare with ==, and ties between subarrays are common."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from relreason.data import generate, run_algorithm
from relreason.data.algorithms import ALGORITHMS
from probe_traces import array_probe, observed

NAME = "find_maximum_subarray_kadane"




def kadane_trace(keys) -> list[dict]:
    same = array_probe(list(range(len(keys))))
    best_low = best_high = i = 0
    best_sum = run_sum = keys[0]
    steps = [dict(pred_h=same, best_low=0, best_high=0, best_sum=best_sum, i=0, j=0, sum=run_sum)]
    for j in range(1, len(keys)):
        if run_sum + keys[j] >= keys[j]:
            run_sum += keys[j]
        else:
            i, run_sum = j, keys[j]
        if run_sum > best_sum:
            best_low, best_high, best_sum = i, j, run_sum
        steps.append(dict(pred_h=same, best_low=best_low, best_high=best_high, best_sum=best_sum, i=i, j=j,
                          sum=run_sum))
    return steps


def best_subarray_sum(keys) -> float:
    return max(sum(keys[a: b + 1]) for a in range(len(keys)) for b in range(a, len(keys)))


quarters = st.integers(-4, 4).map(lambda k: k / 4)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 8), data=st.data())
def test_batch_matches_brute_force_and_trace(n, data):
    keys = np.array(data.draw(st.lists(st.lists(quarters, min_size=n, max_size=n), min_size=1, max_size=5)))
    ds = ALGORITHMS.get(NAME).run(keys)
    for b in range(len(ds)):
        traj, row = ds.trajectory(b), list(keys[b])
        steps = kadane_trace(row)
        assert observed(traj) == steps
        start, end = int(traj.outputs["start"].argmax()), int(traj.outputs["end"].argmax())
        assert start <= end
        assert sum(row[start: end + 1]) == best_subarray_sum(row) == steps[-1]["best_sum"]


def test_hint_invariants_on_sampled_keys():
    ds = generate(NAME, num=16, size=12, seed=2)
    assert (ds.lengths == 12).all()
    keys = ds.inputs["key"]
    assert keys.min() >= -1 and keys.max() < 1  # the reference's U[-1, 1) keys
    low, high = ds.hints["best_low"].argmax(-1), ds.hints["best_high"].argmax(-1)  # [B, T]
    i, j = ds.hints["i"].argmax(-1), ds.hints["j"].argmax(-1)
    assert (j == np.arange(12)).all() and (i <= j).all() and (low <= high).all()
    assert (np.diff(ds.hints["best_sum"], axis=1) >= 0).all()  # the best sum never drops
    for b in range(len(ds)):
        for t in range(12):
            assert np.isclose(ds.hints["sum"][b, t], keys[b, i[b, t]: t + 1].sum())
            assert np.isclose(ds.hints["best_sum"][b, t], keys[b, low[b, t]: high[b, t] + 1].sum())


def test_by_hand():
    traj = run_algorithm(NAME, np.array([-0.5, 0.25, 0.5, -1.0, 0.5]))
    assert traj.outputs["start"].argmax() == 1 and traj.outputs["end"].argmax() == 2  # 0.25 + 0.5
    # Restarts at 0.25 (-0.5 + 0.25 < 0.25) and at the last 0.5 (0.75 - 1 + 0.5 < 0.5).
    assert traj.hints["i"].argmax(-1).tolist() == [0, 1, 1, 1, 4]
    assert traj.hints["sum"].tolist() == [-0.5, 0.25, 0.75, -0.25, 0.5]
    assert traj.hints["best_sum"].tolist() == [-0.5, 0.25, 0.75, 0.75, 0.75]
