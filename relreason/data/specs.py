"""The benchmark's vocabulary (Stage, Location, Type, Feature) and the mini-language specs are written in.

A spec maps each feature name to (stage, location, type); encoders, decoders, losses, metrics and
storage all dispatch on it, so adding an algorithm needs no model code. Feature names are exactly
the reference's (google-deepmind/clrs `specs.py`).

An algorithm declares its spec where it is registered (`relreason.data.algorithms.register`), one
list per stage, `name LOC TYPE` with LOC in N/E/G (node/edge/graph) and TYPE in sc/cat/m/m1/ptr/perm;
`parse_spec` turns them into frozen `Feature`s. This module knows no algorithm: the specs of the
registered ones are `relreason.data.algorithms.SPECS`.
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


def parse_spec(inputs: str, outputs: str, hints: str, classes: Mapping[str, int]) -> Spec:
    """The spec written as three feature lists, `"name LOC TYPE, ..."` per stage (LOC in N/E/G, TYPE in
    sc/cat/m/m1/ptr/perm; an empty string for none), with the class count of every categorical.

    Raises ValueError naming the first mistake: a malformed item, an unknown location or type, a name
    declared twice, a categorical without a class count, or a count for no categorical."""
    spec: dict[str, Feature] = {}
    for stage, text in ((Stage.INPUT, inputs), (Stage.OUTPUT, outputs), (Stage.HINT, hints)):
        if not isinstance(text, str):
            raise ValueError(f"the {stage.value}s must be a string like \"pos N sc, key N sc\", got {text!r}")
        for item in text.split(",") if text.strip() else ():
            parts = item.split()
            if len(parts) != 3:
                raise ValueError(f"{stage.value} {item.strip()!r} is not `name LOC TYPE`")
            name, loc, typ = parts
            if loc not in _LOC or typ not in _TYPE:
                raise ValueError(f"{stage.value} {item.strip()!r}: location is one of {'/'.join(_LOC)} and "
                                 f"type one of {'/'.join(_TYPE)}")
            if name in spec:
                raise ValueError(f"feature {name!r} is declared twice")
            t = _TYPE[typ]
            count = classes.get(name, 0) if t is Type.CATEGORICAL else 0
            if t is Type.CATEGORICAL and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
                raise ValueError(f"categorical {name} needs a positive class count in classes, got {count!r}")
            spec[name] = Feature(name, stage, _LOC[loc], t, count)
    stray = sorted(set(classes) - {f.name for f in spec.values() if f.type is Type.CATEGORICAL})
    if stray:
        raise ValueError(f"classes {stray} name no categorical feature")
    return MappingProxyType(spec)


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


def spec_to_json(spec: Spec) -> dict[str, list]:
    """A JSON-friendly form of a spec: name -> [stage, location, type, num_classes]."""
    return {f.name: [f.stage.value, f.location.value, f.type.value, f.num_classes] for f in spec.values()}


def spec_from_json(data: Mapping[str, list]) -> dict[str, Feature]:
    return {name: Feature(name, Stage(s), Location(l), Type(t), int(c)) for name, (s, l, t, c) in data.items()}


def spec_hash(spec: Spec) -> str:
    """A short stable fingerprint of a spec, stored with datasets and checkpoints."""
    blob = json.dumps(spec_to_json(spec), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
