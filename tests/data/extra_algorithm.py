"""One new algorithm declared in one file, as another package would declare it: `running_max`, the
index of the largest key seen so far, with hints, a family and a group of its own and a CLRS-Text
form. Importing this module registers it; nothing else is edited anywhere.

Only a fresh interpreter imports it (tests/data/one_place_check.py, started by test_one_place.py), so
that no other test sees a 31st algorithm.
"""

from __future__ import annotations

import numpy as np

from relreason.data import samplers
from relreason.data.algorithms import TextForm, register
from relreason.data.probes import Recorder, positions

NAME = "running_max"
FAMILY = "scans"  # a family of its own: a new task group
GROUP = "extras"  # a declared group of its own


def sample_keys(rng: samplers.RandomState, length: int) -> tuple[np.ndarray]:
    """`length` keys uniform in [0, 1)."""
    return (samplers.random_sequence(rng, length),)


@register(
    NAME, family=FAMILY,
    inputs="pos N sc, key N sc", outputs="best N m1", hints="best_h N m1, i N m1",
    sample=sample_keys,
    text=TextForm(train_lengths=(4, 5), val_stop=7),
    groups=(GROUP,))
def running_max(A: np.ndarray):
    """The index of the largest key by a left-to-right scan (the first of equal keys). A: [B, N] keys.
    One hint per scanned key: the best index so far (`best_h`, printed as `best` in CLRS-Text) and i."""
    A = np.array(A, dtype=np.float64)  # [B, N]
    B, n = A.shape
    rows = np.arange(B)
    rec = Recorder(NAME, n, batch=B)
    rec.input(pos=positions(n, B), key=A)
    best = np.zeros(B, np.int64)  # [B]
    for i in range(n):
        best = np.where(A[:, i] > A[rows, best], i, best)
        rec.hint(best_h=best, i=np.full(B, i))
    rec.output(best=best)
    return rec.finish()
