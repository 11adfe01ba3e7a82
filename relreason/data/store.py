"""Datasets on disk: one safetensors file per split, written by streaming and atomically.

Tensors are named `input.<feature>`, `hint.<feature>`, `output.<feature>` and `lengths` (see
`relreason.data.trajectory` for shapes and dtypes); the JSON metadata (algorithm, split, size,
seed, num, spec, spec hash, relreason version) sits in the safetensors header under
`__metadata__["relreason"]`.

The writer streams: chunks are spilled to a temporary directory as they are generated, then copied
into the final file tensor by tensor, so peak memory is one chunk, not the split. The file appears
under its final name only when complete (temp name + rename), with the permissions the user's umask
gives new files. Temporary names carry the writer's pid and host (`.spill-<pid>@<host>.*`,
`.<name>.<pid>@<host>.*.tmp`): a writer killed outright (`kill -9`, power loss) cannot clean up, so
the next write into that directory removes the temporaries of writers that are no longer alive.

Every temporary relreason makes is made by `owned_temporary`, which names it before making it: an
interrupt (Ctrl-C, SIGTERM) that lands between the making and the code that would remove it cannot
leave it behind, as one landing inside `tempfile.mkdtemp` or `TemporaryDirectory()` could.
"""

from __future__ import annotations

import hashlib
import json
import math
import mmap
import os
import re
import secrets
import shutil
import socket
import struct
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from relreason.data.specs import spec_from_json
from relreason.data.trajectory import Dataset, pad_time
from relreason.errors import RelreasonError, write_error
from relreason.files import SafetensorsLayout, open_regular, parse_json, safetensors_layout

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


# `.spill-<pid>@<host>.<random>` directories and `.<name>.<pid>@<host>.<random>.tmp` files and directories
# (`.spill-<pid>@<host>-<random>`: the spill directories of earlier versions)
_TEMPORARY = re.compile(r"^\.(?:spill-|.+\.)(\d+)@([A-Za-z0-9_-]+)[.-][^/]*$")


@contextmanager
def owned_temporary(parent: Path, prefix: str, suffix: str = "", directory: bool = False) -> Iterator[Path]:
    """A new, empty temporary file (mode 0600) or directory (0700) in `parent`, named
    `<prefix><pid>@<host>.<random><suffix>` (the module docstring), removed when the block ends if it is
    still there (renamed away, it is not).

    Its name is chosen before it is made and the removal covers the making, so an interrupt landing
    anywhere (even between the making and the block) leaves nothing. Names that
    `remove_stale_temporaries` recognises start with `.spill-` or end in `.tmp`. A name already taken (64
    random bits beside this process's pid: only a dead process of the same pid could have left it) fails the
    making with FileExistsError, and that leftover is removed."""
    path = Path(parent) / f"{prefix}{owner_tag()}.{secrets.token_hex(8)}{suffix}"
    try:
        if directory:
            os.mkdir(path, 0o700)
        else:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        yield path
    finally:
        _remove_temporary(path)


