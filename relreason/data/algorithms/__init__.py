"""The algorithms: each CLRS algorithm as a plain function, registered with everything known about it.

An algorithm function takes the same positional inputs as the reference function, runs a lockstep
batch (every input carries a leading batch axis) and returns a `Dataset`; it records its probes with a
`Recorder`. It is registered, next to its code, with all its facts (relreason.data.catalog):

    @register("bellman_ford", family="graphs", inputs="pos N sc, s N m1, A E sc, adj E m",
              outputs="pi N ptr", hints="pi_h N ptr, d N sc, msk N m",
              sample=samplers.graph_sampler(0.5, weighted=True, source=True),
              text=TextForm(train_lengths=CLRS_TEXT_LENGTHS, val_stop=33), groups=("core8",))
    def bellman_ford(A, s): ...

Importing this package registers the benchmark's 30 algorithms, one module per CLRS-30 class, in the
reference's order (the order of the `clrs30` group). Another package's algorithm is registered the
same way, in its own module: importing that module makes it a task everywhere.
"""

from __future__ import annotations

import importlib

from relreason.data.catalog import (ALGORITHM_INFO, ALGORITHMS, CLRS_TEXT_LENGTHS, SPECS, Algorithm, AlgorithmView,
                                    StreamForm, TextForm, algorithm_groups, canonical_split, live_names, register)

# One module per algorithm class, in the reference's order (google-deepmind/clrs specs.py; greedy
# before dynamic programming, as the CLRS-30 paper's tables list them); importing them fills ALGORITHMS.
FAMILY_MODULES = ("sorting", "searching", "divide_and_conquer", "greedy", "dynamic_programming", "graphs",
                  "strings", "geometry")

__all__ = ["ALGORITHMS", "ALGORITHM_INFO", "Algorithm", "AlgorithmView", "CLRS_TEXT_LENGTHS", "FAMILY_MODULES", "SPECS", "StreamForm",
           "TextForm", "algorithm_groups", "canonical_split", "live_names", "register"]


def _load_families() -> None:
    for module in FAMILY_MODULES:
        importlib.import_module(f"{__name__}.{module}")


_load_families()
ALGORITHMS.accept_plugins("relreason.algorithms")  # the built-ins are all in: installed plugins may add theirs
