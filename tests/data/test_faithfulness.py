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


GOLDEN_V1 = json.loads((Path(__file__).parent / "golden_digests_v1.json").read_text())
V1_DROPPED = {"quickselect": "hint.pivot"}  # hints v2.0 added: CLRS v1.0.0's quickselect records no pivot


def test_the_v1_data_are_the_string_matchers_and_quickselect_and_have_golden_digests():
    from relreason.data.generate import v1_algorithms

    assert sorted(GOLDEN_V1) == sorted(v1_algorithms() + list(V1_DROPPED)) == \
        ["kmp_matcher", "naive_string_matcher", "quickselect"]


@pytest.mark.parametrize("split", list(CANONICAL_SPLITS))
@pytest.mark.parametrize("name", sorted(GOLDEN_V1))
def test_v1_split_equals_the_clrs_v1_reference(name, split):
    """CLRS v1.0.0's splits (scripts/golden_digests.py --v1, run on the v1.0.0 tag's samplers): the string
    matchers' drawn by v1's sampler (a needle of n // 4 on top of a haystack of n: 20 nodes at n = 16, 80 at
    n = 64; data.matcher_v1_splits), quickselect's the benchmark's without the pivot hint (model.drop_hints)."""
    size = CANONICAL_SPLITS[split].size
    if name in V1_DROPPED:
        ds = generate(name, split=split)
        arrays = {k: v for k, v in ds.arrays().items() if k != V1_DROPPED[name]}
        assert len(arrays) == len(ds.arrays()) - 1 and ds.n == size
    else:
        ds = generate(name, split=split, v1=True)
        arrays = ds.arrays()
        assert ds.meta["sampler"] == "clrs v1.0.0" and ds.n == size + size // 4
    assert fingerprint(arrays) == GOLDEN_V1[name][split]


def test_the_v1_sampler_is_refused_where_it_did_not_change():
    from relreason.errors import RelreasonError

    with pytest.raises(RelreasonError, match="bellman_ford has no CLRS v1.0.0 sampler of its own"):
        generate("bellman_ford", split="test", v1=True)