def _remove_temporary(path: Path) -> None:
    """Removes a temporary file or folder (a link is unlinked, never followed); what cannot be removed (gone
    already, another owner's, a read-only place) is left without an error."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        try:
            path.unlink()
        except OSError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def remove_stale_temporaries(directory: Path, prefix: str = "") -> list[Path]:
    """Removes the temporaries (see the module docstring) that dead processes of this host left in
    `directory`, those whose names start with `prefix` only (in a directory other programs share); those of
    live processes and of other hosts are kept. Returns what was removed."""
    removed = []
    try:
        entries = list(Path(directory).iterdir())
    except OSError:
        return removed
    host = _host()
    for p in entries:
        m = _TEMPORARY.match(p.name)
        if not m or not p.name.startswith(prefix) or not (p.name.startswith(".spill-") or p.name.endswith(".tmp")):
            continue
        if m.group(2) != host or int(m.group(1)) == os.getpid() or _alive(int(m.group(1))):
            continue
        _remove_temporary(p)  # another process may get there first, or we may not: not ours to insist
        if not os.path.lexists(p):
            removed.append(p)
    return removed


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yields a temporary path beside `path`; renames it onto `path` only if the block succeeds.

    The file gets the permissions of a normally created file (0666 minus the umask)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with owned_temporary(path.parent, f".{path.name}.", ".tmp") as tmp_path:
        yield tmp_path
        os.chmod(tmp_path, 0o666 & ~current_umask())  # made 0600
        os.replace(tmp_path, path)


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
    with owned_temporary(path.parent, ".spill-", directory=True) as spill:
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


REGENERATE = "regenerate it with --force (relreason generate ... --force)"


def read_meta(path: Path) -> dict:
    """Reads only the relreason metadata of a dataset file (its header checked whole first)."""
    path = Path(path)
    fd = _open_dataset(path)
    try:
        return _meta_of(_layout(fd, path), path)
    finally:
        os.close(fd)


def _open_dataset(path: Path) -> int:
    """A read-only descriptor of the dataset file `path` (relreason.files.open_regular: a FIFO never blocks, a
    directory, device or socket is refused by what it is); a missing file says how to make one."""
    if not os.path.lexists(path) or (os.path.islink(path) and not os.path.exists(path)):
        raise RelreasonError(f"dataset file {path} does not exist", "make one with `relreason generate ALGORITHM`")
    return open_regular(path, follow=True, hint=REGENERATE)


def _layout(fd: int, path: Path) -> SafetensorsLayout:
    """The dataset file's safetensors layout, checked whole (relreason.files.safetensors_layout), with the
    dtypes relreason writes only."""
    layout = safetensors_layout(fd, path, REGENERATE)
    odd = [f"{name} ({dtype})" for name, (dtype, _, _) in layout.tensors.items() if dtype not in _DTYPES_BACK]
    if odd:
        raise RelreasonError(f"{path} is not a relreason dataset: tensor {odd[0]} has a dtype relreason never writes",
                             REGENERATE)
    return layout


def _meta_of(layout: SafetensorsLayout, path: Path) -> dict:
    """The relreason metadata of a dataset's header (read by the JSON guard), with the keys a reader needs."""
    text = layout.metadata.get("relreason")
    meta = parse_json(text, path, REGENERATE) if text is not None else None
    if not isinstance(meta, dict) or not isinstance(meta.get("algorithm"), str) or not isinstance(meta.get("spec"),
                                                                                                 (dict, list)):
        raise RelreasonError(f"{path} is a safetensors file but not a relreason dataset",
                             "make one with `relreason generate`")
    return meta


def load_dataset(path: Path) -> Dataset:
    """Loads a dataset file written by `write_dataset`; arrays come back identical. The header is checked whole
    and the arrays are read from the same open file (what was checked is what is read); arrays that do not
    describe one dataset (sample counts, hint steps) are refused in one line."""
    path = Path(path)
    fd = _open_dataset(path)
    try:
        layout = _layout(fd, path)
        meta = _meta_of(layout, path)
        with mmap.mmap(fd, os.fstat(fd).st_size, access=mmap.ACCESS_READ) as data:
            arrays = {name: np.frombuffer(data, _DTYPES_BACK[dtype], math.prod(shape), layout.data_start + lo)
                      .reshape(shape).copy() for name, (dtype, shape, (lo, _)) in layout.tensors.items()}
    finally:
        os.close(fd)
    try:
        spec = spec_from_json(meta["spec"])
    except (KeyError, TypeError, ValueError, AttributeError):
        raise RelreasonError(f"{path} is not a relreason dataset (its spec does not read)", REGENERATE) from None
    pick = lambda prefix: {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}  # noqa: E731
    _check_arrays(arrays, path)
    sizes = arrays["sizes"].astype(np.int64) if "sizes" in arrays else None
    return Dataset(meta["algorithm"], spec, pick("input."), pick("hint."), pick("output."),
                   arrays["lengths"].astype(np.int64), meta, sizes)


def _check_arrays(arrays: dict[str, np.ndarray], path: Path) -> None:
    """One dataset's arrays: `lengths` (num,) of hint steps >= 1, every other array num samples first, and the
    hints as many steps as the longest trajectory at least."""
    lengths = arrays.get("lengths")
    if lengths is None or lengths.ndim != 1:
        raise RelreasonError(f"{path} is not a relreason dataset (no lengths vector)", REGENERATE)
    num = len(lengths)
    if num and (lengths.min() < 1 or not np.all(np.isfinite(lengths))):
        raise RelreasonError(f"{path} is corrupt: its lengths must be whole step counts >= 1", REGENERATE)
    for name, a in arrays.items():
        if a.ndim == 0 or a.shape[0] != num:
            raise RelreasonError(f"{path} is corrupt: {name} holds {a.shape[0] if a.ndim else 0} samples, "
                                 f"lengths {num}", REGENERATE)
        if name.startswith("hint.") and num and (a.ndim < 2 or a.shape[1] < lengths.max()):
            raise RelreasonError(f"{path} is corrupt: {name} has fewer steps than its longest trajectory", REGENERATE)


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
