"""Shared by the graph algorithm tests: textbook references written independently of the package."""

from __future__ import annotations

import numpy as np


def bellman_ford_distances(A: np.ndarray, s: int) -> np.ndarray:
    """n - 1 rounds of relaxing every edge A[u, v] != 0 (inf where unreachable)."""
    n = len(A)
    dist = np.full(n, np.inf)
    dist[s] = 0.0
    for _ in range(n - 1):
        for u, v in zip(*np.nonzero(A)):
            dist[v] = min(dist[v], dist[u] + A[u, v])
    return dist
