"""Dynamic programming (CLRS chapter 15), recorded with the reference's probes.

All three fill an [N, N] table and run as lockstep batches over the table's cells:
- matrix_chain_order and lcs_length update every cell at once from the previous step's table
  (Jacobi-style, as the reference does) until the table stops changing, so samples stop at
  different steps;
- optimal_bst fills one diagonal (subproblem length) per step, so every sample runs n + 1 steps.
A cell's choice over its split points is a masked min over a [B, cells, splits] array, with ties
going to the lowest split, as the textbook's strict `<` scan gives.
"""

from __future__ import annotations

import numpy as np

from relreason.data import samplers
from relreason.data.algorithms import CLRS_TEXT_LENGTHS, StreamForm, TextForm, register
from relreason.data.probes import Recorder, positions
from relreason.data.samplers import RandomState

LCS_DIAGONAL, LCS_UP, LCS_LEFT, LCS_BLANK = range(4)  # `b` classes: arrows of the LCS table, blank cell
BST_UNSET = 1e9  # e[i, j] before any root is tried, exactly the reference's sentinel


def _array_order(n: int) -> np.ndarray:
    """`pred_h` of an untouched array: node i points to i - 1, node 0 to itself. [N]"""
    return np.maximum(np.arange(n) - 1, 0)


def _tiled(value: np.ndarray, shape: tuple, dtype: type) -> np.ndarray:
    """`value` broadcast to `shape` as a contiguous array of its own (a broadcast view would be copied
    later, and an astype of one keeps its zero strides)."""
    out = np.empty(shape, dtype)
    out[...] = value
    return out


def sample_chain(rng: RandomState, length: int) -> tuple:
    """Matrix dimensions p ~ U[0, 1)^n (the sorting sampler): n nodes, n - 1 matrices."""
    return (samplers.random_sequence(rng, length),)


