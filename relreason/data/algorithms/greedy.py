"""Greedy algorithms (CLRS chapter 16), recorded with the reference's probes.

Both algorithms sort once and then make one greedy decision per element, pushing one hint per
decision (plus one initial hint before the sort). Every sample of a batch therefore has the same
number of steps (n + 1): the decisions run as a loop over elements, each a few numpy operations over
the batch axis, and the hint trajectories are then built in bulk and handed to the recorder at once.
"""

from __future__ import annotations

import numpy as np

from relreason.data import samplers
from relreason.data.algorithms import CLRS_TEXT_LENGTHS, StreamForm, TextForm, register
from relreason.data.probes import Recorder, positions
from relreason.data.samplers import RandomState


def _array_order(steps: int, batch: int, n: int) -> np.ndarray:
    """`pred_h` of an untouched array at every step: node i points to i - 1, node 0 to itself."""
    out = np.empty((batch, steps, n), np.int32)  # [B, T, N], filled rather than broadcast: stored contiguous
    out[...] = np.maximum(np.arange(n) - 1, 0)
    return out


def sample_activities(rng: RandomState, length: int) -> tuple:
    """Start and finish times: the min and max of two U[0, 1) draws per activity."""
    a = samplers.random_sequence(rng, length)
    b = samplers.random_sequence(rng, length)
    return np.minimum(a, b), np.maximum(a, b)


def sample_tasks(rng: RandomState, length: int) -> tuple:
    """Deadlines uniform in 1..n (integers), weights U[0, 1)."""
    d = samplers.random_string(rng, length, chars=length) + 1
    w = samplers.random_sequence(rng, length)
    return d, w


def _selection_steps(order: np.ndarray, take: np.ndarray) -> np.ndarray:
    """`selected_h` for all n + 1 steps: step 0 selects nothing, step m + 1 adds order[m] if take[m].

    order, take: [B, N] (the m-th considered element and whether it was selected) -> [B, N + 1, N]."""
    B, n = order.shape
    joined = np.full((B, n), n + 1)  # [B, N] step at which each element became selected (n + 1: never)
    joined[np.arange(B)[:, None], order] = np.where(take, np.arange(1, n + 1), n + 1)
    return (np.arange(n + 1)[None, :, None] >= joined[:, None, :]).astype(np.float32)


@register(
    "activity_selector", family="greedy",
    inputs="pos N sc, s N sc, f N sc", outputs="selected N m", hints="pred_h N ptr, selected_h N m, m N m1, k N m1",
    sample=sample_activities,
    text=TextForm(train_lengths=CLRS_TEXT_LENGTHS, val_stop=41),
    stream=StreamForm(pred_as_input=True),
    groups=("core8",))
def activity_selector(s: np.ndarray, f: np.ndarray):
    """Activity selection (Gavril, 1972). s, f: [B, N] start and finish times.

    Hints: one initial step, then one per activity in order of finish time (m: the activity
    considered, k: the last one selected)."""
    B, n = s.shape
    rec = Recorder("activity_selector", n, batch=B)
    rec.input(pos=positions(n, B), s=s, f=f)
    rows = np.arange(B)
    order = np.argsort(f, axis=1)  # [B, N]; row by row the same sort the reference runs per sample
    take = np.zeros((B, n), bool)  # [B, M] decision m selected order[m]
    take[:, 0] = True  # the earliest-finishing activity is always selected
    last = np.zeros((B, n + 1), np.int64)  # [B, T] k at each step (0 at the initial step)
    last[:, 1] = order[:, 0]
    for m in range(1, n):  # the greedy choice depends on the previous one: sequential in m
        k = last[:, m]
        take[:, m] = s[rows, order[:, m]] >= f[rows, k]
        last[:, m + 1] = np.where(take[:, m], order[:, m], k)
    considered = np.concatenate([np.zeros((B, 1), np.int64), order], axis=1)  # [B, T]
    selected = _selection_steps(order, take)  # [B, T, N]
    rec.hint_sequence(np.full(B, n + 1), pred_h=_array_order(n + 1, B, n), selected_h=selected,
                      m=considered, k=last)
    rec.output(selected=selected[:, -1].copy())
    return rec.finish()


@register(
    "task_scheduling", family="greedy",
    inputs="pos N sc, d N sc, w N sc", outputs="selected N m", hints="pred_h N ptr, selected_h N m, i N m1, t G sc",
    sample=sample_tasks,
    text=TextForm(integer_inputs={"d"}, train_lengths=CLRS_TEXT_LENGTHS, val_stop=42),
    stream=StreamForm(pred_as_input=True))
def task_scheduling(d: np.ndarray, w: np.ndarray):
    """Unit-task scheduling with deadlines (Lawler, 1985). d, w: [B, N] deadlines and weights.

    Hints: one initial step, then one per task from the heaviest down (i: the task considered,
    t: how many tasks are scheduled so far)."""
    B, n = d.shape
    rec = Recorder("task_scheduling", n, batch=B)
    rec.input(pos=positions(n, B), d=d, w=w)
    order = np.argsort(-w, axis=1)  # [B, N] heaviest first; -w exactly as the reference sorts
    deadline = np.take_along_axis(np.asarray(d), order, axis=1)  # [B, M] deadline of the m-th task
    take = np.zeros((B, n), bool)
    take[:, 0] = True  # the heaviest task is scheduled first, unconditionally (t becomes 1)
    count = np.zeros((B, n + 1), np.int64)  # [B, T] t at each step
    count[:, 1] = 1
    for i in range(1, n):  # whether task i fits depends on how many were taken before it
        take[:, i] = count[:, i] < deadline[:, i]
        count[:, i + 1] = count[:, i] + take[:, i]
    considered = np.concatenate([np.zeros((B, 1), np.int64), order], axis=1)  # [B, T]
    selected = _selection_steps(order, take)
    rec.hint_sequence(np.full(B, n + 1), pred_h=_array_order(n + 1, B, n), selected_h=selected,
                      i=considered, t=count)
    rec.output(selected=selected[:, -1].copy())
    return rec.finish()
