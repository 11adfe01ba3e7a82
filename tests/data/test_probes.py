"""The Recorder refuses what the spec cannot hold (issue 31): a pointer outside 0..n-1, an index given for a
mask_one or categorical feature outside its range (it would become an all-zero row), and a probe whose axes
do not have the feature's sizes."""

from __future__ import annotations

import numpy as np
import pytest

from relreason.data.probes import ProbeError, Recorder, positions
from relreason.data.specs import parse_spec

SPEC = parse_spec("pos N sc, A E sc", "best N ptr, color N cat", "pick N m1", {"color": 3})


def _record(n=4, batch=2, best=None, color=None, pick=None, A=None):
    rec = Recorder("toy", n, batch=batch, spec=SPEC)
    rec.input(pos=positions(n, batch), A=np.zeros((batch, n, n)) if A is None else A)
    rec.hint(pick=np.zeros(batch, np.int64) if pick is None else pick)
    rec.output(best=np.zeros((batch, n), np.int64) if best is None else best,
               color=np.zeros((batch, n), np.int64) if color is None else color)
    return rec.finish()


def test_a_well_formed_recording_passes():
    ds = _record(best=np.array([[0, 3, 2, 1], [1, 1, 1, 1]]), color=np.array([[0, 1, 2, 0], [2, 2, 2, 2]]),
                 pick=np.array([3, 0]))
    assert ds.outputs["color"].shape == (2, 4, 3) and ds.outputs["color"].sum() == 8  # one-hot, one per node


@pytest.mark.parametrize("changes, message", [
    ({"best": np.array([[0, 4, 2, 1], [1, 1, 1, 1]])}, "probe best (pointer) holds 4, outside the indices 0..3"),
    ({"best": np.array([[0, -1, 2, 1], [1, 1, 1, 1]])}, "holds -1, outside"),
    ({"best": np.array([[0, 1.5, 2, 1], [1, 1, 1, 1]])}, "holds 1.5, outside"),
    ({"color": np.array([[0, 3, 0, 0], [0, 0, 0, 0]])}, "probe color (categorical) holds 3, outside the indices 0..2"),
    ({"pick": np.array([0, 4])}, "probe pick (mask_one) holds 4, outside the indices 0..3"),
    ({"A": np.zeros((2, 4, 4, 1))}, "probe A has 4 axes, expected 3"),
    ({"A": np.zeros((2, 4, 3))}, "probe A has shape [2, 4, 3], expected [2, 4, 4] (n = 4)"),
    ({"A": np.zeros((3, 4, 4))}, "probe A has shape [3, 4, 4], expected [2, 4, 4] (n = 4)"),
])
def test_out_of_range_indices_and_wrong_shapes_are_refused_at_generation(changes, message):
    with pytest.raises(ProbeError, match="toy: ") as caught:
        _record(**changes)
    assert message in str(caught.value)
