"""Process-level helpers shared by training, evaluation and the CLI: allocator settings, progress
bars, run-directory locks, memory figures."""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import hashlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import relreason
from relreason.errors import RelreasonError
from relreason.files import open_for_update, open_regular, parse_json
from relreason.rundir import LOCK


def cli_command() -> str | None:
    """The `relreason ...` command line this process runs (worker processes of `--jobs` inherit it), or
    None when relreason is not the program (a notebook, a test calling the core)."""
    prog = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if prog is None or not (prog.name == "relreason" or prog.parts[-2:] == ("relreason", "__main__.py")):
        return None

    return "relreason " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def keep_freed_memory() -> bool:
    """Asks glibc to keep freed memory for reuse instead of returning it to the OS.

    The training step allocates and frees many (B, N, N, H) buffers (4 MB at batch 32, n 16, H 128);
    by default glibc unmaps them and every new buffer page-faults again, which costs about as much
    as the arithmetic on it. Process-wide and glibc-only: returns False where unavailable."""
    name = ctypes.util.find_library("c")
    if not name or not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(name)
    m_trim_threshold, m_mmap_threshold = -1, -3  # mallopt parameter ids (malloc.h)
    return bool(libc.mallopt(m_mmap_threshold, 1 << 30)) and bool(libc.mallopt(m_trim_threshold, 1 << 31))


def bars_enabled() -> bool:
    """Progress bars only on a terminal (logs stay readable) and unless RELREASON_PROGRESS=0."""
    return os.environ.get("RELREASON_PROGRESS") != "0" and sys.stderr.isatty()


def progress(total: int | None, desc: str, unit: str = "it", disable: bool = False, **kwargs):
    """A tqdm progress bar on stderr; off when stderr is not a terminal or RELREASON_PROGRESS=0."""
    from tqdm import tqdm  # CLI start-up: tqdm loads on use

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=disable or not bars_enabled(),
                dynamic_ncols=True, leave=False, **kwargs)


@contextmanager
def terminate_as_interrupt():
    """SIGTERM (`kill`, a scheduler's stop) raises KeyboardInterrupt, as Ctrl-C does, so that the
    writers' cleanup runs (temporary files removed) before the process ends. Every command runs under it
    (relreason.cli.common.report_errors); training stops after its step instead
    (relreason.train.stop_requests). Main thread only (signal handlers can only be set there); the previous
    handler is put back. Only SIGTERM's default action (the process ends with no cleanup) is replaced: an ignored
    SIGTERM stays ignored, and a handler already installed keeps it, so that a dataset written while a run trains
    (a validation split made at its first validation) leaves a SIGTERM to the run's StopRequests (stop after the
    step, saving last/) rather than ending the training without saving, and a deadline's or a worker's handler
    still decides."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def available_memory() -> int:
    """Bytes of memory this process can still use (Linux MemAvailable, capped by a cgroup limit)."""
    avail = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
    except OSError:
        pass
    for limit_file, usage_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            raw = Path(limit_file).read_text().strip()
            if raw != "max" and int(raw) < (1 << 60):
                room = int(raw) - int(Path(usage_file).read_text().strip())
                avail = room if avail is None else min(avail, room)
            break
        except (OSError, ValueError):
            continue
    return avail if avail is not None else 4 << 30


class RunLock:
    """An exclusive lock on a run directory (`DIR/.lock`), held while one process trains in it.

    The lock is an OS file lock (flock), so it dies with its holder, even after `kill -9`: a stale
    lock is simply free. The file records the holder (pid, host, start time) for error messages and
    `relreason runs`. Use as a context manager or with acquire()/release()."""

    NAME = LOCK

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self.path = self.directory / self.NAME
        self._fd: int | None = None

    def acquire(self) -> "RunLock":
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            # never through a link, a hard link or a FIFO: truncating it would empty a file outside the run
            fd = open_for_update(self.path, mode=0o644)
        except OSError as e:
            raise RelreasonError(f"cannot lock {self.directory}: {e.strerror}", "choose a writable --out directory") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _read_holder(fd)
            os.close(fd)
            who = f"process {holder.get('pid', '?')} on {holder.get('host', '?')}" if holder else "another process"
            raise RelreasonError(f"{self.directory} is in use by {who}",
                                 "wait for it to finish, or use another --name / --out") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}).encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return

        os.ftruncate(self._fd, 0)  # the file stays (unlinking it would race with a waiting locker)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _read_holder(fd: int) -> dict:
    try:
        holder = parse_json(os.pread(fd, 4096, 0).decode("utf-8", errors="replace") or "{}", LOCK)
    except (OSError, RelreasonError):
        return {}
    return holder if isinstance(holder, dict) else {}


def lock_holder(directory: Path) -> dict | None:
    """The holder record of a run directory's lock if a live process holds it, else None."""
    path = Path(directory) / RunLock.NAME
    try:
        fd = open_regular(path)  # a FIFO there must not hang `relreason runs`
    except RelreasonError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        holder = _read_holder(fd)
        os.close(fd)
        return holder or {"pid": None, "host": None}
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
    return None


