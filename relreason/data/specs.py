"""The benchmark's vocabulary (Stage, Location, Type) and the feature spec of all 30 CLRS algorithms.

A spec maps each feature name to (stage, location, type); encoders, decoders, losses, metrics and
storage all dispatch on it, so adding an algorithm needs no model code. Feature names are exactly
the reference's (google-deepmind/clrs `specs.py`).

The table is written compactly, one line per algorithm, `name LOC TYPE` with LOC in N/E/G
(node/edge/graph) and TYPE in sc/cat/m/m1/ptr/perm; `_parse` turns it into frozen `Feature`s.
"""

from __future__ import annotations

import enum
import hashlib
import json
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping


class Stage(str, enum.Enum):
    INPUT = "input"
    OUTPUT = "output"
    HINT = "hint"


class Location(str, enum.Enum):
    NODE = "node"
    EDGE = "edge"
    GRAPH = "graph"


class Type(str, enum.Enum):
    SCALAR = "scalar"
    CATEGORICAL = "categorical"
    MASK = "mask"
    MASK_ONE = "mask_one"
    POINTER = "pointer"
    SHOULD_BE_PERMUTATION = "should_be_permutation"
    # Produced by the training option "enforce permutations" from SHOULD_BE_PERMUTATION.
    PERMUTATION_POINTER = "permutation_pointer"


POINTER_TYPES = frozenset({Type.POINTER, Type.SHOULD_BE_PERMUTATION, Type.PERMUTATION_POINTER})

# Masked (unknown) targets carry this value; losses and metrics ignore them.
MASKED = -1


@dataclass(frozen=True)
class Feature:
    """One probe of an algorithm: where it lives, what it is, and (categoricals) how many classes."""

    name: str
    stage: Stage
    location: Location
    type: Type
    num_classes: int = 0  # categoricals only: size of the one-hot last axis

    def shape(self, n: int) -> tuple[int, ...]:
        """Shape of one sample's value (one time step for hints) on a graph of n nodes."""
        base = {Location.NODE: (n,), Location.EDGE: (n, n), Location.GRAPH: ()}[self.location]
        return base + ((self.num_classes,) if self.type is Type.CATEGORICAL else ())


Spec = Mapping[str, Feature]

_LOC = {"N": Location.NODE, "E": Location.EDGE, "G": Location.GRAPH}
_TYPE = {
    "sc": Type.SCALAR,
    "cat": Type.CATEGORICAL,
    "m": Type.MASK,
    "m1": Type.MASK_ONE,
    "ptr": Type.POINTER,
    "perm": Type.SHOULD_BE_PERMUTATION,
}


@dataclass(frozen=True)
class AlgorithmInfo:
    """Static facts about one benchmark algorithm."""

    name: str
    klass: str  # algorithm class in the CLRS-30 paper, e.g. "sorting"
    spec: Spec
    eval_multiplier: int  # val/test sample count = 32 x this (reference num_samples_multiplier)

    def features(self, stage: Stage) -> list[Feature]:
        return [f for f in self.spec.values() if f.stage is stage]


