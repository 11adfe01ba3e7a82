"""Dataset files: exact round trip, safetensors compatibility, atomic writes, corrupt files refused."""

from __future__ import annotations

import numpy as np
import pytest
from safetensors.numpy import load_file

from relreason.data import ALGORITHMS, generate, iter_chunks
from relreason.data.generate import split_meta
from relreason.data.store import fingerprint, load_dataset, read_meta, save_dataset, write_dataset
from relreason.errors import RelreasonError


@pytest.mark.parametrize("name", ALGORITHMS.names())
def test_round_trip_is_exact(tmp_path, name, make_small):
    ds = make_small(name)
    path = save_dataset(tmp_path / "x.safetensors", ds)
    back = load_dataset(path)
    for k, v in ds.arrays().items():
        got = back.arrays()[k]
        assert got.dtype == v.dtype and np.array_equal(got, v), k
    assert list(back.spec) == list(ds.spec)  # feature order survives


def test_streamed_file_equals_in_memory_and_is_standard_safetensors(tmp_path):
    name = ALGORITHMS.names()[0]
    meta = split_meta(name, "custom", 6, 9, 1)
    path = write_dataset(tmp_path / "s.safetensors", iter_chunks(name, 6, 9, 1, chunk=4), meta)
    ds = generate(name, num=9, size=6, seed=1)
    assert fingerprint(load_dataset(path).arrays()) == fingerprint(ds.arrays())
    assert fingerprint(load_file(str(path))) == fingerprint(ds.arrays())  # readable by the safetensors library
    assert read_meta(path)["algorithm"] == name


def test_failed_write_leaves_nothing(tmp_path):
    name = ALGORITHMS.names()[0]

    def broken():
        yield from iter_chunks(name, 6, 4, 1, chunk=2)
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        write_dataset(tmp_path / "b.safetensors", broken(), split_meta(name, "custom", 6, 4, 1))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "missing"])
def test_corrupt_files_are_refused(tmp_path, damage, make_small):
    path = save_dataset(tmp_path / "x.safetensors", make_small(ALGORITHMS.names()[0]))
    raw = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(raw[: len(raw) // 2])
    elif damage == "garbage":
        path.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all" + raw[24:])
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        path.unlink()
    with pytest.raises(RelreasonError):
        load_dataset(path)