def hardware(device: str | None = None) -> str:
    """What a run computes on, in words: "Intel(R) Xeon(R) ... (2 cores), 1 torch thread, cpu" or
    "NVIDIA H100 80GB HBM3, cuda". Recorded by every training session (start and each resume), so a
    result says on what machines it was computed."""
    import torch  # CLI start-up: torch loads on use

    dev = str(device or "cpu")
    if dev.startswith("cuda") and torch.cuda.is_available():
        index = torch.device(dev).index or 0
        return f"{torch.cuda.get_device_name(index)}, {dev}, torch {torch.__version__}"
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = " ".join(line.split(":", 1)[1].split())
                break
    except OSError:
        import platform  # only where /proc/cpuinfo is missing

        cpu = platform.processor() or cpu
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threads = torch.get_num_threads()
    return (f"{cpu} ({cores} cores), {threads} torch thread{'s' * (threads != 1)}, cpu, {cpu_kernels()} kernels, "
            f"torch {torch.__version__}")


def cpu_kernels() -> str:
    """The vector instruction set torch's CPU kernels use here ("AVX2", "AVX512", "DEFAULT"; the environment's
    ATEN_CPU_CAPABILITY can lower it). Float sums, hence training trajectories, are bit-exact across machines
    only with the same kernels: 20 Triplet-GMPNN updates already end elsewhere under AVX2 and DEFAULT."""
    import torch  # CLI start-up: torch loads on use

    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except (AttributeError, RuntimeError):  # a torch without the query
        return "unknown"


KERNEL_LEVELS = ("DEFAULT", "AVX2", "AVX512")  # torch's x86 CPU kernel levels (cpu_kernels), lowest first
_MKL_LEVEL = {"DEFAULT": "SSE4_2", "AVX2": "AVX2", "AVX512": "AVX512"}  # MKL's instruction level beside each


def kernels_environment(level: str) -> dict[str, str] | None:
    """The environment variables under which a new process computes with `level` CPU kernels: torch's ATen
    kernels through ATEN_CPU_CAPABILITY (they round otherwise per level: scripts/cpu_kernels.py), and MKL's
    through MKL_ENABLE_INSTRUCTIONS, a precaution (lowering MKL alone changed no bit there). None where this
    process cannot go there: a level above its own (cpu_kernels), or not on KERNEL_LEVELS."""
    here = cpu_kernels()
    if level not in KERNEL_LEVELS or here not in KERNEL_LEVELS or KERNEL_LEVELS.index(level) > KERNEL_LEVELS.index(here):
        return None
    return {"ATEN_CPU_CAPABILITY": level.lower(), "MKL_ENABLE_INSTRUCTIONS": _MKL_LEVEL[level]}


