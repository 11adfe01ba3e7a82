"""Our canonical splits are the CLRS-30 benchmark's, value for value.

`golden_digests.json` holds, per algorithm and split, the `fingerprint` (sha256 of every array's
name, shape and float64 values, hints [B, T, ...]) of the split made by the reference
implementation (google-deepmind/clrs 2.0.3 `build_sampler(name, num_samples, length, seed)` with the
canonical sizes and seeds), computed by scripts/golden_digests.py in the reference's own venv (never
in CI). Matching it means every input, hint step, output and length is identical, so published
numbers are comparable with ours.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from relreason.data import ALGORITHMS, generate
from relreason.data.specs import CANONICAL_SPLITS
from relreason.data.store import fingerprint

GOLDEN = json.loads((Path(__file__).parent / "golden_digests.json").read_text())


def test_every_registered_algorithm_has_golden_digests_and_nothing_else():
    assert set(GOLDEN) == set(ALGORITHMS.names())
    for name, digests in GOLDEN.items():
        assert set(digests) == set(CANONICAL_SPLITS), name


@pytest.mark.parametrize("split", list(CANONICAL_SPLITS))
@pytest.mark.parametrize("name", ALGORITHMS.names())
def test_canonical_split_equals_reference(name, split):
    assert name in GOLDEN, f"no reference digest recorded for {name}"
    ds = generate(name, split=split)
    assert fingerprint(ds.arrays()) == GOLDEN[name][split]
