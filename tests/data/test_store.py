"""Dataset files: exact round trip, safetensors compatibility, atomic writes, corrupt files refused,
permissions from the umask, temporaries of dead writers removed, none left by an interrupt landing anywhere,
unreadable files named as such."""

from __future__ import annotations

import ast
import os
import stat
from pathlib import Path

import numpy as np
import pytest
from fake_runs import dead_pid
from safetensors.numpy import load_file

from relreason.data import ALGORITHMS, generate, iter_chunks
from relreason.data.generate import split_meta
from relreason.data.store import (atomic_path, fingerprint, load_dataset, owned_temporary, owner_tag, read_meta,
                                  remove_stale_temporaries, save_dataset, write_dataset)
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


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_files_take_the_users_umask(tmp_path, umask, make_small):
    old = os.umask(umask)
    try:
        path = save_dataset(tmp_path / "sub" / "x.safetensors", make_small(ALGORITHMS.names()[0]))
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o777 & ~umask


def test_temporaries_carry_the_writers_pid(tmp_path, monkeypatch):
    seen = []
    real_save = np.save

    def spy(file, arr, *a, **k):
        seen.append(Path(file).parent.name)
        return real_save(file, arr, *a, **k)

    monkeypatch.setattr(np, "save", spy)
    name = ALGORITHMS.names()[0]
    write_dataset(tmp_path / "x.safetensors", iter_chunks(name, 5, 2, 1, chunk=1), split_meta(name, "custom", 5, 2, 1))
    assert seen and all(s.startswith(f".spill-{owner_tag()}.") for s in seen)
    with atomic_path(tmp_path / "y.json") as tmp:
        assert tmp.name.startswith(f".y.json.{owner_tag()}.") and tmp.name.endswith(".tmp")


def test_stale_temporaries_of_dead_writers_are_removed(tmp_path, make_small):
    host = owner_tag().split("@")[1]
    dead, alive = dead_pid(), os.getppid()
    stale = [tmp_path / f".spill-{dead}@{host}-abc123", tmp_path / f".x.safetensors.{dead}@{host}.k2j3.tmp"]
    kept = [tmp_path / f".spill-{alive}@{host}-abc123", tmp_path / f".x.safetensors.{dead}@otherhost.k2j3.tmp",
            tmp_path / ".spill-legacy", tmp_path / f".notes.{dead}@{host}.txt"]
    for p in stale + kept:
        p.mkdir() if "spill" in p.name else p.write_bytes(b"x")
    (stale[0] / "0.input.pos.npy").write_bytes(b"x")
    save_dataset(tmp_path / "x.safetensors", make_small(ALGORITHMS.names()[0]))
    assert not any(p.exists() for p in stale)
    assert all(p.exists() for p in kept)
    assert remove_stale_temporaries(tmp_path / "missing") == []


def _interrupt_once_made(monkeypatch, directory: Path) -> list[Path]:
    """os.mkdir and os.open raise KeyboardInterrupt just after they made the first temporary in `directory`:
    the moment a signal lands between the making and the code that removes it. Returns what they made."""
    made = []

    def then_interrupt(real):
        def call(path, *args, **kwargs):
            out = real(path, *args, **kwargs)
            if not made and Path(path).parent == directory and Path(path).name.startswith("."):
                made.append(Path(path))
                raise KeyboardInterrupt
            return out
        return call

    monkeypatch.setattr(os, "mkdir", then_interrupt(os.mkdir))
    monkeypatch.setattr(os, "open", then_interrupt(os.open))
    return made


def _write_spilled(path: Path) -> None:
    name = ALGORITHMS.names()[0]
    write_dataset(path, iter_chunks(name, 5, 2, 1, chunk=1), split_meta(name, "custom", 5, 2, 1))


def _write_atomically(path: Path) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text("{}")


@pytest.mark.parametrize("write", [_write_spilled, _write_atomically,
                                   lambda path: owned_temporary(path.parent, ".x.", ".tmp").__enter__(),
                                   lambda path: owned_temporary(path.parent, ".x.", ".tmp", True).__enter__()],
                         ids=["spill", "atomic_path", "owned_file", "owned_directory"])
def test_an_interrupt_right_after_a_temporary_is_made_leaves_nothing(tmp_path, monkeypatch, write):
    made = _interrupt_once_made(monkeypatch, tmp_path)
    with pytest.raises(KeyboardInterrupt):
        write(tmp_path / "x.safetensors")
    monkeypatch.undo()
    assert made and list(tmp_path.iterdir()) == []


def test_every_temporary_is_made_by_owned_temporary():
    """tempfile's makers return the name only after making it: an interrupt in between leaks it (above)."""
    makers = {"mkdtemp", "mkstemp", "mktemp", "TemporaryDirectory", "NamedTemporaryFile"}
    package = Path(__file__).resolve().parents[2] / "relreason"
    calls = [f"{f.relative_to(package.parent)}:{node.lineno}" for f in sorted(package.rglob("*.py"))
             for node in ast.walk(ast.parse(f.read_text())) if isinstance(node, ast.Attribute) and node.attr in makers]
    assert calls == []


@pytest.mark.parametrize("reader", [load_dataset, read_meta])
def test_unreadable_file_says_permission_denied_not_corrupt(tmp_path, reader, make_small, monkeypatch):
    path = save_dataset(tmp_path / "x.safetensors", make_small(ALGORITHMS.names()[0]))
    real_open = os.open

    def deny(file, *a, **k):
        if Path(file) == path:
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *a, **k)

    monkeypatch.setattr(os, "open", deny)  # as root no mode bit refuses a read
    with pytest.raises(RelreasonError, match="permission denied") as e:
        reader(path)
    assert "corrupt" not in str(e.value)


def test_a_directory_is_not_a_dataset(tmp_path):
    with pytest.raises(RelreasonError, match="is a directory"):
        load_dataset(tmp_path)


def test_a_full_disk_names_the_file_and_the_cause_and_leaves_nothing(tmp_path, monkeypatch):
    """numpy reports a short write as "256000 requested and 224224 written" (no errno, no file): the
    error says which dataset and that the disk is full, and no temporary is left behind."""
    name = ALGORITHMS.names()[0]

    def short_write(*args, **kwargs):
        raise OSError("256000 requested and 224224 written")

    monkeypatch.setattr(np, "save", short_write)
    path = tmp_path / "d" / "s.safetensors"
    with pytest.raises(RelreasonError) as e:
        write_dataset(path, iter_chunks(name, 6, 9, 1, chunk=4), split_meta(name, "custom", 6, 9, 1))
    assert e.value.message.startswith(f"cannot write {path}: 256000 requested and 224224 written (a short write")
    assert "disk is full" in e.value.hint
    assert list(path.parent.iterdir()) == []