def sample_strings(rng: RandomState, length: int) -> tuple:
    """Two strings over 4 characters of lengths n - n // 2 and n // 2 (n nodes in all)."""
    x = samplers.random_string(rng, length - length // 2)
    y = samplers.random_string(rng, length // 2)
    return x, y


def sample_bst(rng: RandomState, length: int) -> tuple:
    """2n + 1 uniforms normalized to sum 1: key probabilities p (n), gap probabilities q (n + 1)."""
    arr = samplers.random_sequence(rng, 2 * length + 1)
    arr /= np.sum(arr)
    return arr[:length], arr[length:]


@register(
    "matrix_chain_order", family="dynamic_programming",
    inputs="pos N sc, p N sc", outputs="s E ptr", hints="pred_h N ptr, m E sc, s_h E ptr, msk E m",
    sample=sample_chain,
    text=TextForm(train_lengths=CLRS_TEXT_LENGTHS[:3], val_stop=13),
    stream=StreamForm(pred_as_input=True),
    groups=("core8",))
def matrix_chain_order(p: np.ndarray):
    """Matrix-chain multiplication order. p: [B, N]; matrix i (1 <= i < N) is p[i-1] x p[i].

    Each step re-derives every cell m[i, j] (1 <= i < j < N) from the previous step's table over the
    splits k whose two halves are already known, keeping the old value unless a split is strictly
    cheaper; known chain lengths roughly double per step, then values settle. s: [B, N, N].

    The table is kept by chain length L = j - i, twice: `by_start[b, i, L]` = m[i, i + L] and
    `by_end[b, j, N - 1 - L]` = m[j - L, j], with +inf for a cell not yet known (so an unknown half
    makes a split infinite and msk is m < inf). Then the halves m[i, k] and m[k + 1, j] of the splits
    k = i .. j - 1 of all cells of one length are two slices, k ascending in both."""
    B, n = p.shape
    rec = Recorder("matrix_chain_order", n, batch=B)
    rec.input(pos=positions(n, B), p=p)
    by_start = np.full((B, n, n), np.inf)
    by_start[:, 1:, 0] = 0.0  # single matrices cost 0
    by_end = np.full((B, n, n), np.inf)
    by_end[:, 1:, n - 1] = 0.0
    split = np.zeros((B, n, n), np.int64)  # split[b, i, L] = s[i, i + L]
    # Per chain length L: the cells (i, i + L) for i = 1 .. n - 1 - L and their split costs.
    lengths = []
    for L in range(1, n - 1):
        i = np.arange(1, n - L)
        k = i[:, None] + np.arange(L)  # [cells, L] splits
        cost = (p[:, i - 1, None] * p[:, k]) * p[:, i + L, None]  # [B, cells, L] p[i-1] p[k] p[j], same rounding
        lengths.append((L, i, cost))
    running = np.ones(B, bool)
    steps = np.zeros(B, np.int64)
    hist_m, hist_s = [], []
    while running.any():
        prev_start, prev_end = by_start.copy(), by_end.copy()
        hist_m.append(prev_start)
        hist_s.append(split.copy())
        steps += running
        for L, i, cost in lengths:
            q = prev_start[:, 1:n - L, :L] + prev_end[:, 1 + L:, n - L:] + cost  # [B, cells, L] inf unless both known
            arg = q.argmin(axis=2)  # [B, cells] lowest k among the cheapest
            best = np.take_along_axis(q, arg[..., None], axis=2)[..., 0]
            old = prev_start[:, 1:n - L, L]
            # Strictly cheaper, or the first known split of an unknown cell; a finished sample stays as it was.
            better = (best < old) & running[:, None]
            by_start[:, 1:n - L, L] = by_end[:, 1 + L:, n - 1 - L] = np.where(better, best, old)
            split[:, 1:n - L, L] = np.where(better, i + arg, split[:, 1:n - L, L])
        running &= ~np.all(by_start == prev_start, axis=(1, 2))
    m = np.stack(hist_m, axis=1)  # [B, T, N, L]
    known = m < np.inf
    rec.hint_sequence(steps, pred_h=_tiled(_array_order(n), (B, len(hist_m), n), np.int32),
                      m=_by_cell(np.where(known, m, 0.0), np.float64), msk=_by_cell(known, np.float32),
                      s_h=_by_cell(np.stack(hist_s, axis=1), np.int32))
    rec.output(s=_by_cell(split, np.int64))
    return rec.finish()


def _by_cell(by_length: np.ndarray, dtype: type) -> np.ndarray:
    """A table by chain length [..., N, L] (entry (i, L) = cell (i, i + L)) as cells [..., N, N], zeros below
    the diagonal."""
    n = by_length.shape[-1]
    out = np.zeros(by_length.shape, dtype)
    for i in range(n):
        out[..., i, i:] = by_length[..., i, :n - i]
    return out


def _string_pairs(table: np.ndarray, n: int) -> np.ndarray:
    """A first-string x second-string table [..., X, Y] placed into node pairs [..., N, N] (zeros elsewhere)."""
    nx = table.shape[-2]
    out = np.zeros(table.shape[:-2] + (n, n), table.dtype)
    out[..., :nx, nx:] = table
    return out


def _string_pairs_cat(table: np.ndarray, n: int) -> np.ndarray:
    """`b` classes [..., X, Y] as node-pair one-hots [..., N, N, 4]; cells outside the table are MASKED:
    -1 in the blank class and 0 elsewhere."""
    nx = table.shape[-2]
    out = np.zeros(table.shape[:-2] + (n, n, 4), np.float32)
    out[..., LCS_BLANK] = -1
    out[..., :nx, nx:, :] = table[..., None] == np.arange(4)
    return out


@register(
    "lcs_length", family="dynamic_programming",
    inputs="string N m, pos N sc, key N cat", outputs="b E cat", hints="pred_h N ptr, b_h E cat, c E sc",
    classes={"key": 4, "b": 4, "b_h": 4},
    sample=sample_strings,
    text=TextForm(train_lengths=CLRS_TEXT_LENGTHS[:3], val_stop=13),
    stream=StreamForm(pred_as_input=True))
def lcs_length(x: np.ndarray, y: np.ndarray):
    """Longest common subsequence table. x: [B, X], y: [B, Y] characters in 0..3; nodes are x then y.

    The first row and column are filled before the first hint; then each step recomputes every
    other cell from the previous step's c until c stops changing. b (arrows): [B, N, N, 4]."""
    B, nx = x.shape
    ny = y.shape[1]
    n = nx + ny
    rec = Recorder("lcs_length", n, batch=B)
    string = np.concatenate([np.zeros(nx), np.ones(ny)])
    pos = np.concatenate([positions(nx), positions(ny)])  # restarts at the second string
    rec.input(string=_tiled(string, (B, n), np.float32), pos=_tiled(pos, (B, n), np.float64),
              key=np.concatenate([x, y], axis=1))
    same = x[:, :, None] == y[:, None, :]  # [B, X, Y]
    c = np.zeros((B, nx, ny))
    b = np.full((B, nx, ny), LCS_DIAGONAL)  # cells not computed yet read as class 0, as in the reference
    # Column 0: x[:i+1] has y[0] in it; row 0: y[:j+1] has x[0] (arrow left once it was matched before).
    c[:, :, 0] = np.maximum.accumulate(same[:, :, 0], axis=1)
    b[:, :, 0] = np.where(same[:, :, 0], LCS_DIAGONAL, LCS_UP)
    row = np.maximum.accumulate(same[:, 0, :], axis=1)
    seen_before = np.zeros((B, ny), bool)
    seen_before[:, 1:] = row[:, :-1]
    c[:, 0, :] = row
    b[:, 0, :] = np.where(same[:, 0, :], LCS_DIAGONAL, np.where(seen_before, LCS_LEFT, LCS_UP))
    running = np.ones(B, bool)
    steps = np.zeros(B, np.int64)
    hist_b, hist_c = [], []
    while running.any():
        prev_c = c.copy()
        hist_b.append(b.copy())
        hist_c.append(prev_c)
        steps += running
        diag, up, left = prev_c[:, :-1, :-1], prev_c[:, :-1, 1:], prev_c[:, 1:, :-1]
        match = same[:, 1:, 1:]
        go_up = up >= left
        # A finished sample is at a fixed point: recomputing it leaves c and b unchanged.
        c[:, 1:, 1:] = np.where(match, diag + 1, np.where(go_up, up, left))
        b[:, 1:, 1:] = np.where(match, LCS_DIAGONAL, np.where(go_up, LCS_UP, LCS_LEFT))
        running &= ~np.all(c == prev_c, axis=(1, 2))
    T = len(hist_c)
    pred = np.concatenate([_array_order(nx), nx + _array_order(ny)])
    rec.hint_sequence(steps, pred_h=_tiled(pred, (B, T, n), np.int32),
                      b_h=_string_pairs_cat(np.stack(hist_b, axis=1), n),
                      c=_string_pairs(np.stack(hist_c, axis=1), n))
    rec.output(b=_string_pairs_cat(b, n))
    return rec.finish()


@register(
    "optimal_bst", family="dynamic_programming",
    inputs="pos N sc, p N sc, q N sc", outputs="root E ptr",
    hints="pred_h N ptr, root_h E ptr, e E sc, w E sc, msk E m",
    sample=sample_bst,
    text=TextForm(train_lengths=CLRS_TEXT_LENGTHS[:3], val_stop=11),
    stream=StreamForm(pred_as_input=True))
def optimal_bst(p: np.ndarray, q: np.ndarray):
    """Optimal binary search tree (Aho et al., 1974). p: [B, K] key probabilities, q: [B, K + 1] gap
    probabilities; N = K + 1 nodes (p padded with a 0). One hint initially, then one per subtree size
    l = 1..K after e, w and root are filled for all (i, i + l). root: [B, N, N]."""
    B, nk = p.shape
    n = nk + 1
    rec = Recorder("optimal_bst", n, batch=B)
    rec.input(pos=positions(n, B), p=np.concatenate([p, np.zeros((B, 1))], axis=1), q=q)
    e = np.zeros((B, n, n))  # final tables; every cell is written exactly once, at step l = j - i
    w = np.zeros((B, n, n))
    root = np.zeros((B, n, n), np.int32)  # the storage dtype of pointers: hints built from it need no conversion
    diag = np.arange(n)
    e[:, diag, diag] = q
    w[:, diag, diag] = q
    for l in range(1, n):
        i = np.arange(nk - l + 1)
        j = i + l
        w[:, i, j] = w[:, i, j - 1] + p[:, j - 1] + q[:, j]
        r = i[:, None] + np.arange(l)  # [cells, l] candidate roots
        t = e[:, i[:, None], r] + e[:, r + 1, j[:, None]] + w[:, i, j][:, :, None]  # [B, cells, l]
        arg = t.argmin(axis=2)  # lowest root among the cheapest
        best = np.take_along_axis(t, arg[..., None], axis=2)[..., 0]
        found = best < BST_UNSET
        e[:, i, j] = np.where(found, best, BST_UNSET)
        root[:, i, j] = np.where(found, i + arg, 0)
    # Step l shows the cells with j - i <= l and the initial zeros elsewhere.
    T = n
    span = diag[None, :] - diag[:, None]  # [N, N] j - i
    done = (span >= 0) & (span <= np.arange(T)[:, None, None])  # [T, N, N]
    rec.hint_sequence(np.full(B, T), pred_h=_tiled(_array_order(n), (B, T, n), np.int32),
                      root_h=np.where(done, root[:, None], 0), e=np.where(done, e[:, None], 0.0),
                      w=np.where(done, w[:, None], 0.0), msk=_tiled(done, (B, T, n, n), np.float32))
    rec.output(root=root)
    return rec.finish()
