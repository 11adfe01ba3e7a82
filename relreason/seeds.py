"""Derived random seeds: one independent stream per (run seed, purpose, step, ...).

Every random draw of a run comes from a generator seeded here, never from arithmetic on the seed
(`seed * 1_000_003 + step` makes seed s's validation stream collide with seed s-1's training
stream). `np.random.SeedSequence` hashes the whole key, so distinct keys give independent streams:

    rng = np.random.default_rng(derive_seed(seed, Purpose.BATCH, step))
    gen = torch.Generator().manual_seed(derive_seed(seed, Purpose.NOISE, step))
"""

from __future__ import annotations

import enum

import numpy as np


class Purpose(enum.IntEnum):
    """What a derived stream is for (part of the key, so streams of different purposes never meet)."""

    BATCH = 0  # which training examples a step takes
    NOISE = 1  # teacher forcing, Gumbel noise, dropout, random positions of a training step
    VALIDATION = 2  # random positions of the validation passes (the same draw at every validation)
    STREAM = 3  # fresh training samples (the Ibarz et al. stream)
    TEXT = 4  # randomized positional encodings of text models
    FIXED_ORDER = 5  # the training examples of data.order fixed (keyed by FIXED_ORDER_KEY, not the run's seed)


# The seed the streams of data.order fixed are derived from in place of the run's: the RT authors' fork
# draws its batches with the train sampler of --train_seed 1 (run.py L18), whatever --model_seed is.
FIXED_ORDER_KEY = 1


def derive_seed(seed: int, purpose: Purpose | int, *keys: int) -> int:
    """A 63-bit seed for the stream (seed, purpose, *keys); negative inputs are rejected."""
    parts = [int(seed), int(purpose), *(int(k) for k in keys)]
    if any(p < 0 for p in parts):
        raise ValueError(f"seed keys must be non-negative, got {parts}")
    state = np.random.SeedSequence(parts).generate_state(2, dtype=np.uint32)
    return (int(state[0]) << 31) ^ int(state[1])
