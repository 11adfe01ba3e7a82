"""`running_max`: for every position, the index of the largest key up to it, found by a left-to-right scan.

    key  [0.3 0.9 0.1 0.7 0.95]
    best [0   1   1   1   4   ]    best[i] = argmax(key[0..i]), the first of equal keys

Inputs are the keys and their positions; the output is a pointer per node; the hints are that
pointer array as the scan fills it in (nodes not reached yet point to themselves) and the scanned
position. The function runs a lockstep batch (inputs with a leading batch axis B) and records its
probes with relreason's Recorder, which checks them against the spec declared here. `TextForm()`
gives it a CLRS-Text form too (task `text:running_max`), its trace the `best_h` hint printed as `best`.
"""

from __future__ import annotations

import numpy as np

from relreason.data import samplers
from relreason.data.algorithms import TextForm, register
from relreason.data.probes import Recorder, positions


def sample_keys(rng: samplers.RandomState, length: int) -> tuple[np.ndarray]:
    """One sample's inputs: keys ~ U[0, 1)^length, drawn from `rng` (seeded by relreason)."""
    return (samplers.random_sequence(rng, length),)


@register("running_max", family="sequences", inputs="pos N sc, key N sc", outputs="best N ptr",
          hints="best_h N ptr, i N m1", sample=sample_keys, text=TextForm())
def running_max(key: np.ndarray):
    """key: [B, N] keys. One hint per scanned position."""
    key = np.asarray(key, dtype=np.float64)  # (B, N)
    B, n = key.shape
    rows = np.arange(B)
    rec = Recorder("running_max", n, batch=B)
    rec.input(pos=positions(n, B), key=key)
    best = np.tile(np.arange(n), (B, 1))  # (B, N): unscanned nodes point to themselves
    for i in range(n):
        if i:
            larger = key[:, i] > key[rows, best[:, i - 1]]
            best[:, i] = np.where(larger, i, best[:, i - 1])
        rec.hint(best_h=best, i=np.full(B, i))  # the recorder copies what it records
    rec.output(best=best)
    return rec.finish()
