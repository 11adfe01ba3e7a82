"""Reading back a file that relreason wrote, or that someone says it wrote: the one guarded way.

Run directories, hub folders and bundles are exchanged between people, so every file relreason reads
back (a run's config.json, metrics.jsonl, results.json, .lock, checkpoints, recipes, result files,
`score` input) is untrusted input. Each reader goes through this module, which closes the classes of
breakage rather than the cases:

- what is not a regular file is refused before anything is read, and nothing blocks: the file is
  opened with O_NONBLOCK (a FIFO opens at once) and O_NOFOLLOW (a link inside a run is refused),
  then checked with fstat on the descriptor that is read, so no other file can be swapped in;
- a file relreason will write in place (the run's `.lock`, the appended metrics.jsonl) is refused
  when it has another name elsewhere (a hard link): writing it would change a file outside the run
  (`open_for_update`, also an `opener` for open());
- sizes are bounded before reading, and JSON is bounded in nesting depth and integer length before
  Python's own limits (RecursionError, the 4,300-digit int limit) can surface as "unexpected";
- safetensors headers are parsed by the same JSON guard and checked whole (dtypes, shapes, offsets,
  the file's length) before a loader maps the file;
- names and text shown from a file cannot forge output: control characters are refused in a name
  and escaped (with rich markup) in anything printed.

Every failure is one RelreasonError line naming the file and what was wrong:

    data = read_json_object(run / "config.json")        # dict, or RelreasonError
    text = read_text(recipe, 1 << 20, follow=True)      # a path the user named: a link is followed
    fd = open_for_update(run / ".lock")                 # regular, one name, not a link

It stands in the core layer (imports nothing of relreason but errors) so that every layer may use it.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

from rich.markup import escape as rich_escape

from relreason.errors import RelreasonError

MAX_JSON_BYTES = 64 << 20  # a run's config.json or results.json is a few KiB; a checkpoint's header likewise
MAX_JSONL_BYTES = 1 << 30  # metrics.jsonl: ~1 KiB per validation, a million validations fit
MAX_LINE_BYTES = 16 << 20  # one JSONL line (a text answer of the largest size fits many times)
MAX_DEPTH = 64  # JSON nesting: our files nest 6 deep at most; Python's parser recurses ~1,000 deep
MAX_INT_DIGITS = 40  # JSON integers: counts and seeds fit in 20 digits; Python refuses 4,300 with a ValueError
MAX_SAFETENSORS_HEADER = 100 << 20  # safetensors' own limit on its JSON header
HINT = "the file is damaged or was not written by relreason; restore it, or train the run again"


# -- opening ---------------------------------------------------------------------------------------

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISLNK, "a symbolic link"))


def kind_of(mode: int) -> str:
    """What a file of st_mode `mode` is, in words ("a regular file", "a named pipe (FIFO)", ...)."""
    return next((name for test, name in _KINDS if test(mode)), "a regular file" if stat.S_ISREG(mode)
                else "a special file")


def link_error(path: Path) -> RelreasonError:
    """The error of a symbolic link found where relreason keeps its own file."""
    try:
        target = f" (to {os.readlink(path)})"
    except OSError:
        target = ""
    return RelreasonError(f"{path} is a symbolic link{target}; relreason follows no link inside a run directory",
                          "remove the link (its target stays as it is), or put the real file in its place")


def _open_error(path: Path, e: OSError, hint: Optional[str]) -> RelreasonError:
    if e.errno in (errno.ENOENT, errno.ENOTDIR):
        return RelreasonError(f"{path} does not exist", hint or "check the path")
    if e.errno == errno.ELOOP:
        return link_error(path)
    if e.errno == errno.EACCES:
        return RelreasonError(f"cannot read {path}: permission denied", "check its permissions (ls -l)")
    return RelreasonError(f"cannot read {path}: {e.strerror or e}", hint or "check the path and its permissions")


def not_regular(path: Path, mode: int, hint: Optional[str] = None) -> RelreasonError:
    """The error of `path` being a FIFO, a directory, a device...: not the regular file expected."""
    return RelreasonError(f"{path} is {kind_of(mode)}, not a regular file", hint or HINT)


def open_regular(path, follow: bool = False, hint: Optional[str] = None, streams: bool = False) -> int:
    """A read-only descriptor of the regular file `path` (the caller closes it). Never blocks: a FIFO
    opens at once (O_NONBLOCK) and is refused after fstat, as is anything else not a regular file;
    `follow=False` refuses a symbolic link (a file inside a run), `follow=True` follows one (a path
    the user named). `streams=True` accepts a pipe or a terminal too (read once, to its end; a named
    pipe is opened again blocking, to wait for its writer; "-" is standard input). Raises RelreasonError
    naming the file."""
    if streams and str(path) == "-":  # standard input
        return os.dup(sys.stdin.fileno())
    path = Path(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise _open_error(path, e, hint) from None
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode) or (streams and stat.S_ISCHR(mode)):
        os.set_blocking(fd, True)
        return fd
    os.close(fd)
    if streams and stat.S_ISFIFO(mode):  # a pipe the user named: wait for its writer, as `cat` does
        try:
            fd = os.open(path, flags & ~os.O_NONBLOCK)
        except OSError as e:
            raise _open_error(path, e, hint) from None
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            return fd
        os.close(fd)
        raise RelreasonError(f"{path} changed while it was opened", hint or "check the path")
    raise not_regular(path, mode, hint)


def open_for_update(path, flags: int = os.O_RDWR | os.O_CREAT, mode: int = 0o666) -> int:
    """A descriptor of the run's own file `path` that relreason writes in place (truncates, appends):
    refused unless it is a regular file with no other name (a hard link would let the write reach a
    file outside the run) and no symbolic link. Never blocks (a FIFO there is refused)."""
    path = Path(path)
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), mode)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise link_error(path) from None
        try:  # a directory (EISDIR), a FIFO without a reader (ENXIO)...: say what is there
            mode = os.lstat(path).st_mode
        except OSError:
            raise e from None
        if not stat.S_ISREG(mode):
            raise not_regular(path, mode, "remove it: relreason makes the file itself") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise not_regular(path, st.st_mode, "remove it: relreason makes the file itself")
    if st.st_nlink > 1:
        os.close(fd)
        raise RelreasonError(f"{path} is a hard link ({st.st_nlink} names): writing it would change a file outside "
                             "the run", "remove it (the other names keep the file): relreason makes its own")
    os.set_blocking(fd, True)
    return fd


# -- reading ---------------------------------------------------------------------------------------

def _size_error(path: Path, size: int, limit: int, hint: Optional[str]) -> RelreasonError:
    return RelreasonError(f"{path} is {_bytes(size)}, more than the {_bytes(limit)} such a file may hold",
                          hint or HINT)


def _bytes(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} bytes"


def read_fd(fd: int, path: Path, limit: int, hint: Optional[str] = None) -> bytes:
    """At most `limit` bytes of the open descriptor `fd` (closed here), read to its end; RelreasonError
    naming `path` when there are more, checked by fstat first for a regular file."""
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and st.st_size > limit:
            raise _size_error(path, st.st_size, limit, hint)
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise _size_error(path, total, limit, hint)
    except OSError as e:
        raise RelreasonError(f"cannot read {path}: {e.strerror or e}", hint or HINT) from None
    finally:
        os.close(fd)
    return b"".join(chunks)


def read_bytes(path, limit: int, follow: bool = False, hint: Optional[str] = None, streams: bool = False) -> bytes:
    """The bytes of the regular file `path` (open_regular), at most `limit` of them (RelreasonError)."""
    return read_fd(open_regular(path, follow, hint, streams), Path(path), limit, hint)


def decode(data: bytes, path, hint: Optional[str] = None) -> str:
    """`data` as UTF-8 text; RelreasonError naming `path` (and the byte) when it is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RelreasonError(f"{path} is not UTF-8 text (byte {e.start + 1})", hint or HINT) from None


