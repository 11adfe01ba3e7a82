"""Divide-and-conquer algorithms (CLRS chapter 4), recorded with the reference's probes.

The benchmark's maximum-subarray task is Kadane's linear scan (Bentley, 1984), the CLRS exercise
4.1-5 variant, not the recursive FIND-MAXIMUM-SUBARRAY; it runs as a lockstep batch (every sample
takes the same N steps).
"""

from __future__ import annotations

import numpy as np

from relreason.data import samplers
from relreason.data.algorithms import CLRS_TEXT_LENGTHS, StreamForm, TextForm, register
from relreason.data.algorithms.sorting import History, constant_hint, identity_order, one_hot, order_pointers
from relreason.data.probes import Recorder, positions


def sample_signed_keys(rng: samplers.RandomState, length: int) -> tuple[np.ndarray]:
    """The reference's maximum-subarray sampler: keys ~ U[-1, 1)^length."""
    return (samplers.random_sequence(rng, length, low=-1.0, high=1.0),)


@register(
    "find_maximum_subarray_kadane", family="divide_and_conquer",
    inputs="pos N sc, key N sc", outputs="start N m1, end N m1",
    hints="pred_h N ptr, best_low N m1, best_high N m1, best_sum G sc, i N m1, j N m1, sum G sc",
    eval_multiplier=32,
    sample=sample_signed_keys,
    text=TextForm(trace=("best_low", "best_high"), answer_from_trace=True, parenthesized=True,
                  train_lengths=CLRS_TEXT_LENGTHS, val_stop=65),
    stream=StreamForm(pred_as_input=True),
    groups=("core8",))
def find_maximum_subarray_kadane(A: np.ndarray):
    """Kadane's maximum subarray. A: [B, N] keys. One initial hint, then one per scanned key j.

    `i..j` is the best subarray ending at j (restarted at j when extending would not beat A[j] alone)
    and `best_low..best_high` the best seen so far (replaced only by a strictly larger sum)."""
    A = np.array(A, dtype=np.float64)  # [B, N]
    B, n = A.shape
    rec = Recorder("find_maximum_subarray_kadane", n, batch=B)
    rec.input(pos=positions(n, B), key=A)
    zero = np.zeros(B, int)
    best_low, best_high, start = zero, zero, zero
    best_sum, run_sum = A[:, 0].copy(), A[:, 0].copy()
    hist = History(B)
    hist.push(True, best_low=zero, best_high=zero, best_sum=best_sum, i=zero, sum=run_sum)
    for j in range(1, n):
        x = A[:, j]
        extend = run_sum + x >= x
        run_sum = np.where(extend, run_sum + x, x)
        start = np.where(extend, start, j)
        better = run_sum > best_sum
        best_low = np.where(better, start, best_low)
        best_high = np.where(better, j, best_high)
        best_sum = np.where(better, run_sum, best_sum)
        hist.push(True, best_low=best_low, best_high=best_high, best_sum=best_sum, i=start, sum=run_sum)
    steps = np.broadcast_to(np.arange(n), (B, n))  # step t scans key t (step 0: j = 0)
    rec.hint_sequence(hist.lengths, pred_h=constant_hint(order_pointers(identity_order(B, n)), n),
                      best_sum=hist["best_sum"], sum=hist["sum"], j=one_hot(steps, n),
                      **{k: one_hot(hist[k], n) for k in ("best_low", "best_high", "i")})
    rec.output(start=best_low, end=best_high)
    return rec.finish()
