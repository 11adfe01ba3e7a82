"""Properties every registered algorithm must have: spec-conform probes, padding, determinism,
and (test_faithfulness.py) canonical splits equal to the reference benchmark's."""

from __future__ import annotations

import numpy as np
import pytest

from relreason.data import ALGORITHMS, generate, iter_chunks, run_algorithm
from relreason.data.algorithms import ALGORITHMS as REG
from relreason.data.samplers import RandomState
from relreason.data.specs import POINTER_TYPES, Stage, Type
from relreason.data.store import fingerprint
from relreason.data.trajectory import Dataset

NAMES = ALGORITHMS.names()


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("size", [5, 12])
def test_probes_conform_to_spec(name, size, make_small):
    ds = make_small(name, size=size)
    B, T = len(ds), ds.max_length
    assert ds.lengths.min() >= 1 and ds.lengths.max() == T
    for f in ds.spec.values():
        store = {Stage.INPUT: ds.inputs, Stage.OUTPUT: ds.outputs, Stage.HINT: ds.hints}[f.stage]
        x = store[f.name]
        lead = (B, T) if f.stage is Stage.HINT else (B,)
        assert x.shape == lead + f.shape(ds.n), f.name
        if f.stage is Stage.HINT:
            valid = np.arange(T)[None, :] < ds.lengths[:, None]  # [B, T]
            assert not np.any(x[~valid]), f"{f.name}: hint padding is not zero"
            x = x[valid]
        if f.type in POINTER_TYPES:
            assert x.min() >= -1 and x.max() < ds.n, f.name
        elif f.type is Type.MASK_ONE:
            assert np.all(x.sum(-1) == 1) and set(np.unique(x)) <= {0, 1}, f.name
        elif f.type is Type.CATEGORICAL:
            assert np.all(np.abs(x).sum(-1) == 1), f.name
        elif f.type is Type.MASK:
            assert set(np.unique(x)) <= {-1, 0, 1}, f.name


# The storage dtypes the README promises ("Dataset format"), written out independently of the code.
README_DTYPES = {Type.POINTER: np.int32, Type.SHOULD_BE_PERMUTATION: np.int32, Type.PERMUTATION_POINTER: np.int32,
                 Type.CATEGORICAL: np.float32, Type.MASK: np.float32, Type.MASK_ONE: np.float32,
                 Type.SCALAR: np.float64}


@pytest.mark.parametrize("name", NAMES)
def test_dtypes_are_the_documented_ones(name, make_small):
    ds = make_small(name)
    stores = {Stage.INPUT: ds.inputs, Stage.OUTPUT: ds.outputs, Stage.HINT: ds.hints}
    for f in ds.spec.values():
        assert stores[f.stage][f.name].dtype == README_DTYPES[f.type], f"{f.stage.value}.{f.name} ({f.type.value})"
    assert ds.lengths.dtype == np.int64


@pytest.mark.parametrize("name", NAMES)
def test_pos_is_the_reference_position_input(name, make_small):
    """Every algorithm has the node input `pos` = i/n; string tasks (haystack then needle, or the two
    strings of LCS) restart it at 0 for the second string: i/|T| then j/|P|."""
    ds = make_small(name, size=9)
    pos = ds.inputs["pos"]
    assert pos.shape == (len(ds), ds.n)
    for row in pos:
        starts = list(np.flatnonzero(row == 0)) + [ds.n]
        assert starts[0] == 0 and len(starts) - 1 == (2 if "string" in ds.inputs else 1), row
        for lo, hi in zip(starts, starts[1:]):
            np.testing.assert_allclose(row[lo:hi], np.arange(hi - lo) / (hi - lo))


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_bytes_any_chunking(name):
    a = generate(name, num=7, size=6, seed=3)
    b = Dataset.concat(iter_chunks(name, 6, 7, 3, chunk=2))
    assert fingerprint(a.arrays()) == fingerprint(b.arrays())
    c = generate(name, num=7, size=6, seed=4)
    assert fingerprint(a.arrays()) != fingerprint(c.arrays())


@pytest.mark.parametrize("name", NAMES)
def test_run_algorithm_matches_generated_sample(name):
    alg = REG.get(name)
    rng = RandomState(11)
    inputs = alg.sample(rng, 7)
    traj = run_algorithm(name, *inputs)
    ds = generate(name, num=1, size=7, seed=11)
    one = ds.trajectory(0)
    for group in ("inputs", "hints", "outputs"):
        for k, v in getattr(traj, group).items():
            np.testing.assert_array_equal(v, getattr(one, group)[k], err_msg=f"{group}.{k}")