# name: (class, multiplier, inputs, outputs, hints, categorical sizes)
_TABLE: dict[str, tuple[str, int, str, str, str, dict[str, int]]] = {
    "insertion_sort": ("sorting", 1, "pos N sc, key N sc", "pred N perm", "pred_h N ptr, i N m1, j N m1", {}),
    "bubble_sort": ("sorting", 1, "pos N sc, key N sc", "pred N perm", "pred_h N ptr, i N m1, j N m1", {}),
    "heapsort": ("sorting", 1, "pos N sc, key N sc", "pred N perm",
                 "pred_h N ptr, parent N ptr, i N m1, j N m1, largest N m1, heap_size N m1, phase G cat",
                 {"phase": 3}),
    "quicksort": ("sorting", 1, "pos N sc, key N sc", "pred N perm",
                  "pred_h N ptr, p N m1, r N m1, i N m1, j N m1", {}),
    "minimum": ("searching", 64, "pos N sc, key N sc", "min N m1", "pred_h N ptr, min_h N m1, i N m1", {}),
    "binary_search": ("searching", 64, "pos N sc, key N sc, target G sc", "return N m1",
                      "pred_h N ptr, low N m1, high N m1, mid N m1", {}),
    "quickselect": ("searching", 64, "pos N sc, key N sc", "median N m1",
                    "pred_h N ptr, p N m1, r N m1, i N m1, j N m1, i_rank G sc, target G sc, pivot N m1", {}),
    "find_maximum_subarray_kadane": (
        "divide_and_conquer", 32, "pos N sc, key N sc", "start N m1, end N m1",
        "pred_h N ptr, best_low N m1, best_high N m1, best_sum G sc, i N m1, j N m1, sum G sc", {}),
    "activity_selector": ("greedy", 1, "pos N sc, s N sc, f N sc", "selected N m",
                          "pred_h N ptr, selected_h N m, m N m1, k N m1", {}),
    "task_scheduling": ("greedy", 1, "pos N sc, d N sc, w N sc", "selected N m",
                        "pred_h N ptr, selected_h N m, i N m1, t G sc", {}),
    "matrix_chain_order": ("dynamic_programming", 1, "pos N sc, p N sc", "s E ptr",
                           "pred_h N ptr, m E sc, s_h E ptr, msk E m", {}),
    "lcs_length": ("dynamic_programming", 1, "string N m, pos N sc, key N cat", "b E cat",
                   "pred_h N ptr, b_h E cat, c E sc", {"key": 4, "b": 4, "b_h": 4}),
    "optimal_bst": ("dynamic_programming", 1, "pos N sc, p N sc, q N sc", "root E ptr",
                    "pred_h N ptr, root_h E ptr, e E sc, w E sc, msk E m", {}),
    "dfs": ("graphs", 1, "pos N sc, A E sc, adj E m", "pi N ptr",
            "pi_h N ptr, color N cat, d N sc, f N sc, s_prev N ptr, s N m1, u N m1, v N m1, s_last N m1, time G sc",
            {"color": 3}),
    "bfs": ("graphs", 1, "pos N sc, s N m1, A E sc, adj E m", "pi N ptr", "reach_h N m, pi_h N ptr", {}),
    "topological_sort": (
        "graphs", 1, "pos N sc, A E sc, adj E m", "topo N ptr, topo_head N m1",
        "topo_h N ptr, topo_head_h N m1, color N cat, s_prev N ptr, s N m1, u N m1, v N m1, s_last N m1",
        {"color": 3}),
    "articulation_points": (
        "graphs", 1, "pos N sc, A E sc, adj E m", "is_cut N m",
        "is_cut_h N m, pi_h N ptr, color N cat, d N sc, f N sc, low N sc, child_cnt N sc, s_prev N ptr, "
        "s N m1, u N m1, v N m1, s_last N m1, time G sc", {"color": 3}),
    "bridges": (
        "graphs", 1, "pos N sc, A E sc, adj E m", "is_bridge E m",
        "is_bridge_h E m, pi_h N ptr, color N cat, d N sc, f N sc, low N sc, s_prev N ptr, s N m1, u N m1, "
        "v N m1, s_last N m1, time G sc", {"color": 3}),
    "strongly_connected_components": (
        "graphs", 1, "pos N sc, A E sc, adj E m", "scc_id N ptr",
        "scc_id_h N ptr, A_t E m, color N cat, d N sc, f N sc, s_prev N ptr, s N m1, u N m1, v N m1, "
        "s_last N m1, time G sc, phase G m", {"color": 3}),
    "mst_kruskal": (
        "graphs", 1, "pos N sc, A E sc, adj E m", "in_mst E m",
        "in_mst_h E m, pi N ptr, u N m1, v N m1, root_u N m1, root_v N m1, mask_u N m, mask_v N m, phase G cat",
        {"phase": 3}),
    "mst_prim": ("graphs", 1, "pos N sc, s N m1, A E sc, adj E m", "pi N ptr",
                 "pi_h N ptr, key N sc, mark N m, in_queue N m, u N m1", {}),
    "bellman_ford": ("graphs", 1, "pos N sc, s N m1, A E sc, adj E m", "pi N ptr",
                     "pi_h N ptr, d N sc, msk N m", {}),
    "dijkstra": ("graphs", 1, "pos N sc, s N m1, A E sc, adj E m", "pi N ptr",
                 "pi_h N ptr, d N sc, mark N m, in_queue N m, u N m1", {}),
    "dag_shortest_paths": (
        "graphs", 1, "pos N sc, s N m1, A E sc, adj E m", "pi N ptr",
        "pi_h N ptr, d N sc, mark N m, topo_h N ptr, topo_head_h N m1, color N cat, s_prev N ptr, u N m1, "
        "v N m1, s_last N m1, phase G m", {"color": 3}),
    "floyd_warshall": ("graphs", 1, "pos N sc, A E sc, adj E m", "Pi E ptr",
                       "Pi_h E ptr, D E sc, msk E m, k N m1", {}),
    "naive_string_matcher": ("strings", 64, "string N m, pos N sc, key N cat", "match N m1",
                             "pred_h N ptr, s N m1, i N m1, j N m1", {"key": 4}),
    "kmp_matcher": (
        "strings", 64, "string N m, pos N sc, key N cat", "match N m1",
        "pred_h N ptr, pi N ptr, is_reset N m, k N m1, k_reset G m, q N m1, q_reset G m, s N m1, i N m1, "
        "phase G m", {"key": 4}),
    "segments_intersect": ("geometry", 64, "pos N sc, x N sc, y N sc", "intersect G m",
                           "i N m1, j N m1, k N m1, dir N sc, on_seg N m", {}),
    "graham_scan": ("geometry", 1, "pos N sc, x N sc, y N sc", "in_hull N m",
                    "best N m1, atans N sc, in_hull_h N m, stack_prev N ptr, last_stack N m1, i N m1, phase G cat",
                    {"phase": 5}),
    "jarvis_march": ("geometry", 1, "pos N sc, x N sc, y N sc", "in_hull N m",
                     "pred_h N ptr, in_hull_h N m, best N m1, last_point N m1, endpoint N m1, i N m1, phase G cat",
                     {"phase": 2}),
}