def read_text(path, limit: int, follow: bool = False, hint: Optional[str] = None, streams: bool = False) -> str:
    """The UTF-8 text of the regular file `path`, at most `limit` bytes (RelreasonError naming it)."""
    return decode(read_bytes(path, limit, follow, hint, streams), path, hint)


# -- JSON ------------------------------------------------------------------------------------------

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_OPENERS = re.compile(r"[\[{]")
_BRACKETS = re.compile(r"[\[\]{}]")


def json_depth(text: str) -> int:
    """How deep the arrays and objects of the JSON `text` nest (strings skipped), in linear time and
    without recursion, so that a hostile depth is refused before a parser recurses into it."""
    bare = _STRINGS.sub("", text)
    if not _OPENERS.search(bare):
        return 0
    depth = deepest = 0
    for bracket in _BRACKETS.findall(bare):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _IntTooLong(len(text.lstrip("-")))
    return int(text)


class _IntTooLong(ValueError):
    def __init__(self, digits: int):
        super().__init__(digits)
        self.digits = digits


def parse_json(text: str, path, hint: Optional[str] = None, constants: bool = False) -> Any:
    """The JSON value of `text` (read from `path`), bounded before parsing: at most MAX_DEPTH deep and
    integers of at most MAX_INT_DIGITS digits. `constants`: accept NaN and Infinity (metrics.jsonl's
    losses), which JSON itself does not have. RelreasonError (one line naming `path`) for text that
    is not such JSON."""
    hint = hint or HINT
    depth = json_depth(text)
    if depth > MAX_DEPTH:
        raise RelreasonError(f"{path} nests {depth} levels deep, more than the {MAX_DEPTH} a relreason file may",
                             hint)
    try:
        return json.loads(text, parse_int=_bounded_int, parse_constant=None if constants else _no_constant)
    except _IntTooLong as e:
        raise RelreasonError(f"{path} holds an integer of {e.digits} digits, more than the {MAX_INT_DIGITS} "
                             "a relreason file may", hint) from None
    except _Constant as e:
        raise RelreasonError(f"{path} holds {e.args[0]}, which is not a JSON number", hint) from None
    except json.JSONDecodeError as e:
        raise RelreasonError(f"{path} is corrupt: not valid JSON (cut by a kill, or edited; line {e.lineno})",
                             hint) from None
    except (RecursionError, ValueError) as e:  # the depth is bounded above: a last line of defence
        raise RelreasonError(f"{path} is corrupt: {type(e).__name__}", hint) from None


