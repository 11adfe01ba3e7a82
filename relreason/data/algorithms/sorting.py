"""Sorting algorithms (CLRS chapters 2, 6 and 7), recorded with the reference's probes.

Insertion, bubble and quick sort run as lockstep batches: one loop iteration is one hint step of
every sample still running. Insertion and bubble sort take the same steps for every sample;
quicksort recurses differently per sample, so its recursion becomes explicit per-sample state (the
unsorted ranges still pending) advanced one probe point at a time. Heapsort's steps are too small
for that to pay (a few comparisons and one swap against ~70 array operations per lockstep step):
each sample runs on plain lists and logs its steps, and the batch's hints are built from the logs.

Every sort keeps `A_pos` [B, N] (heapsort: one sample's `pos`): `A_pos[b, k]` is the original index
of the key now in slot k. The hints name elements by original index, as the reference does: `pred_h`
is the "array" pointer probe (each element points to its left neighbour in the current order, the
first element to itself), and a mask_one hint on slot k is the one-hot of `A_pos[k]`.

Insertion and bubble sort keep the pointer probe up to date as keys move (`SlotOrder`); heapsort
and quicksort, whose steps do more bookkeeping of their own, record each step's order instead and
derive their pointer probes for all steps at once at the end. The lockstep loops snapshot a few small
arrays per step (`History`); masks are expanded to their stored one-hot form once at the end. That,
not the textbook logic, is where the time goes. The helpers here are shared by the searching and
divide-and-conquer families.
"""

from __future__ import annotations

import enum
from array import array

import numpy as np

from relreason.data import samplers
from relreason.data.algorithms import CLRS_TEXT_LENGTHS, TextForm, register
from relreason.data.probes import Recorder, positions

def sample_keys(rng: samplers.RandomState, length: int) -> tuple[np.ndarray]:
    """The reference's sorting sampler (also minimum and quickselect): keys ~ U[0, 1)^length."""
    return (samplers.random_sequence(rng, length),)


class History:
    """Per-step snapshots of a lockstep batch, read back stacked time-second ([B, T, ...]).

    `lengths[b]` counts the steps in which sample b was running; what is recorded for a sample after
    it stopped is never read (the recorder zeroes hint padding)."""

    def __init__(self, batch: int):
        self.lengths = np.zeros(batch, np.int64)
        self._steps: dict[str, list[np.ndarray]] = {}

    def push(self, running: np.ndarray | bool, **values: np.ndarray) -> None:
        self.lengths += running
        for k, v in values.items():
            self._steps.setdefault(k, []).append(np.array(v))  # a copy: the loop mutates its state

    def __getitem__(self, name: str) -> np.ndarray:
        return np.stack(self._steps[name], axis=1)


def identity_order(batch: int, n: int) -> np.ndarray:
    """`A_pos` before any move: slot k holds element k. [B, N]"""
    return np.tile(np.arange(n), (batch, 1))


def _scatter_pointers(order: np.ndarray, source: np.ndarray) -> np.ndarray:
    """Pointer probe [..., N]: element order[..., k] points to source[..., k - 1] (k >= 1), order[..., 0]
    to itself."""
    n = order.shape[-1]
    probe = np.empty(order.shape, np.int32)
    order, source = order.reshape(-1, n), source.reshape(-1, n - 1)
    rows = np.arange(len(order))
    flat = probe.reshape(-1, n)
    flat[rows[:, None], order[:, 1:]] = source
    flat[rows, order[:, 0]] = order[:, 0]
    return probe


def order_pointers(order: np.ndarray) -> np.ndarray:
    """The "array" probe of orders [..., N]: order[..., k] points to order[..., k - 1]."""
    return _scatter_pointers(order, order[..., :-1])


