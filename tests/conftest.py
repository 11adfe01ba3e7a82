"""Shared fixtures: small generated datasets, cached per session."""

from __future__ import annotations

import functools

import pytest
import torch

from relreason.data import generate

# Tests run tiny tensors on a shared 2-core machine: a second intra-op thread only adds
# synchronisation, which under load makes model tests ~50x slower. One thread per test process.
torch.set_num_threads(1)


@functools.lru_cache(maxsize=None)
def small_dataset(name: str, size: int = 8, num: int = 12, seed: int = 7):
    """A small custom split (cached: datasets are treated as read-only by tests)."""
    return generate(name, num=num, size=size, seed=seed)


@pytest.fixture
def make_small():
    return small_dataset