class _Constant(ValueError):
    pass


def _no_constant(name: str):
    raise _Constant(name)


def read_json(path, limit: int = MAX_JSON_BYTES, follow: bool = False, hint: Optional[str] = None) -> Any:
    """The JSON value of the regular file `path` (open_regular, read_text, parse_json)."""
    return parse_json(read_text(path, limit, follow, hint), path, hint)


def read_json_object(path, hint: Optional[str] = None, follow: bool = False, limit: int = MAX_JSON_BYTES) -> dict:
    """The JSON object of the regular file `path`; RelreasonError (one line) when it is missing, not a
    regular file, too large, not JSON (a cut file), hostile (too deep, a huge integer) or not an object."""
    data = read_json(path, limit, follow, hint)
    if not isinstance(data, dict):
        raise RelreasonError(f"{path} holds {shown(data)}, not a JSON object", hint or HINT)
    return data


def maybe_json_object(path) -> Optional[dict]:
    """The JSON object of `path`, or None when it is missing, unreadable, not a regular file, hostile or
    not an object: for deciding what a folder is, where a damaged file is reported by its own reader."""
    try:
        data = read_json(path)
    except RelreasonError:
        return None
    return data if isinstance(data, dict) else None


def jsonl_lines(path, limit: int = MAX_JSONL_BYTES, hint: Optional[str] = None, follow: bool = False,
                streams: bool = False, strict: bool = False) -> Iterator[tuple[int, str]]:
    """(line number, text) of every line of the JSONL file `path` (a stream too, with `streams`), each
    at most MAX_LINE_BYTES and the whole at most `limit`; a line that is not UTF-8 is a RelreasonError
    with `strict`, else returned with its bad bytes replaced, for the caller to report as damaged."""
    fd = open_regular(path, follow, hint, streams)
    try:
        with os.fdopen(fd, "rb", closefd=True) as f:
            fd = None
            if os.fstat(f.fileno()).st_size > limit:
                raise _size_error(Path(path), os.fstat(f.fileno()).st_size, limit, hint)
            total = 0
            for i, raw in enumerate(iter(lambda: f.readline(MAX_LINE_BYTES + 1), b""), 1):
                total += len(raw)
                if len(raw) > MAX_LINE_BYTES:
                    raise RelreasonError(f"{path}:{i} is longer than {_bytes(MAX_LINE_BYTES)}", hint or HINT)
                if total > limit:
                    raise _size_error(Path(path), total, limit, hint)
                yield i, decode(raw, f"{path}:{i}", hint) if strict else raw.decode("utf-8", errors="replace")
    except OSError as e:
        raise RelreasonError(f"cannot read {path}: {e.strerror or e}", hint or HINT) from None
    finally:
        if fd is not None:
            os.close(fd)


def shown(value) -> str:
    """A value as JSON, cut to 40 characters, for an error message."""
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


# -- safetensors -----------------------------------------------------------------------------------

DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
               "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}


@dataclass(frozen=True)
class SafetensorsLayout:
    """A safetensors header checked whole (`safetensors_layout`): where the data starts, and each tensor's dtype,
    shape and byte span within the data."""

    data_start: int  # 8 + the header's length
    tensors: dict[str, tuple[str, tuple[int, ...], tuple[int, int]]]  # name -> (dtype, shape, (begin, end))
    metadata: dict[str, str]  # the header's __metadata__ ({} when none)


def safetensors_header(fd: int, path, hint: Optional[str] = None) -> dict[str, tuple[str, tuple[int, ...]]]:
    """{tensor: (dtype, shape)} of the safetensors file open at `fd` (not closed): `safetensors_layout`."""
    return {name: (dtype, shape) for name, (dtype, shape, _) in safetensors_layout(fd, path, hint).tensors.items()}