def _parse(stage: Stage, text: str, classes: dict[str, int]) -> dict[str, Feature]:
    out = {}
    for item in text.split(","):
        name, loc, typ = item.split()
        t = _TYPE[typ]
        out[name] = Feature(name, stage, _LOC[loc], t, classes.get(name, 0) if t is Type.CATEGORICAL else 0)
        if t is Type.CATEGORICAL and not out[name].num_classes:
            raise ValueError(f"categorical {name} has no class count")
    return out


def _build() -> dict[str, AlgorithmInfo]:
    infos = {}
    for name, (klass, mult, inputs, outputs, hints, classes) in _TABLE.items():
        spec: dict[str, Feature] = {}
        for stage, text in ((Stage.INPUT, inputs), (Stage.OUTPUT, outputs), (Stage.HINT, hints)):
            spec.update(_parse(stage, text, classes))
        infos[name] = AlgorithmInfo(name, klass, MappingProxyType(spec), mult)
    return infos


ALGORITHM_INFO: Mapping[str, AlgorithmInfo] = MappingProxyType(_build())
SPECS: Mapping[str, Spec] = MappingProxyType({k: v.spec for k, v in ALGORITHM_INFO.items()})

# The RT paper's eight core tasks (one per algorithm class).
CORE8 = ("activity_selector", "bellman_ford", "binary_search", "find_maximum_subarray_kadane",
         "graham_scan", "insertion_sort", "matrix_chain_order", "naive_string_matcher")


@dataclass(frozen=True)
class SplitInfo:
    size: int  # number of nodes
    seed: int
    num: int  # base sample count; val/test multiply it by the algorithm's eval_multiplier


CANONICAL_SPLITS: Mapping[str, SplitInfo] = MappingProxyType({
    "train": SplitInfo(size=16, seed=1, num=1000),
    "val": SplitInfo(size=16, seed=2, num=32),
    "test": SplitInfo(size=64, seed=3, num=32),
})


def canonical_split(algorithm: str, split: str) -> SplitInfo:
    """The benchmark's (size, seed, num) for `split`, with the per-algorithm eval multiplier applied."""
    from relreason.errors import RelreasonError

    if split not in CANONICAL_SPLITS:
        raise RelreasonError(f"unknown split {split!r}", "use one of: " + ", ".join(CANONICAL_SPLITS))
    base = CANONICAL_SPLITS[split]
    mult = 1 if split == "train" else ALGORITHM_INFO[algorithm].eval_multiplier
    return SplitInfo(base.size, base.seed, base.num * mult)


def spec_to_json(spec: Spec) -> dict[str, list]:
    """A JSON-friendly form of a spec: name -> [stage, location, type, num_classes]."""
    return {f.name: [f.stage.value, f.location.value, f.type.value, f.num_classes] for f in spec.values()}


def spec_from_json(data: Mapping[str, list]) -> dict[str, Feature]:
    return {name: Feature(name, Stage(s), Location(l), Type(t), int(c)) for name, (s, l, t, c) in data.items()}


def spec_hash(spec: Spec) -> str:
    """A short stable fingerprint of a spec, stored with datasets and checkpoints."""
    blob = json.dumps(spec_to_json(spec), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