def kernels_hint(level: str) -> str:
    """What would make a process compute with `level` CPU kernels, in words: the variables to set where this
    machine can (kernels_environment), else a machine that has them (and, where this process's own
    ATEN_CPU_CAPABILITY lowered its kernels, unsetting it)."""
    env = kernels_environment(level)
    if env is not None:
        return f"set {' '.join(f'{k}={v}' for k, v in env.items())}"
    if os.environ.get("ATEN_CPU_CAPABILITY"):
        return f"unset ATEN_CPU_CAPABILITY (it lowers this machine's kernels), or use a machine with {level} kernels"
    return f"use a machine with {level} kernels"


CODE_PATHS = ("relreason", "pyproject.toml")  # what decides what a run computes, in a checkout


def recipe_dir() -> Path:
    """Where the built-in recipes are read from, the one place that says it: `relreason/recipes/` inside the
    imported package (a source checkout, a second work tree imported through PYTHONPATH and an installed wheel
    alike: the recipes always stand beside the code that reads them)."""
    return Path(__file__).resolve().parent / "recipes"


def source_digest() -> str:
    """A digest of the package's source as it is imported now: every *.py and *.yaml file under the package (the
    built-in recipes included: relreason/recipes/), by relative path and bytes. Equal digests: the same code
    computed."""

    root = Path(relreason.__file__).parent
    files = [p for p in root.rglob("*") if p.suffix in (".py", ".yaml") and "__pycache__" not in p.parts]
    h = hashlib.sha256()
    for path in sorted(files):
        name = path.relative_to(root).as_posix()
        h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def code_record() -> dict:
    """Which code ran: {"version", "source": source_digest(), "commit", "dirty"}; commit and dirty come from
    git where the package is imported from a git checkout (dirty: its code paths differ from the commit),
    and are null otherwise (an installed wheel: the version and the source digest say it)."""

    root = Path(relreason.__file__).resolve().parent.parent
    commit = dirty = None
    try:
        def git(*args: str) -> str:
            return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True,
                                  timeout=20).stdout.strip()

        if Path(git("rev-parse", "--show-toplevel")).resolve() == root:
            commit = git("rev-parse", "HEAD")
            dirty = bool(git("status", "--porcelain", "--", *CODE_PATHS))
    except (OSError, subprocess.SubprocessError):
        commit = dirty = None
    return {"version": relreason.__version__, "source": source_digest(), "commit": commit, "dirty": dirty}


# Tensor operations that read a value back to the host (on CUDA each waits for the device): what the
# shape-static step must not call. `nonzero` and friends return a data-dependent shape, so they wait too.
HOST_READS = ("item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__", "__index__", "nonzero",
              "argwhere", "masked_select", "unique", "unique_consecutive", "equal", "allclose")


def count_host_syncs():
    """A context manager counting the calls of HOST_READS (as Tensor methods or torch functions) made
    inside it, by name: `with count_host_syncs() as seen: step(); assert not seen`. Works on CPU, where
    nothing waits, so a test there guards what would stall a GPU."""
    from torch.overrides import TorchFunctionMode  # CLI start-up: torch loads on use

    class _Count(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.seen = Counter()

        def __torch_function__(self, func, types, args=(), kwargs=None):
            name = getattr(func, "__name__", "")
            if name in HOST_READS or (name == "to" and _to_host(args, kwargs or {})):
                self.seen[name] += 1
            return func(*args, **(kwargs or {}))

        def __enter__(self):
            super().__enter__()
            return self.seen

    return _Count()


def _to_host(args, kwargs) -> bool:
    """Whether a `Tensor.to(...)` call moves a non-CPU tensor to the CPU."""
    import torch  # CLI start-up: torch loads on use

    target = kwargs.get("device", args[1] if len(args) > 1 else None)
    return isinstance(args[0], torch.Tensor) and args[0].device.type != "cpu" and str(target).startswith("cpu")
