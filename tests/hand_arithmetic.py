"""Plain-Python arithmetic for the processors' hand-computed equation tests: fixed small weight matrices
and the vector operations, one number at a time (no torch, so no shared code with what is tested)."""

from __future__ import annotations


def pattern(rows: int, cols: int, seed: int) -> list[list[float]]:
    """A fixed matrix of small values in [-0.75, 0.75], different per seed."""
    return [[((seed + 3 * r + 5 * c) % 7 - 3) / 4 for c in range(cols)] for r in range(rows)]


def mv(w: list[list[float]], x: list[float]) -> list[float]:
    """The matrix-vector product w x."""
    return [sum(a * b for a, b in zip(row, x)) for row in w]


def add(*vectors: list[float]) -> list[float]:
    """The elementwise sum of equally long vectors."""
    return [sum(t) for t in zip(*vectors)]
