"""Searching algorithms (CLRS chapters 2, 9 and 12), recorded with the reference's probes.

All three run as lockstep batches (one loop iteration = one hint step of every running sample).
Minimum and binary search never move keys, so their `pred_h` is the constant order of the input;
quickselect partitions like quicksort and names elements by original index (see `sorting`).
"""

from __future__ import annotations

import numpy as np

from relreason.data import samplers
from relreason.data.algorithms import CLRS_TEXT_LENGTHS, StreamForm, TextForm, register
from relreason.data.algorithms.sorting import (History, SlotOrder, constant_hint, identity_order, mask_hints,
                                               one_hot, order_pointers, sample_keys)
from relreason.data.probes import Recorder, positions


def sample_search(rng: samplers.RandomState, length: int) -> tuple[float, np.ndarray]:
    """The reference's search sampler: sorted keys ~ U[0, 1)^length, then a target ~ U[0, 1)."""
    keys = samplers.random_sequence(rng, length)
    keys.sort()
    return rng.uniform(low=0.0, high=1.0), keys


@register(
    "minimum", family="searching",
    inputs="pos N sc, key N sc", outputs="min N m1", hints="pred_h N ptr, min_h N m1, i N m1",
    eval_multiplier=64,
    sample=sample_keys,
    text=TextForm(train_lengths=CLRS_TEXT_LENGTHS, val_stop=65),
    stream=StreamForm(pred_as_input=True))
def minimum(A: np.ndarray):
    """Minimum by a left-to-right scan. A: [B, N] keys. One initial hint, then one per scanned key.

    The whole scan is computed at once: the minimum's index changes at i exactly when A[i] is below
    the minimum of A[:i] (strictly, so the first of equal keys is kept)."""
    A = np.array(A, dtype=np.float64)  # [B, N]
    B, n = A.shape
    rec = Recorder("minimum", n, batch=B)
    rec.input(pos=positions(n, B), key=A)
    k = np.arange(n)
    prefix_min = np.minimum.accumulate(A, axis=1)
    lower = np.ones((B, n), bool)
    lower[:, 1:] = A[:, 1:] < prefix_min[:, :-1]
    best = np.maximum.accumulate(np.where(lower, k, 0), axis=1)  # [B, T = N]: the minimum's index after step t
    rec.hint_sequence(np.full(B, n), pred_h=constant_hint(order_pointers(identity_order(B, n)), n),
                      min_h=one_hot(best, n), i=one_hot(np.broadcast_to(k, (B, n)), n))
    rec.output(min=best[:, -1])
    return rec.finish()


@register(
    "binary_search", family="searching",
    inputs="pos N sc, key N sc, target G sc", outputs="return N m1",
    hints="pred_h N ptr, low N m1, high N m1, mid N m1",
    eval_multiplier=64,
    sample=sample_search,
    text=TextForm(trace=("low", "high"), answer_from_trace=True, parenthesized=True,
                  train_lengths=CLRS_TEXT_LENGTHS, val_stop=65),
    stream=StreamForm(pred_as_input=True),
    groups=("core8",))
def binary_search(x: np.ndarray, A: np.ndarray):
    """Binary search for the first key >= x (the last slot if there is none). x: [B] targets,
    A: [B, N] sorted keys. One initial hint, then one per halving of [low, high]."""
    x = np.array(x, dtype=np.float64)  # [B]
    A = np.array(A, dtype=np.float64)  # [B, N]
    B, n = A.shape
    rows = np.arange(B)
    rec = Recorder("binary_search", n, batch=B)
    rec.input(pos=positions(n, B), key=A, target=x)
    low, high = np.zeros(B, int), np.full(B, n - 1)
    hist = History(B)
    hist.push(True, low=low, high=high, mid=(low + high) // 2)
    running = low < high
    while running.any():
        mid = (low + high) // 2
        left = x <= A[rows, mid]
        high = np.where(running & left, mid, high)
        low = np.where(running & ~left, mid + 1, low)
        hist.push(running, low=low, high=high, mid=(low + high) // 2)
        running &= low < high
    steps = int(hist.lengths.max())
    rec.hint_sequence(hist.lengths, pred_h=constant_hint(order_pointers(identity_order(B, n)), steps),
                      **{k: one_hot(hist[k], n) for k in ("low", "high", "mid")})
    rec.output(**{"return": high})
    return rec.finish()


@register(
    "quickselect", family="searching",
    inputs="pos N sc, key N sc", outputs="median N m1",
    hints="pred_h N ptr, p N m1, r N m1, i N m1, j N m1, i_rank G sc, target G sc, pivot N m1",
    eval_multiplier=64,
    sample=sample_keys,
    text=TextForm(trace=("pivot",), answer_from_trace=True, train_lengths=CLRS_TEXT_LENGTHS, val_stop=65))
def quickselect(A: np.ndarray):
    """Quickselect (Hoare, 1961) for the median, rank N // 2 (0-based). A: [B, N] keys.

    No initial hint: one per partition loop step and one after placing the pivot, partitions as in
    quicksort. After each partition the search continues on one side with `target` the rank sought
    within the range [p, r]; even a one-key range is partitioned (one hint) before it is returned."""
    order = SlotOrder(A)
    A, rows = order.A, order.rows
    B, n = A.shape
    rec = Recorder("quickselect", n, batch=B)
    rec.input(pos=positions(n, B), key=A.copy())
    # p, r, target, i, j: [5, B]
    state = np.array([np.zeros(B, int), np.full(B, n - 1), np.full(B, n // 2), np.full(B, -1), np.zeros(B, int)])
    median = np.zeros(B, int)
    hist = History(B)
    running = np.ones(B, bool)
    while running.any():
        p, r, target, i, j = state
        step = running & (j < r)  # a partition loop iteration
        place = running & (j == r)  # the pivot (slot r == j) goes between the two parts
        take = step & (A[rows, j] <= A[rows, r])  # the pivot key stays in slot r during the partition
        i = i + take
        q = i + 1
        order.swap(np.where(take, i, np.where(place, q, j)), j)
        rank = q - p  # once placed, the pivot's rank within [p, r]
        # `i_rank` is absolute during the loop but relative to p once the pivot is placed.
        hist.push(running, pred=order.pred, nodes=order.at(p, r, q, j, np.where(step, r, q)),
                  ranks=np.array([np.where(step, q, rank), target]))
        found = place & (target == rank)
        median = np.where(found, order.pos[rows, q], median)
        running ^= found
        right = target > rank  # continue right of the pivot (else left of it)
        lo, hi = np.where(right, q + 1, p), np.where(right, r, q - 1)
        state = np.where(place & running, np.array([lo, hi, np.where(right, target - rank - 1, target), lo - 1, lo]),
                         np.array([p, r, target, i, j + step]))
    ranks = hist["ranks"] * 1.0 / n  # [2, T, B]
    rec.hint_sequence(hist.lengths, pred_h=hist["pred"], i_rank=ranks[0].T.copy(), target=ranks[1].T.copy(),
                      **mask_hints(hist["nodes"], ("p", "r", "i", "j", "pivot"), n))
    rec.output(median=median)
    return rec.finish()