def heap_pointers(order: np.ndarray, heap_size: np.ndarray) -> np.ndarray:
    """The "heap" probe of orders [..., N] with heap sizes [...]: in the first heap_size slots every
    element points to its heap parent (slot (k - 1) // 2); the root and the rest point to themselves."""
    n = order.shape[-1]
    k = np.arange(1, n)
    parents = np.repeat(order[..., :n // 2], 2, axis=-1)[..., :n - 1]  # order[..., (k - 1) // 2], without a gather
    return _scatter_pointers(order, np.where(k < heap_size[..., None], parents, order[..., 1:]))


def constant_hint(value: np.ndarray, steps: int) -> np.ndarray:
    """A hint that never changes, [B, ...] -> [B, T, ...] (a real copy: the recorder zeroes padding)."""
    return np.repeat(value[:, None], steps, axis=1)


def one_hot(index: np.ndarray, n: int) -> np.ndarray:
    """mask_one storage form: [...] indices -> [..., N] float32 (cheaper than the recorder's own)."""
    out = np.zeros(index.shape + (n,), np.float32)
    flat = out.reshape(-1, n)
    flat[np.arange(flat.shape[0]), index.ravel()] = 1
    return out


class SlotOrder:
    """Keys in slots [B, N] with their order `pos` (A_pos) and its "array" probe `pred`, which every
    move updates in place: recomputing it from scratch at each of thousands of steps is what would be
    slow. Only elements whose left neighbour changed are rewritten. With `pointers=False` there is no
    `pred` (for a loop that derives it from recorded orders at the end).

    Slot lists are [K, B] (one row per slot kind): `np.array` builds them far cheaper than `np.stack`,
    which matters at one call per step."""

    def __init__(self, keys: np.ndarray, pointers: bool = True):
        self.A = np.array(keys, dtype=np.float64)  # [B, N] a copy: it is permuted in place
        B, self.n = self.A.shape
        self.rows = np.arange(B)
        self.cols = self.rows[None, :]  # [1, B]: row index broadcast against [K, B] slot lists
        self.pos = identity_order(B, self.n)  # [B, N] element in each slot
        # [B, N] int32, or None for a sort that records `pos` and derives its pointers at the end.
        self.pred = order_pointers(self.pos) if pointers else None

    def refresh(self, slots: np.ndarray) -> None:
        """Rewrites the pointers of the elements in `slots` [K, B] (clipped to the last slot)."""
        s = np.minimum(slots, self.n - 1)
        self.pred[self.cols, self.pos[self.cols, s]] = self.pos[self.cols, np.maximum(s - 1, 0)]

    def swap(self, a: np.ndarray, b: np.ndarray) -> None:
        """Swaps slots a[k] and b[k] in row k ([B] each; a == b leaves the row unchanged)."""
        for x in (self.A, self.pos):
            x[self.rows, a], x[self.rows, b] = x[self.rows, b], x[self.rows, a]
        if self.pred is not None:
            self.refresh(np.array([a, a + 1, b, b + 1]))

    def at(self, *slots: np.ndarray) -> np.ndarray:
        """The elements in the given slots ([B] each) -> [len(slots), B]."""
        return self.pos[self.cols, np.array(slots)]


def _start(name: str, A: np.ndarray, pointers: bool = True) -> tuple[Recorder, SlotOrder]:
    """Recorder with the inputs recorded, and the keys in their initial order (see `SlotOrder`)."""
    order = SlotOrder(A, pointers)
    B, n = order.A.shape
    rec = Recorder(name, n, batch=B)
    rec.input(pos=positions(n, B), key=order.A.copy())
    return rec, order


def mask_hints(nodes: np.ndarray, names: tuple[str, ...], n: int) -> dict[str, np.ndarray]:
    """mask_one hints [B, T, N] from node snapshots [len(names), T, B] (History of `SlotOrder.at`)."""
    return {k: one_hot(nodes[c].T, n) for c, k in enumerate(names)}


@register(
    "insertion_sort", family="sorting",
    inputs="pos N sc, key N sc", outputs="pred N perm", hints="pred_h N ptr, i N m1, j N m1",
    sample=sample_keys,
    text=TextForm(train_lengths=CLRS_TEXT_LENGTHS, val_stop=26),
    groups=("core8",))
def insertion_sort(A: np.ndarray):
    """Insertion sort. A: [B, N] keys. One hint for i = j = 0, then one per inserted key j."""
    rec, order = _start("insertion_sort", A)
    A, A_pos, rows = order.A, order.pos, order.rows
    B, n = A.shape
    hist = History(B)
    hist.push(True, pred=order.pred, i=np.zeros(B, int))
    for j in range(1, n):
        key = A[:, j].copy()
        # The prefix is sorted and the scan shifts only keys > key, so key lands after every key <= it.
        slot = (A[:, :j] <= key[:, None]).sum(axis=1)  # [B]
        # `i` is the element the textbook overwrote at the slot (slot j still holds original index j).
        stored = A_pos[rows, slot]
        k = np.arange(j + 1)
        src = k - (k > slot[:, None])  # [B, j + 1]: slots after the insertion point take their left neighbour
        at = k == slot[:, None]
        A[:, : j + 1] = np.where(at, key[:, None], A[rows[:, None], src])
        A_pos[:, : j + 1] = np.where(at, j, A_pos[rows[:, None], src])
        # New left neighbours: the inserted key, the key after it, and the key after the shifted block.
        order.refresh(np.array([slot, slot + 1, np.full(B, j + 1)]))
        hist.push(True, pred=order.pred, i=stored)
    steps = np.broadcast_to(np.arange(n), (B, n))  # step t inserts key t (step 0: j = 0)
    rec.hint_sequence(hist.lengths, pred_h=hist["pred"], i=one_hot(hist["i"], n), j=one_hot(steps, n))
    rec.output(pred=order.pred)
    return rec.finish()


@register(
    "bubble_sort", family="sorting",
    inputs="pos N sc, key N sc", outputs="pred N perm", hints="pred_h N ptr, i N m1, j N m1",
    sample=sample_keys,
    text=TextForm(train_lengths=CLRS_TEXT_LENGTHS[:3], val_stop=12))
def bubble_sort(A: np.ndarray):
    """Bubble sort. A: [B, N] keys. One initial hint, then one per compare-exchange (N (N - 1) / 2)."""
    rec, order = _start("bubble_sort", A)
    A, A_pos = order.A, order.pos
    B, n = A.shape
    hist = History(B)
    hist.push(True, pred=order.pred, i=A_pos[:, 0], j=A_pos[:, 0])
    for i in range(n - 1):
        for j in range(n - 1, i, -1):
            swap = A[:, j] < A[:, j - 1]
            order.swap(np.where(swap, j - 1, j), np.full(B, j))
            hist.push(True, pred=order.pred, i=A_pos[:, i], j=A_pos[:, j])
    rec.hint_sequence(hist.lengths, pred_h=hist["pred"], i=one_hot(hist["i"], n), j=one_hot(hist["j"], n))
    rec.output(pred=order.pred)
    return rec.finish()


class HeapPhase(enum.IntEnum):
    """Classes of heapsort's categorical `phase` hint (the reference's order)."""

    BUILD = 0  # max-heapify calls of the build loop
    SWAP_OUT = 1  # the max moves to the freed last slot
    REHEAP = 2  # max-heapify calls after a move


@register(
    "heapsort", family="sorting",
    inputs="pos N sc, key N sc", outputs="pred N perm",
    hints="pred_h N ptr, parent N ptr, i N m1, j N m1, largest N m1, heap_size N m1, phase G cat",
    classes={"phase": len(HeapPhase)},
    sample=sample_keys,
    text=TextForm(train_lengths=CLRS_TEXT_LENGTHS[:3], val_stop=12))
def heapsort(A: np.ndarray):
    """Heapsort (Williams, 1964). A: [B, N] keys.

    One probe point per max_heapify call of the reference and one per extraction. The steps differ
    from sample to sample and each does a few comparisons and one swap: a lockstep batch spends ~70
    array operations per step on that, more than plain Python spends on one sample's step (~0.5 us),
    so each sample runs `_heapsort_steps` on lists, logging per step its probe values and its order
    (a memory copy), and the batch's [B, T, ...] hints are built from the logs at once."""
    B, n = A.shape
    rec = Recorder("heapsort", n, batch=B)
    rec.input(pos=positions(n, B), key=np.array(A, dtype=np.float64))
    code = "B" if n <= 256 else "H"  # slot -> element, one byte per slot where it fits
    log, orders = array("q"), array(code)
    lengths = np.array([_heapsort_steps(keys, log, orders, code) for keys in np.asarray(A, np.float64).tolist()],
                       np.int64)
    T = int(lengths.max())
    row = np.repeat(np.arange(B) * T, lengths) + np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths,
                                                                                     lengths)
    steps = np.zeros((B * T, _HEAP_RECORD), np.int64)  # zero past each length: element 0, phase BUILD
    steps[:, _HEAP_SIZE] = n  # a valid heap size in the padding (the recorder zeroes its probes)
    steps[row] = np.frombuffer(log, np.int64).reshape(-1, _HEAP_RECORD)
    pos = np.tile(np.arange(n, dtype=np.intp), (B * T, 1))  # [B * T, N] the identity in the padding
    pos[row] = np.frombuffer(orders, code).reshape(-1, n)
    pos, steps = pos.reshape(B, T, n), steps.reshape(B, T, _HEAP_RECORD)
    final = pos[np.arange(B), lengths - 1]  # [B, N] the sorted order
    rec.hint_sequence(lengths, pred_h=order_pointers(pos), parent=heap_pointers(pos, steps[..., _HEAP_SIZE]),
                      phase=steps[..., _HEAP_PHASE],
                      **{k: one_hot(steps[..., c], n) for c, k in enumerate(("i", "j", "largest", "heap_size"))})
    rec.output(pred=order_pointers(final))
    return rec.finish()


# A heapsort step's record: the elements of the probes i, j, largest and heap_size, then phase and heap size.
_HEAP_RECORD = 6
_HEAP_PHASE, _HEAP_SIZE = 4, 5


def _heapsort_steps(A: list[float], log: array, orders: array, code: str) -> int:
    """One sample's heapsort on a list of keys (sorted in place): appends each step's record
    (`_HEAP_RECORD` values) to `log` and its order (slot -> element) to `orders`. Returns the steps.

    max_heapify at i moves down one level per step: the largest of i and its children inside the
    heap (strict >, left first) is swapped into i, then the probes show the elements at the outer
    index `ind`, at i, at largest and at the heap's last slot. An extraction swaps the max into the
    freed last slot; its `largest` probe is element 0 itself, not slot 0 (as the reference records)."""
    n = len(A)
    build, swap_out, reheap = int(HeapPhase.BUILD), int(HeapPhase.SWAP_OUT), int(HeapPhase.REHEAP)
    pos = array(code, range(n))
    push = log.extend
    push((n - 1, n - 1, n - 1, n - 1, build, n))  # the initial state
    orders.extend(pos)
    steps = 1

    def max_heapify(i: int, size: int, ind: int, phase: int) -> int:
        count = 0
        while True:
            left = 2 * i + 1
            largest = left if left < size and A[left] > A[i] else i
            if left + 1 < size and A[left + 1] > A[largest]:
                largest = left + 1
            if largest != i:
                A[i], A[largest] = A[largest], A[i]
                pos[i], pos[largest] = pos[largest], pos[i]
            push((pos[ind], pos[i], pos[largest], pos[size - 1], phase, size))
            orders.extend(pos)
            count += 1
            if largest == i:
                return count
            i = largest

    for i in range(n - 1, -1, -1):
        steps += max_heapify(i, n, i, build)
    for i in range(n - 1, 0, -1):
        A[0], A[i] = A[i], A[0]
        pos[0], pos[i] = pos[i], pos[0]
        push((pos[0], pos[i], 0, pos[i - 1], swap_out, i))  # the heap is now slots 0..i-1
        orders.extend(pos)
        steps += 1 + max_heapify(0, i, i, reheap)
    return steps


@register(
    "quicksort", family="sorting",
    inputs="pos N sc, key N sc", outputs="pred N perm", hints="pred_h N ptr, p N m1, r N m1, i N m1, j N m1",
    sample=sample_keys,
    text=TextForm(train_lengths=CLRS_TEXT_LENGTHS[:3], val_stop=13))
def quicksort(A: np.ndarray):
    """Quicksort (Hoare, 1962) with Lomuto's partition. A: [B, N] keys.

    There is no initial hint: one hint per partition loop step and one after placing the pivot. The
    recursion sorts the left part, then the right part, and skips parts of fewer than two keys. Every
    range still pending lies right of the current one and the slots left of it are sorted, so the next
    range is always the leftmost run of two or more slots not yet `final` (placed pivots) and no
    explicit stack is needed. `i`, `j` are the partition's indices; its pivot key stays in slot r.
    As in heapsort, the loop records each step's order and the pointer probe is derived at the end."""
    rec, order = _start("quicksort", A, pointers=False)
    A, rows = order.A, order.rows
    B, n = A.shape
    slots = np.arange(n)
    final = np.zeros((B, n + 1), bool)  # [B, N + 1]; column N is a sentinel that ends the last run
    final[:, n] = True
    state = np.array([np.zeros(B, int), np.full(B, n - 1), np.full(B, -1), np.zeros(B, int)])  # p, r, i, j: [4, B]
    hist = History(B)
    running = np.ones(B, bool)
    while running.any():
        p, r, i, j = state
        step = running & (j < r)  # a partition loop iteration
        place = running & (j == r)  # the pivot (slot r == j) goes between the two parts
        take = step & (A[rows, j] <= A[rows, r])
        i = i + take
        q = i + 1
        order.swap(np.where(take, i, np.where(place, q, j)), j)
        hist.push(running, pos=order.pos, nodes=order.at(p, r, q, j))
        final[rows, np.where(place, q, n)] = True
        open_ = ~final
        pair = open_[:, :-1] & open_[:, 1:]  # [B, N]: slots k and k + 1 both still open
        lo = pair.argmax(axis=1)  # the next range: the leftmost open run of two or more slots
        hi = (final[:, 1:] & (slots >= lo[:, None])).argmax(axis=1)
        running ^= place & ~pair[rows, lo]
        state = np.where(place, np.array([lo, hi, lo - 1, lo]), np.array([p, r, i, j + step]))
    rec.hint_sequence(hist.lengths, pred_h=order_pointers(hist["pos"]),
                      **mask_hints(hist["nodes"], ("p", "r", "i", "j"), n))
    rec.output(pred=order_pointers(order.pos))
    return rec.finish()
