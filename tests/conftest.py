"""Shared fixtures: small generated datasets, cached per session."""

from __future__ import annotations

import functools

import pytest

from relreason.data import generate


@functools.lru_cache(maxsize=None)
def small_dataset(name: str, size: int = 8, num: int = 12, seed: int = 7):
    """A small custom split (cached: datasets are treated as read-only by tests)."""
    return generate(name, num=num, size=size, seed=seed)


@pytest.fixture
def make_small():
    return small_dataset
