"""Datasets on disk: one safetensors file per split, written by streaming and atomically.

Tensors are named `input.<feature>`, `hint.<feature>`, `output.<feature>` and `lengths` (see
`relreason.data.trajectory` for shapes and dtypes); the JSON metadata (algorithm, split, size,
seed, num, spec, spec hash, relreason version) sits in the safetensors header under
`__metadata__["relreason"]`.

The writer streams: chunks are spilled to a temporary directory as they are generated, then copied
into the final file tensor by tensor, so peak memory is one chunk, not the split. The file appears
under its final name only when complete (temp name + rename), with the permissions the user's umask
gives new files. Temporary names carry the writer's pid and host (`.spill-<pid>@<host>-*`,
`.<name>.<pid>@<host>.*.tmp`): a writer killed outright (`kill -9`, power loss) cannot clean up, so
the next write into that directory removes the temporaries of writers that are no longer alive.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import socket
import struct
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from relreason.data.specs import spec_from_json
from relreason.data.trajectory import Dataset, pad_time
from relreason.errors import RelreasonError, write_error

_DTYPES = {np.dtype(np.float64): "F64", np.dtype(np.float32): "F32", np.dtype(np.int32): "I32",
           np.dtype(np.int64): "I64"}
_DTYPES_BACK = {v: k for k, v in _DTYPES.items()}


def current_umask() -> int:
    """The process umask (reading it means setting it; it is put back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname().split(".")[0]) or "host"


def owner_tag() -> str:
    """`<pid>@<host>`: written into temporary names so that a later writer can tell a dead one's leftovers."""
    return f"{os.getpid()}@{_host()}"


# `.spill-<pid>@<host>-<random>` directories and `.<name>.<pid>@<host>.<random>.tmp` files
_TEMPORARY = re.compile(r"^\.(?:spill-|.+\.)(\d+)@([A-Za-z0-9_-]+)[.-][^/]*$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def remove_stale_temporaries(directory: Path) -> list[Path]:
    """Removes the temporaries (see the module docstring) that dead processes of this host left in
    `directory`; those of live processes and of other hosts are kept. Returns what was removed."""
    removed = []
    try:
        entries = list(Path(directory).iterdir())
    except OSError:
        return removed
    host = _host()
    for p in entries:
        m = _TEMPORARY.match(p.name)
        if not m or not (p.name.startswith(".spill-") or p.name.endswith(".tmp")):
            continue
        if m.group(2) != host or int(m.group(1)) == os.getpid() or _alive(int(m.group(1))):
            continue
        try:
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
            removed.append(p)
        except OSError:
            pass  # another process got there first, or we may not: not ours to insist
    return removed


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yields a temporary path beside `path`; renames it onto `path` only if the block succeeds.

    The file gets the permissions of a normally created file (0666 minus the umask)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{owner_tag()}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, 0o666 & ~current_umask())  # mkstemp makes 0600
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_dataset(path: Path, chunks: Iterable[Dataset], meta: dict) -> Path:
    """Streams dataset chunks into one safetensors file at `path` (atomically). Returns `path`.

    Stale temporaries of dead writers in the target directory are removed first.

    Raises:
        RelreasonError: the file could not be written (a full disk: the path and the cause); nothing
            of it is left behind."""
    path = Path(path)
    try:
        return _write_dataset(path, chunks, meta)
    except OSError as e:
        raise write_error(path, e) from None


def _write_dataset(path: Path, chunks: Iterable[Dataset], meta: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path.parent)
    with tempfile.TemporaryDirectory(prefix=f".spill-{owner_tag()}-", dir=path.parent) as spill:
        shapes: dict[str, tuple] = {}
        dtypes: dict[str, np.dtype] = {}
        files: list[dict[str, str]] = []
        tmax, total = 1, 0
        for c, chunk in enumerate(chunks):
            entry = {}
            for name, arr in chunk.arrays().items():
                f = os.path.join(spill, f"{c}.{name}.npy")
                np.save(f, np.ascontiguousarray(arr))
                entry[name] = f
                shapes[name], dtypes[name] = arr.shape[1:], arr.dtype
            files.append(entry)
            tmax = max(tmax, chunk.max_length)
            total += len(chunk)
        full = {name: (total, tmax) + s[1:] if name.startswith("hint.") else (total,) + s
                for name, s in shapes.items()}
        header, offset = {}, 0
        for name in sorted(full):
            nbytes = int(np.prod(full[name])) * dtypes[name].itemsize
            header[name] = {"dtype": _DTYPES[dtypes[name]], "shape": list(full[name]),
                            "data_offsets": [offset, offset + nbytes]}
            offset += nbytes
        header["__metadata__"] = {"relreason": json.dumps(meta)}  # key order kept: spec order
        blob = json.dumps(header, separators=(",", ":")).encode()
        blob += b" " * (-len(blob) % 8)
        with atomic_path(path) as tmp, open(tmp, "wb") as out:
            out.write(struct.pack("<Q", len(blob)))
            out.write(blob)
            for name in sorted(full):
                for entry in files:
                    arr = np.load(entry[name], mmap_mode="r")
                    if name.startswith("hint."):
                        arr = pad_time(np.asarray(arr), tmax)
                    out.write(np.ascontiguousarray(arr).tobytes())
    return path


