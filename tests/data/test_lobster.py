"""Lobster graphs: shape of the generator's trees, distances against an independent method, padding."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from relreason.data.lobster import generate_lobster, lobster_split
from relreason.data.store import fingerprint
from relreason.errors import RelreasonError

ROOT = Path(__file__).resolve().parents[2]


def floyd(a: np.ndarray) -> np.ndarray:
    n = a.shape[0]
    d = np.where(a > 0, a, np.inf)
    np.fill_diagonal(d, 0.0)
    for k in range(n):
        d = np.minimum(d, d[:, k:k + 1] + d[k:k + 1, :])
    return d


@pytest.mark.parametrize("weighted", [False, True])
def test_lobsters_are_trees_with_correct_distances(weighted):
    ds = generate_lobster(40, seed=5, backbone=(4, 34), weighted=weighted)
    for b in range(len(ds)):
        m = int(ds.sizes[b])
        a = ds.inputs["A"][b, :m, :m]
        assert np.array_equal(a, a.T) and np.count_nonzero(np.triu(a)) == m - 1  # a tree has m - 1 edges
        d = floyd(a)
        assert np.isfinite(d).all()  # connected
        leaves_deg = (a > 0).sum(1)
        assert leaves_deg.max() >= 2 or m == 2
        types = ds.inputs["node_type"][b, :m].argmax(-1)
        src, dst = np.flatnonzero(types == 0), np.flatnonzero(types == 1)
        assert len(src) == 1 and len(dst) == 1 and src[0] != dst[0]
        assert ds.outputs["distance"][b] == pytest.approx(d[src[0], dst[0]])
        if not weighted:
            assert set(np.unique(a)) <= {0.0, 1.0}
        else:
            w = a[a > 0]
            assert w.min() >= 0.5 and w.max() < 1.5


def test_backbone_and_leaf_counts():
    """Backbone 100: about 100 * (1 + 0.2 + 0.04) = 124 nodes on average, as the RT paper says."""
    ds = generate_lobster(200, seed=3, backbone=100)
    assert 118 < ds.sizes.mean() < 130 and ds.sizes.min() >= 100


def test_padding_is_empty_and_sizes_vary():
    ds = generate_lobster(30, seed=1, backbone=(4, 34))
    assert len(set(ds.sizes.tolist())) > 5
    for b in range(len(ds)):
        m = int(ds.sizes[b])
        assert not ds.inputs["A"][b, m:].any() and not ds.inputs["A"][b, :, m:].any()
        assert not ds.inputs["adj"][b, m:].any() and not ds.inputs["node_type"][b, m:].any()
        assert np.all(np.diag(ds.inputs["adj"][b])[:m] == 1)


def _golden_script():
    spec = importlib.util.spec_from_file_location("golden_lobster", ROOT / "scripts" / "golden_lobster.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GOLDEN_SCRIPT = _golden_script()
GOLDEN = json.loads(GOLDEN_SCRIPT.OUT.read_text())["digests"]


def test_golden_file_covers_every_lobster_task_and_case():
    assert GOLDEN_SCRIPT.TASKS == {"lobster": False, "lobster_weighted": True}
    assert {task: set(d) for task, d in GOLDEN.items()} == {task: set(GOLDEN_SCRIPT.cases()) for task in GOLDEN_SCRIPT.TASKS}


@pytest.mark.parametrize("case", list(GOLDEN_SCRIPT.cases()))
@pytest.mark.parametrize("task", list(GOLDEN_SCRIPT.TASKS))
def test_splits_equal_their_recorded_digests(task, case):
    """Same seed, same bytes, across versions: a changed generator fails here until
    scripts/golden_lobster.py is re-run on purpose."""
    ds = lobster_split(task, GOLDEN_SCRIPT.TASKS[task], **GOLDEN_SCRIPT.cases()[case])
    assert fingerprint(ds.arrays()) == GOLDEN[task][case]


def test_splits():
    test = lobster_split("lobster", False, "test", num=5)
    assert test.sizes.min() >= 100
    with pytest.raises(RelreasonError):
        lobster_split("lobster", False, "bogus")
    with pytest.raises(RelreasonError):
        generate_lobster(3, 1, 1)
