"""Helpers shared by the algorithm tests that compare hints with hand-written textbook traces."""

from __future__ import annotations

import numpy as np

from relreason.data.specs import Type


def array_probe(order: list[int]) -> list[int]:
    """Each element points to its left neighbour in `order`; the first to itself."""
    probe = list(range(len(order)))
    for k in range(1, len(order)):
        probe[order[k]] = order[k - 1]
    return probe


def observed(traj) -> list[dict]:
    """A trajectory's hints per step, mask_one and categoricals as indices (the traces' form)."""
    steps = []
    for t in range(traj.length):
        step = {}
        for k, v in traj.hints.items():
            kind = traj.spec[k].type
            step[k] = int(np.argmax(v[t])) if kind in (Type.MASK_ONE, Type.CATEGORICAL) else v[t].tolist()
        steps.append(step)
    return steps