def save_dataset(path: Path, ds: Dataset) -> Path:
    """Writes an in-memory dataset (atomically)."""
    return write_dataset(path, [ds], ds.meta)


def read_meta(path: Path) -> dict:
    """Reads only the relreason metadata of a dataset file."""
    header = _read_header(Path(path))
    try:
        return json.loads(header["__metadata__"]["relreason"])
    except (KeyError, TypeError, json.JSONDecodeError):
        raise RelreasonError(f"{path} is a safetensors file but not a relreason dataset",
                             "make one with `relreason generate`") from None


def _open_dataset(path: Path):
    """Opens a dataset file for reading; a missing file, a directory or a permission problem is a
    RelreasonError that says which (never "corrupt")."""
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise RelreasonError(f"dataset file {path} does not exist",
                             "make one with `relreason generate ALGORITHM`") from None
    except IsADirectoryError:
        raise RelreasonError(f"{path} is a directory, not a dataset file",
                             f"give a file inside it, e.g. {path}/test.safetensors") from None
    except PermissionError:
        raise RelreasonError(f"cannot read {path}: permission denied",
                             "check the permissions of the file and its directories (ls -l)") from None
    except OSError as e:
        if e.errno == errno.ENOTDIR:
            raise RelreasonError(f"{path} does not exist (a part of the path is a file, not a directory)",
                                 "check the path") from None
        raise


def _read_header(path: Path) -> dict:
    with _open_dataset(path) as f:
        size = os.fstat(f.fileno()).st_size
        raw = f.read(8)
        if len(raw) < 8:
            raise RelreasonError(f"{path} is not a safetensors file (too short)", "regenerate it with --force")
        (n,) = struct.unpack("<Q", raw)
        if n > min(size - 8, 100_000_000):
            raise RelreasonError(f"{path} is corrupt or truncated (bad header length)", "regenerate it with --force")
        try:
            header = json.loads(f.read(n))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise RelreasonError(f"{path} is corrupt (unreadable header)", "regenerate it with --force") from None
    end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
    if 8 + n + end != size:
        raise RelreasonError(f"{path} is truncated or corrupt ({size} bytes, header promises {8 + n + end})",
                             "regenerate it with --force")
    return header


def load_dataset(path: Path) -> Dataset:
    """Loads a dataset file written by `write_dataset`; arrays come back identical."""
    path = Path(path)
    header = _read_header(path)
    meta = read_meta(path)
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    arrays = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        try:
            arrays[name] = np.frombuffer(data[lo:hi], dtype=_DTYPES_BACK[info["dtype"]]).reshape(info["shape"]).copy()
        except (KeyError, ValueError):
            raise RelreasonError(f"{path} is corrupt (tensor {name})", "regenerate it with --force") from None
    spec = spec_from_json(meta["spec"])
    pick = lambda prefix: {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}  # noqa: E731
    if "lengths" not in arrays:
        raise RelreasonError(f"{path} is not a relreason dataset (no lengths)", "regenerate it with --force")
    sizes = arrays["sizes"].astype(np.int64) if "sizes" in arrays else None
    return Dataset(meta["algorithm"], spec, pick("input."), pick("hint."), pick("output."),
                   arrays["lengths"].astype(np.int64), meta, sizes)


def fingerprint(arrays: dict[str, np.ndarray]) -> str:
    """A digest of a dataset's values, independent of storage dtype (values compared as float64).

    Used to check our canonical splits against digests computed once from the reference sampler.
    """
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(np.asarray(arrays[name], dtype=np.float64))
        h.update(name.encode())
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:20]
