"""String matching (CLRS chapter 32): the naive matcher and Knuth-Morris-Pratt, with the reference's probes.

A sample is a haystack T and a needle P; the graph has |T| + |P| nodes, haystack first, then needle.
`pos` restarts at the needle (i/|T| then j/|P|), `string` marks the needle's nodes, and `pred_h` chains
each string's nodes to their predecessors. Needle positions in hints are offset by |T|. A sample whose
needle does not occur reports the head of the needle (index |T|) as its match, the reference's convention.

Both matchers are computed for the whole batch at once and then laid out as trajectories. A run is a
sequence of *blocks* of consecutive hint steps (naive: one block per shift tried; KMP: one per needle
position of the failure-function loop, then one per haystack symbol), whose sizes follow in closed form
from comparisons and the KMP automaton; `_Timeline` turns block sizes into per-step coordinates. The
only sequential loops left run over needle or haystack positions, never over hint steps, so their cost
is independent of the batch size; this matters because the reference's own cost is small per sample.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from relreason.data import samplers
from relreason.data.algorithms import CLRS_TEXT_LENGTHS, StreamForm, TextForm, register
from relreason.data.probes import Recorder
from relreason.errors import RelreasonError

ALPHABET_SIZE = 4  # {A, T, C, G}


def sample_matcher(rng: samplers.RandomState, length: int) -> tuple[np.ndarray, np.ndarray]:
    """A random haystack with a random needle embedded; `length` = |haystack| + |needle|.

    Draw order (the reference's): needle, haystack, then the embedding position (one of |T| - |P|, so the
    needle never ends the haystack). The needle is length // 5 long, 1 below 5 nodes.

    Two fewer calls than the reference, the same stream (NumPy freezes RandomState's): every symbol of
    `randint(0, 4, size)` consumes exactly one 32-bit draw (a power-of-two range is never rejected), so the
    needle's and haystack's calls are one call's halves; and `choice(k)` is `randint(0, k)`. The draws
    are most of this sampler's cost, and tests/data/test_strings.py checks the equivalence."""
    n_needle = 1 if length < 5 else length // 5
    n_hay = length - n_needle
    symbols = samplers.random_string(rng, length, ALPHABET_SIZE)  # needle, then haystack
    needle, haystack = symbols[:n_needle], symbols[n_needle:]
    at = rng.randint(0, n_hay - n_needle)
    haystack[at:at + n_needle] = needle
    return haystack, needle


def sample_matcher_v1(rng: samplers.RandomState, length: int) -> tuple[np.ndarray, np.ndarray]:
    """The string matchers' sampler of CLRS v1.0.0 (google-deepmind/clrs v1.0.0 samplers.py, MatcherSampler),
    which drew the CLRS30 v1.0.0 dataset that the CLRS-30 paper, Ibarz et al. 2022 and the RT paper tested on:
    `length` is the haystack alone and a needle of length // 4 symbols (1 below 4) comes on top, so the
    benchmark's n = 16 and n = 64 are 20 and 80 nodes ("80 for string matchers", Ibarz et al. §3.1). The same
    draw order as `sample_matcher` (needle, haystack, then the embedding position, one of |T| - |P|)."""
    n_needle = 1 if length < 4 else length // 4
    symbols = samplers.random_string(rng, n_needle + length, ALPHABET_SIZE)  # needle, then haystack
    needle, haystack = symbols[:n_needle], symbols[n_needle:]
    at = rng.randint(0, length - n_needle)
    haystack[at:at + n_needle] = needle
    return haystack, needle


@dataclass(frozen=True)
class MatcherSampler:
    """`sample_matcher` with the reference's option `length_needle` (see `samplers.with_options`), and
    ours, `v1`: the CLRS v1.0.0 sampler (`sample_matcher_v1`: a needle of length // 4 on top of a haystack
    of `length`), which takes no needle option.

    None keeps the canonical needle (length // 5). A fixed needle length is drawn in the same order:
    needle and haystack symbols in one call, then the embedding position. The reference's negative
    values (a random length per sample) are drawn by the caller (`relreason.data.stream`), which
    records them."""

    length_needle: int | None = None
    v1: bool = False  # CLRS v1.0.0's sampler (data.matcher_v1_splits)

    def __call__(self, rng: samplers.RandomState, length: int) -> tuple[np.ndarray, np.ndarray]:
        if self.v1:
            if self.length_needle is not None:
                raise ValueError("the CLRS v1.0.0 matcher sampler takes no needle length (its needle is length // 4)")
            return sample_matcher_v1(rng, length)
        if self.length_needle is None:
            return sample_matcher(rng, length)
        n_needle = self.length_needle
        n_hay = length - n_needle
        if not 1 <= n_needle < n_hay:
            raise ValueError(f"a needle of {n_needle} symbols does not fit {length} nodes (needs 2 * needle < length)")
        symbols = samplers.random_string(rng, length, ALPHABET_SIZE)  # needle, then haystack
        needle, haystack = symbols[:n_needle], symbols[n_needle:]
        at = rng.randint(0, n_hay - n_needle)
        haystack[at:at + n_needle] = needle
        return haystack, needle


@dataclass
class _Timeline:
    """Per-step coordinates of block-structured runs, flattened over (sample, step).

    Built from `sizes` [B, K] (steps of block k of sample b, blocks in run order; zero-size blocks are
    allowed). For every recorded step: `row` (its sample), `t` (its step index), `block` and `r` (its
    offset inside the block). `lengths` [B] are the run lengths."""

    row: np.ndarray
    t: np.ndarray
    block: np.ndarray
    r: np.ndarray
    lengths: np.ndarray

    @staticmethod
    def of(sizes: np.ndarray) -> "_Timeline":
        B, K = sizes.shape
        flat = sizes.ravel()
        owner = np.repeat(np.arange(B * K), flat)  # flat (sample, block) of each step
        row, block = np.divmod(owner, K)
        starts = np.cumsum(flat) - flat  # exclusive, over the flattened (sample, block) order
        step = np.arange(owner.shape[0])
        t = step - starts[row * K]
        r = step - starts[owner]
        return _Timeline(row, t, block, r, sizes.sum(axis=1))

    def zeros(self, *shape: int, dtype: type = np.float32) -> np.ndarray:
        """A padded hint buffer [B, T_max, *shape]."""
        return np.zeros((self.lengths.shape[0], int(self.lengths.max())) + shape, dtype)

    def grid(self, values: np.ndarray, dtype: type) -> np.ndarray:
        """Scatters per-step `values` [S] into a padded [B, T_max] array (zeros past the ends)."""
        out = self.zeros(dtype=dtype)
        out[self.row, self.t] = values
        return out

    def one_hot(self, index: np.ndarray, depth: int) -> np.ndarray:
        """A mask_one hint [B, T_max, depth] (float32, the storage form) from per-step indices [S]."""
        out = self.zeros(depth)
        out[self.row, self.t, index] = 1
        return out

    def constant(self, value: np.ndarray) -> np.ndarray:
        """A hint that never changes: `value` [B, ...] at every step (the recorder zeroes the padding)."""
        shape = (value.shape[0], int(self.lengths.max())) + value.shape[1:]
        return np.ascontiguousarray(np.broadcast_to(value[:, None], shape))


def _string_inputs(rec: Recorder, T: np.ndarray, P: np.ndarray) -> np.ndarray:
    """Records the shared inputs and returns the constant `pred_h` hint [B, N]."""
    B, nT = T.shape
    nP = P.shape[1]
    pos = np.concatenate([np.arange(nT) * 1.0 / nT, np.arange(nP) * 1.0 / nP])
    string = np.concatenate([np.zeros(nT), np.ones(nP)])
    rec.input(string=np.broadcast_to(string, (B, nT + nP)), pos=np.broadcast_to(pos, (B, nT + nP)),
              key=np.concatenate([T, P], axis=1))
    # each node points to its predecessor within its own string; both strings' heads point to themselves
    pred = np.concatenate([np.maximum(np.arange(nT) - 1, 0), nT + np.maximum(np.arange(nP) - 1, 0)])
    return np.broadcast_to(pred.astype(np.int32), (B, nT + nP))  # int32: the storage dtype of pointers


def _check_strings(name: str, T: np.ndarray, P: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    T, P = np.asarray(T), np.asarray(P)
    if T.ndim != 2 or P.ndim != 2 or T.shape[0] != P.shape[0]:
        raise RelreasonError(f"{name} needs a haystack and a needle as 1-D integer arrays",
                             f"e.g. run_algorithm('{name}', [0, 1, 2, 1], [2, 1])")
    if P.shape[1] < 1 or P.shape[1] > T.shape[1]:
        raise RelreasonError(f"{name}: the needle ({P.shape[1]} symbols) must be non-empty and no longer than "
                             f"the haystack ({T.shape[1]})", "pass a shorter needle")
    if min(T.min(), P.min()) < 0 or max(T.max(), P.max()) >= ALPHABET_SIZE:
        raise RelreasonError(f"{name}: symbols must be integers in [0, {ALPHABET_SIZE})", "encode A,T,C,G as 0..3")
    return T.astype(np.int64), P.astype(np.int64)


@register(
    "naive_string_matcher", family="strings",
    inputs="string N m, pos N sc, key N cat", outputs="match N m1", hints="pred_h N ptr, s N m1, i N m1, j N m1",
    classes={"key": ALPHABET_SIZE}, eval_multiplier=64, min_size=3,
    sample=MatcherSampler(),
    text=TextForm(trace=("s",), train_lengths=CLRS_TEXT_LENGTHS, val_stop=65),
    stream=StreamForm(pred_as_input=True),
    groups=("core8",))
def naive_string_matcher(T: np.ndarray, P: np.ndarray):
    """Naive matching of needle P in haystack T. T: [B, |T|], P: [B, |P|] symbols in [0, 4).

    Shift s records one hint per compared symbol pair (s, i = s + j, j) while they agree, so its block
    has min(lcp_s + 1, |P|) steps (lcp_s: common prefix of T[s:] and P); the run stops at the first full
    match."""
    T, P = _check_strings("naive_string_matcher", T, P)
    B, nT = T.shape
    nP = P.shape[1]
    rec = Recorder("naive_string_matcher", nT + nP, batch=B)
    pred = _string_inputs(rec, T, P)
    windows = np.lib.stride_tricks.sliding_window_view(T, nP, axis=1)  # [B, S, |P|], S = |T| - |P| + 1
    agree = windows == P[:, None, :]
    lcp = np.where(agree.all(axis=2), nP, np.argmin(agree, axis=2))  # [B, S]
    full = lcp == nP
    found = full.any(axis=1)
    first = np.where(found, np.argmax(full, axis=1), nT)  # first matching shift (|T|: none, past every shift)
    shifts = np.arange(lcp.shape[1])
    sizes = np.where(shifts <= first[:, None], np.minimum(lcp + 1, nP), 0)
    tl = _Timeline.of(sizes)
    n = nT + nP
    rec.hint_sequence(tl.lengths, pred_h=tl.constant(pred), s=tl.one_hot(tl.block, n),
                      i=tl.one_hot(tl.block + tl.r, n), j=tl.one_hot(nT + tl.r, n))
    rec.output(match=first)
    return rec.finish()


def _follow_links(fail: np.ndarray, P_ext: np.ndarray, x: np.ndarray, c: np.ndarray, reset: int):
    """The reference's while loop, for many states at once: from states x [B, m] on symbols c [B, m],
    follow failure links while the state is not reset and P[x + 1] != c. Returns the end states and the
    number of links followed (one hint each) [B, m]. P_ext: P with a non-symbol appended."""
    rows = np.arange(x.shape[0])[:, None]
    links = np.zeros_like(x)
    go = (x != reset) & (P_ext[rows, x + 1] != c)
    while go.any():
        x = np.where(go, fail[rows, x], x)
        links += go
        go &= (x != reset) & (P_ext[rows, x + 1] != c)
    return x, links


def _extend(P: np.ndarray, x: np.ndarray, c: np.ndarray, reset: int) -> np.ndarray:
    """After the while loop: the textbook's new k (or q), -1 when even P[0] does not match c."""
    return np.where(x == reset, np.where(P[:, :1] == c, 0, -1), x + 1)


def _kmp_failure(P: np.ndarray, reset: int) -> tuple[np.ndarray, ...]:
    """The failure function the reference's first loop computes, in closed form.

    That loop leaves, for each needle position q, k = (length of the longest proper border of P[:q + 1])
    - 1 in pi[q], with is_reset[q] = 1 when there is no border (pi[q] = 0). The longest border starts at
    the smallest shift d in 1..q with lcp(P, P[d:]) >= q + 1 - d (the Z-function), found for all q at once.
    States of the k (and later q) loop are coded 0..|P|-2 for "k = x" and `reset` = |P| - 1 for the reset
    state (k_reset = 1, shown as k = 0). Returns pi [B, |P|], is_reset [B, |P|] (bool), code [B, |P|] (the
    state after iteration q: reset if is_reset[q] else pi[q]; code[:, 0] is the initial reset) and fail
    [B, |P|] (the state one failure link leads to: code[x] from x, reset from reset)."""
    B, nP = P.shape
    d = np.arange(nP)
    inside = d[:, None] + d[None, :] < nP  # [d, m]: P[d + m] exists
    same = (P[:, np.minimum(d[:, None] + d[None, :], nP - 1)] == P[:, None, :]) & inside  # [B, d, m]
    z = np.where(same.all(axis=2), nP, np.argmin(same, axis=2))  # [B, d] = lcp(P, P[d:])
    q = d
    starts = (d[None, :] >= 1) & (d[None, :] <= q[:, None])  # [q, d]: proper borders of P[:q + 1] start at d
    covers = starts & ((d + z)[:, None, :] > q[None, :, None])  # [B, q, d]
    border = np.where(covers.any(axis=2), q + 1 - np.argmax(covers, axis=2), 0)  # [B, q]
    pi = np.maximum(border - 1, 0)
    is_reset = border == 0
    code = np.where(is_reset, reset, pi)
    fail = code.copy()
    fail[:, reset] = reset
    return pi, is_reset, code, fail


@register(
    "kmp_matcher", family="strings",
    inputs="string N m, pos N sc, key N cat", outputs="match N m1",
    hints="pred_h N ptr, pi N ptr, is_reset N m, k N m1, k_reset G m, q N m1, q_reset G m, s N m1, i N m1, phase G m",
    classes={"key": ALPHABET_SIZE}, eval_multiplier=64, min_size=3,
    sample=MatcherSampler(),
    text=TextForm(trace=("s",), train_lengths=CLRS_TEXT_LENGTHS, val_stop=65),
    stream=StreamForm(pred_as_input=True))
def kmp_matcher(T: np.ndarray, P: np.ndarray):
    """Knuth-Morris-Pratt (1977): failure function of P (phase 0), then the scan of T (phase 1).

    T: [B, |T|], P: [B, |P|] symbols in [0, 4). As in the reference, the failure function is kept as `pi`
    plus an `is_reset` flag (is_reset[q] = 1: no proper border, pi[q] = 0), and the states k (phase 0) and
    q (phase 1) carry a reset flag instead of the textbook's -1.

    Blocks: the initial hint; per needle position q >= 1 one hint per failure link followed, then one
    after pi[q] is set; per haystack symbol i one hint before the while loop, then one per failure link
    followed. The scan is the KMP automaton: from state x on symbol c it follows failure links while
    P[x + 1] != c, then extends by one symbol (reaching |P| - 1 is the match)."""
    T, P = _check_strings("kmp_matcher", T, P)
    B, nT = T.shape
    nP = P.shape[1]
    rec = Recorder("kmp_matcher", nT + nP, batch=B)
    pred = _string_inputs(rec, T, P)
    rows = np.arange(B)
    R = nP - 1  # the reset state's code
    M = nP  # the automaton's absorbing "matched" state
    P_ext = np.concatenate([P, np.full((B, 1), -1)], axis=1)  # P_ext[R + 1] matches no symbol
    pi, is_reset, code, fail = _kmp_failure(P, R)

    # powers of the failure links: links[b, r, x] = the state r links from x (|P| - 1 links reach reset)
    links = np.empty((B, nP, nP), np.int64)
    links[:, 0] = np.arange(nP)
    for r in range(1, nP):
        links[:, r] = fail[rows[:, None], links[:, r - 1]]

    # the automaton over (state, symbol), flattened to nP * 4 columns: links followed, and the next state
    x = np.repeat(np.arange(nP), ALPHABET_SIZE)[None, :].repeat(B, axis=0)
    c = np.tile(np.arange(ALPHABET_SIZE), nP)[None, :]
    end, n_links = _follow_links(fail, P_ext, x, c, R)
    new = _extend(P, end, c, R)
    advance = np.where(new == nP - 1, M, np.where(new < 0, R, new)).reshape(B, nP, ALPHABET_SIZE)
    advance = np.concatenate([advance, np.full((B, 1, ALPHABET_SIZE), M)], axis=1)  # matched stays matched
    n_links = n_links.reshape(B, nP, ALPHABET_SIZE)
    # phase 0 followed the same links: iteration q starts from code[q - 1] on symbol P[q]
    chain0 = np.zeros((B, nP), np.int64)
    chain0[:, 1:] = n_links[rows[:, None], code[:, :-1], P[:, 1:]]

    # the scan: the state before each haystack symbol (M once matched)
    before = np.empty((B, nT), np.int64)
    state = np.full(B, R, np.int64)
    for i in range(nT):
        before[:, i] = state
        state = advance[rows, state, T[:, i]]
    scanned = before != M
    last = scanned.sum(axis=1) - 1  # the last haystack symbol read
    match = np.where(state == M, last - nP + 1, nT)
    scan_links = n_links[rows[:, None], np.minimum(before, R), T]
    sizes = np.concatenate([np.ones((B, 1), np.int64), 1 + chain0[:, 1:], np.where(scanned, 1 + scan_links, 0)],
                           axis=1)

    # per-step state, by block: phase 0 (block q < |P|) and phase 1 (block |P| + i)
    tl = _Timeline.of(sizes)
    b, blk, r = tl.row, tl.block, tl.r
    scan = blk >= nP
    q = np.minimum(blk, nP - 1)
    i = np.maximum(blk - nP, 0)
    in_chain = ~scan & (r < chain0[b, q])
    k_state = np.where(in_chain, links[b, np.minimum(r + 1, nP - 1), code[b, np.maximum(q - 1, 0)]], code[b, q])
    k_state = np.where(scan, code[b, nP - 1], k_state)  # the scan shows the final k
    q_state = links[b, np.minimum(r, nP - 1), np.minimum(before[b, i], R)]
    settled = np.where(scan, nP - 1, np.where(in_chain, q - 1, q))  # pi[1..settled] already written
    delta = 1 if nP > 1 else 0  # the initial hint shows q = 1 (q = 0 when the needle has one symbol)
    written = np.arange(nP)[None, :] <= settled[:, None]  # [S, |P|]
    pi_now = np.where(written, pi[b], np.arange(nP))
    reset_now = written & is_reset[b]

    n = nT + nP
    pi_h = tl.zeros(n, dtype=np.int32)
    pi_h[:, :, :nT] = np.arange(nT)  # haystack nodes point to themselves
    pi_h[b, tl.t, nT:] = nT + pi_now
    reset_h = tl.zeros(n)
    reset_h[b, tl.t, nT:] = reset_now
    q_shown = np.where(scan, np.where(q_state == R, 0, q_state), np.where(blk == 0, delta, q))
    rec.hint_sequence(tl.lengths, pred_h=tl.constant(pred), pi=pi_h, is_reset=reset_h,
                      k=tl.one_hot(nT + np.where(k_state == R, 0, k_state), n),
                      k_reset=tl.grid(k_state == R, np.float32),
                      q=tl.one_hot(nT + q_shown, n), q_reset=tl.grid(~scan | (q_state == R), np.float32),
                      s=tl.one_hot(np.where(scan, np.maximum(i - nP + 1, 0), 0), n),
                      i=tl.one_hot(np.where(scan, i, 0), n), phase=tl.grid(scan, np.float32))
    rec.output(match=match)
    return rec.finish()
