"""The algorithm registry: each CLRS algorithm as a plain function plus its input sampler.

An algorithm function takes the same positional inputs as the reference function and records its
probes with a `Recorder`. It is registered with the sampler that draws its inputs:

    @register("bellman_ford", sample=samplers.graph_sampler(0.5, weighted=True, source=True))
    def bellman_ford(A, s): ...

The function runs a lockstep batch: every input carries a leading batch axis and it returns a
`Dataset`. Batched code is how generation gets fast; `run_algorithm` runs a single sample as a batch
of one.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

from relreason.data.samplers import SampleFn
from relreason.registry import Registry


@dataclass(frozen=True)
class Algorithm:
    name: str
    run: Callable  # run(*inputs) -> Dataset (inputs with a batch axis)
    sample: SampleFn  # sample(rng, length) -> one sample's inputs, in the reference's draw order
    min_size: int  # smallest `length` the sampler accepts


ALGORITHMS: Registry[Algorithm] = Registry("algorithm", "relreason list algorithms")

# One module per algorithm class (graph_search: the DFS-based graph algorithms); importing them fills ALGORITHMS.
FAMILY_MODULES = ("sorting", "searching", "divide_and_conquer", "greedy", "dynamic_programming", "graphs",
                  "graph_search",
                  "strings", "geometry")


def register(name: str, sample: SampleFn, min_size: int = 2) -> Callable:
    """Decorator registering an algorithm function under its CLRS name."""

    def add(fn: Callable) -> Callable:
        ALGORITHMS.register(name, Algorithm(name, fn, sample, min_size))
        return fn

    return add


def _load_families() -> None:
    for module in FAMILY_MODULES:
        importlib.import_module(f"{__name__}.{module}")


_load_families()
ALGORITHMS.accept_plugins("relreason.algorithms")  # the built-ins are all in: installed plugins may add theirs