def safetensors_layout(fd: int, path, hint: Optional[str] = None) -> SafetensorsLayout:
    """The layout of the safetensors file open at `fd` (not closed), its header read by the JSON guard and
    checked whole before any loader maps the file: known dtypes, non-negative shapes, offsets that tile the
    data exactly, and the file's length. RelreasonError naming `path`."""
    hint = hint or HINT
    size = os.fstat(fd).st_size
    head = os.pread(fd, 8, 0)
    if len(head) < 8:
        raise RelreasonError(f"{path} is corrupt: not a safetensors file (too short)", hint)
    n = int.from_bytes(head, "little")
    if n > MAX_SAFETENSORS_HEADER or 8 + n > size:
        raise RelreasonError(f"{path} is corrupt: its header says {n} bytes, the file has {size}",
                             hint)
    header = parse_json(decode(os.pread(fd, n, 8), path, hint), path, hint)
    if not isinstance(header, dict):
        raise RelreasonError(f"{path} is corrupt: its header is not a JSON object", hint)
    out, spans, metadata = {}, [], {}
    for name, entry in header.items():
        if name == "__metadata__":
            if not isinstance(entry, dict) or not all(isinstance(v, str) for v in entry.values()):
                raise RelreasonError(f"{path} is corrupt: __metadata__ must map names to strings", hint)
            metadata = entry
            continue
        where = f"{path} is corrupt: tensor {name!r}"
        if not isinstance(entry, dict) or entry.get("dtype") not in DTYPE_BYTES:
            raise RelreasonError(f"{where} has no known dtype ({shown(entry)[:30]})", hint)
        shape, offsets = entry.get("shape"), entry.get("data_offsets")
        if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
            raise RelreasonError(f"{where}: shape {shown(shape)} is not a list of sizes", hint)
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)
                and 0 <= offsets[0] <= offsets[1]):
            raise RelreasonError(f"{where}: data_offsets {shown(offsets)} are not [begin, end]", hint)
        if offsets[1] - offsets[0] != math.prod(shape) * DTYPE_BYTES[entry["dtype"]]:
            raise RelreasonError(f"{where}: {offsets[1] - offsets[0]} bytes do not hold a {entry['dtype']} "
                                 f"tensor of shape {shape}", hint)
        out[name] = (entry["dtype"], tuple(shape), (offsets[0], offsets[1]))
        spans.append(tuple(offsets))
    end = 0
    for begin, stop in sorted(spans):
        if begin != end:
            raise RelreasonError(f"{path} is corrupt: its tensors' data overlap or leave gaps (at byte {begin})", hint)
        end = stop
    if 8 + n + end != size:
        raise RelreasonError(f"{path} is corrupt: {size} bytes, its header describes {8 + n + end} (cut, or extended)", hint)
    return SafetensorsLayout(8 + n, out, metadata)


def fd_path(fd: int, path) -> str:
    """A path that opens the very file `fd` holds open (Linux's /proc/self/fd), so that a loader taking
    a path reads the file that was checked; `path` itself where there is no such folder."""
    proc = f"/proc/self/fd/{fd}"
    return proc if os.path.exists(proc) else str(path)


# -- names and printed text ------------------------------------------------------------------------

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def check_name(name: str, what: str = "name") -> None:
    """Refuses a name holding a control character (a newline would forge a row of `relreason runs`, an
    ANSI escape would reach the terminal raw, a bidirectional mark would reorder what is shown)."""
    bad = _CONTROL.search(name)
    if bad:
        raise RelreasonError(f"invalid {what} {escape(name)!r}: it holds the control character "
                             f"{ascii(bad.group())[1:-1]} at position {bad.start() + 1}",
                             "use letters, digits, '-', '_' and '.'")


def escape(text) -> str:
    """`text` safe to print: control characters as \\x.. / \\u.... escapes (no newline, no ANSI
    escape, no bidirectional mark reaches the terminal)."""
    return _CONTROL.sub(lambda m: ascii(m.group())[1:-1], str(text))


def escape_markup(text) -> str:
    """`text` safe to print through rich: escape() and rich's markup escaped ("[bold]" shows as is)."""
    return rich_escape(escape(text))


__all__ = ["MAX_JSON_BYTES", "MAX_JSONL_BYTES", "MAX_LINE_BYTES", "MAX_DEPTH", "MAX_INT_DIGITS", "HINT", "kind_of",
           "link_error", "not_regular", "open_regular", "open_for_update", "read_fd", "read_bytes",
           "decode", "read_text", "json_depth", "parse_json", "read_json", "read_json_object", "maybe_json_object",
           "jsonl_lines", "shown", "DTYPE_BYTES", "SafetensorsLayout", "safetensors_header", "safetensors_layout", "fd_path", "check_name", "escape",
           "escape_markup"]
