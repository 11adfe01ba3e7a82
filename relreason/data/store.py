"""Datasets on disk: one safetensors file per split, written by streaming and atomically.

Tensors are named `input.<feature>`, `hint.<feature>`, `output.<feature>` and `lengths` (see
`relreason.data.trajectory` for shapes and dtypes); the JSON metadata (algorithm, split, size,
seed, num, spec, spec hash, relreason version) sits in the safetensors header under
`__metadata__["relreason"]`.

The writer streams: chunks are spilled to a temporary directory as they are generated, then copied
into the final file tensor by tensor, so peak memory is one chunk, not the split. The file appears
under its final name only when complete (temp name + rename).
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from relreason.data.specs import spec_from_json
from relreason.data.trajectory import Dataset, pad_time
from relreason.errors import RelreasonError

_DTYPES = {np.dtype(np.float64): "F64", np.dtype(np.float32): "F32", np.dtype(np.int32): "I32",
           np.dtype(np.int64): "I64"}
_DTYPES_BACK = {v: k for k, v in _DTYPES.items()}


@contextmanager
def atomic_path(path: Path, suffix: str = "") -> Iterator[Path]:
    """Yields a temporary path beside `path`; renames it onto `path` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix + ".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_path, 0o666 & ~umask)  # mkstemp makes 0600; give the file the usual permissions
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_dataset(path: Path, chunks: Iterable[Dataset], meta: dict) -> Path:
    """Streams dataset chunks into one safetensors file at `path` (atomically). Returns `path`."""
    path = Path(path)
    with tempfile.TemporaryDirectory(prefix=".spill-", dir=path.parent if path.parent.exists() else None) as spill:
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


def _read_header(path: Path) -> dict:
    if not path.is_file():
        raise RelreasonError(f"dataset file {path} does not exist", "make one with `relreason generate ALGORITHM`")
    size = path.stat().st_size
    with open(path, "rb") as f:
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
    n = struct.unpack("<Q", open(path, "rb").read(8))[0]
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
