"""The Ibarz et al. (2022) training stream: fresh samples for every batch, generated ahead of the model.

Triplet-GMPNN ("A Generalist Neural Algorithmic Learner") never trains on a fixed split: the
reference's `clrs/examples/run.py` draws a new batch of 32 at every step from on-the-fly samplers.
`TrainingStream` reproduces that distribution (not the reference's random numbers) as a pure function
of (algorithm, seed, step), so a run resumed after a kill sees exactly the batches it would have seen:

    stream = TrainingStream("bellman_ford", seed=0)
    ds = stream.batch(step)                       # a Dataset of 32 samples, all of size stream.size(step)
    mine = stream.batch(step, rows=slice(0, 16))  # rank 0 of 2: exactly rows 0..15 of that batch

    with Prefetcher(stream, start_step=resume_step) as batches:   # generated in another process
        for step, ds in batches: ...

    with MultiPrefetcher([TrainingStream(a, seed=0) for a in algorithms], start_step=0) as batches:
        for step, datasets in batches: ...        # one batch of every algorithm per step (generalist)

The distribution (facts from run.py `create_samplers` / `make_multi_sampler` and clrs `samplers.py`):
- Size schedule: batches are rectangular, one size each, cycling through `sizes` (default 4, 7, 11, 13,
  16): step k has size sizes[k % len(sizes)] (run.py keeps one sampler per size and takes their
  batches in turn). The string matchers instead always use max(sizes) * 5 // 4 = 20 nodes (haystack +
  needle), their variability being the needle. A size is the sampler's `length`, as in the canonical
  splits: optimal_bst has size + 1 nodes and segments_intersect always 4.
- Graphs: the edge probability p is drawn per sample from (0.1, 0.2, ..., 0.9), halved for the
  algorithms registered with `StreamForm(sparse=True)` (articulation_points, bridges and mst_kruskal);
  it applies wherever the reference sampler takes a `p` (every ER graph and the SCC communities).
- String matchers: the needle length is drawn per sample uniformly from 1..8 (run.py
  `--length_needle=-8`); the haystack has the remaining nodes.
- Everything else as in the canonical samplers, and each sample is drawn with the reference sampler's
  calls in its order (the option first: `choice(p)`, the needle length). The model-side options of the
  same recipe (random `pos`, permutation pointers, `pred` as input) live in `relreason.models`
  (ModelConfig), not here.
- Not reproduced: the reference pads a batch's hints to the longest trajectory seen so far
  (`track_max_steps`), which only adds masked steps; and run.py's leak of the matchers' size list to
  the algorithms listed after them in a multi-task run (it reassigns `train_lengths` in its loop).

Randomness: sample i of step k draws from its own generator, seeded by
`SeedSequence(seed, spawn_key=(crc32(algorithm), k, i))` (the i-th child of the step's sequence), so
any subset of rows is generated alone and equals those rows of the full batch; hints are padded to
the longest trajectory among the rows returned. Metadata (`Dataset.meta`): algorithm, split "stream",
stream "ibarz", seed, step, size, num, rows, and the per-sample draws `p` or `length_needle`.

Generation holds the GIL (numpy), so `Prefetcher` / `MultiPrefetcher` run it in spawned processes
(not forked: forking after torch started its thread pools is unsafe), each at most `depth` steps
ahead (bounded queues; the arrays travel as files in a private temporary directory, see below);
errors in a worker are re-raised in the parent with the worker's traceback as their cause, and the
workers stop on `close()`, on leaving a `with` block, on garbage collection, at interpreter exit, and
by themselves when the parent process dies.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import pickle
import queue
import secrets
import shutil
import signal
import tempfile
import time
import traceback
import weakref
import zlib
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Iterator, Sequence

import numpy as np

from relreason.data import samplers
from relreason.data.algorithms import ALGORITHMS, SPECS, Algorithm, live_names
from relreason.data.generate import run_samples
from relreason.data.store import owner_tag, remove_stale_temporaries
from relreason.data.trajectory import Dataset
from relreason.errors import RelreasonError

STREAM_NAME = "ibarz"  # the `stream` marker in Dataset.meta
SIZES = (4, 7, 11, 13, 16)  # run.py --train_lengths
BATCH_SIZE = 32  # run.py --batch_size
# run.py create_samplers: p = tuple(0.1 + 0.1 * i for i in range(9)), the same floats
EDGE_PROBABILITIES = tuple(0.1 + 0.1 * i for i in range(9))
# The algorithms registered with StreamForm(sparse=True), a live set: "a lower connection probability for
# [these], otherwise trajectories are very long" (run.py; it also names bipartite_matching, not in CLRS-30).
SPARSE_ALGORITHMS = live_names(lambda a: a.stream.sparse)
HALVED_EDGE_PROBABILITIES = tuple(float(p) for p in np.array(EDGE_PROBABILITIES) / 2)  # as run.py computes them
LENGTH_NEEDLE = -8  # run.py --length_needle: negative = uniform in 1..8 per sample


def _algorithm_key(name: str) -> int:
    """A stable integer for an algorithm's name (the streams of two algorithms must differ)."""
    return zlib.crc32(name.encode())


@dataclass(frozen=True)
class TrainingStream:
    """The infinite, deterministic training batches of one algorithm (see the module docstring)."""

    algorithm: str  # a registered algorithm
    seed: int  # the run's data seed; every (algorithm, seed) pair is its own stream
    batch_size: int = BATCH_SIZE  # the global batch: `rows` cut it for distributed ranks
    sizes: tuple[int, ...] = SIZES  # the training lengths the batches cycle through

    def __post_init__(self) -> None:
        alg = ALGORITHMS.get(self.algorithm)  # unknown names: did-you-mean error
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise RelreasonError(f"stream seed must be a non-negative integer, got {self.seed!r}", "use e.g. seed=0")
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, (int, np.integer)) \
                or self.batch_size < 1:
            raise RelreasonError(f"stream batch_size must be a positive integer, got {self.batch_size!r}",
                                 f"use e.g. {BATCH_SIZE}")
        sizes = tuple(self.sizes)
        if not sizes or any(isinstance(n, bool) or not isinstance(n, (int, np.integer)) for n in sizes):
            raise RelreasonError(f"stream sizes must be a non-empty list of integers, got {self.sizes!r}",
                                 f"use e.g. {list(SIZES)}")
        object.__setattr__(self, "sizes", tuple(int(n) for n in sizes))
        object.__setattr__(self, "seed", int(self.seed))
        object.__setattr__(self, "batch_size", int(self.batch_size))
        bad = [n for n in self.schedule if n < alg.min_size]
        if bad:
            raise RelreasonError(f"{self.algorithm} needs at least {alg.min_size} nodes, the stream has size {bad[0]}",
                                 f"use sizes >= {alg.min_size}")
        if self.length_needle is not None and 2 * -self.length_needle >= self.schedule[0]:
            raise RelreasonError(f"{self.algorithm}: {self.schedule[0]} nodes cannot hold a haystack and a needle of "
                                 f"up to {-self.length_needle} symbols",
                                 "use sizes whose largest is at least 14 (string size = largest * 5 // 4)")

    @property
    def _alg(self) -> Algorithm:
        return ALGORITHMS.get(self.algorithm)

    @property
    def length_needle(self) -> int | None:
        """The needle option (negative: random length in 1..-value), or None when the sampler has none."""
        return LENGTH_NEEDLE if samplers.takes_option(self._alg.sample, "length_needle") else None

    @property
    def edge_probabilities(self) -> tuple[float, ...] | None:
        """The p values drawn from per sample, or None when the sampler draws no graph."""
        if not samplers.takes_option(self._alg.sample, "p"):
            return None
        return HALVED_EDGE_PROBABILITIES if self._alg.stream.sparse else EDGE_PROBABILITIES

    @property
    def schedule(self) -> tuple[int, ...]:
        """The sizes batches cycle through: `sizes`, or the string matchers' single total length."""
        if self.length_needle is not None:  # run.py: "Fixed haystack + needle; variability will be in needle"
            return (max(self.sizes) * 5 // 4,)
        return self.sizes

    def size(self, step: int) -> int:
        """The number of nodes of every sample of batch `step`."""
        return self.schedule[_check_step(step) % len(self.schedule)]

    def rows(self, rows: slice | Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        """The sample indices `rows` selects in a batch (all of them for None), validated."""
        every = np.arange(self.batch_size)
        if rows is None:
            return every
        if isinstance(rows, slice):
            index = every[rows]
        else:
            index = np.asarray(rows)
            if index.ndim != 1 or not (index.size == 0 or np.issubdtype(index.dtype, np.integer)):
                raise RelreasonError(f"rows must be a slice or a 1-D array of sample indices, got {rows!r}",
                                     "e.g. rows=slice(0, 16)")
            if index.size and (index.min() < 0 or index.max() >= self.batch_size):
                raise RelreasonError(f"rows {index.tolist()} are outside the batch of {self.batch_size}",
                                     f"use indices in 0..{self.batch_size - 1}")
        if index.size == 0:
            raise RelreasonError(f"rows {rows!r} select no sample of the batch of {self.batch_size}",
                                 "give every rank at least one row")
        return index.astype(np.int64)

    def generator(self, step: int, row: int) -> np.random.RandomState:
        """The random stream of sample `row` of batch `step` (a legacy RandomState API, as the samplers use)."""
        seq = np.random.SeedSequence(self.seed, spawn_key=(_algorithm_key(self.algorithm), step, int(row)))
        return np.random.RandomState(np.random.PCG64(seq))

    def batch(self, step: int, rows: slice | Sequence[int] | np.ndarray | None = None) -> Dataset:
        """The training batch of `step` (all `batch_size` samples, or just `rows` of it, in that order)."""
        n = self.size(step)
        index = self.rows(rows)
        alg = self._alg
        ps, needle = self.edge_probabilities, self.length_needle
        samples, drawn = [], []
        for row in index:
            rng = self.generator(step, row)
            # Options first, then the inputs: the reference's samplers draw `choice(p)` (or the needle
            # length) before anything else.
            if ps is not None:
                value = ps[rng.randint(0, len(ps))]  # = rng.choice(ps)
                sample = samplers.with_options(alg.sample, p=value)
            elif needle is not None:
                value = int(rng.randint(1, 1 - needle))
                sample = samplers.with_options(alg.sample, length_needle=value)
            else:
                value, sample = None, alg.sample
            samples.append(sample(rng, n))
            drawn.append(value)
        ds = _run_grouped(alg, samples)
        ds.meta = {"algorithm": self.algorithm, "split": "stream", "stream": STREAM_NAME, "seed": self.seed,
                   "step": int(step), "size": n, "num": len(index), "batch_size": self.batch_size,
                   "rows": index.tolist()}
        if ps is not None:
            ds.meta["p"] = drawn
        elif needle is not None:
            ds.meta["length_needle"] = drawn
        return ds


def _check_step(step: int) -> int:
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 0:
        raise RelreasonError(f"a stream step must be a non-negative integer, got {step!r}", "steps count from 0")
    return int(step)


def _run_grouped(alg: Algorithm, samples: list[tuple]) -> Dataset:
    """Runs samples whose inputs may differ in shape (needles of several lengths): one lockstep batch
    per shape, joined back in the samples' order (every sample has the same number of nodes)."""
    groups: dict[tuple, list[int]] = {}
    for i, s in enumerate(samples):
        groups.setdefault(tuple(np.shape(x) for x in s), []).append(i)
    if len(groups) == 1:
        return run_samples(alg, samples)
    parts = [run_samples(alg, [samples[i] for i in members]) for members in groups.values()]
    order = np.concatenate([np.asarray(m) for m in groups.values()])
    return Dataset.concat(parts).take(np.argsort(order))


# --- prefetching in worker processes ---------------------------------------------------------------
# A worker pickles each step's batches to a file in a private spool directory and sends only the
# file's name through its queue. Sending the arrays through the queue would stream them through a
# 64 KiB pipe by the queue's feeder thread, which must win the GIL from the generating thread for
# every chunk: ~0.5 s of waiting per 10 MB step of the 30 algorithms.

START_METHOD = "spawn"  # a fresh interpreter: fork is unsafe once torch runs threads; forkserver's preload is global
POLL_SECONDS = 0.2  # how often a blocked side checks that the other is still there
JOIN_SECONDS = 5.0  # close(): how long workers may take to finish their batch before they are terminated
SHM_DIR = "/dev/shm"  # memory-backed files, used when roomy (containers often give it only 64 MiB)
SHM_MIN_FREE = 2**30  # bytes
SPOOL_PREFIX = ".relreason-stream."


class WorkerTraceback(Exception):
    """The traceback of an exception raised in a data worker (attached as the re-raised error's cause)."""


class MultiPrefetcher:
    """Iterates `(step, (Dataset per stream))` from `start_step` on, generated ahead by worker processes.

    Args:
        streams: the streams served together (one batch of each per step, in this order).
        start_step: the first step produced (a resumed run passes the step it resumes at).
        depth: steps each worker may have ready ahead of the consumer (the queue bound).
        rows: the rows of every batch this process trains on (distributed training), None for all.
        workers: processes; worker j makes steps start_step + j, + j + workers, ... (order is kept).
        stop_step: the step to stop before (None: infinite).
    """

    def __init__(self, streams: Sequence[TrainingStream], start_step: int = 0, *, depth: int = 4,
                 rows: slice | Sequence[int] | np.ndarray | None = None, workers: int = 1,
                 stop_step: int | None = None):
        self.streams = tuple(streams)
        if not self.streams:
            raise RelreasonError("a prefetcher needs at least one stream", "pass e.g. [TrainingStream('bfs', 0)]")
        start_step = _check_step(start_step)
        if depth < 1 or workers < 1:
            raise RelreasonError(f"prefetch depth and workers must be >= 1, got depth={depth}, workers={workers}",
                                 "use e.g. depth=4, workers=1")
        if stop_step is not None and _check_step(stop_step) < start_step:
            raise RelreasonError(f"stop_step {stop_step} is before start_step {start_step}", "use stop_step >= start")
        for s in self.streams:
            s.rows(rows)  # validate here, not in the worker
        self.start_step, self.stop_step, self.workers = start_step, stop_step, workers
        self._next = start_step
        ctx = multiprocessing.get_context(START_METHOD)
        self._procs, self._queues, self._stop = [], [], ctx.Event()
        self._spool = _spool_name()
        # The finalizer holds no reference to self: it runs on close(), on garbage collection and at exit.
        # It is registered before the spool is made, so an interrupt or error from here on cannot leave it.
        self._finalizer = weakref.finalize(self, _shutdown, self._procs, self._queues, self._stop, self._spool)
        os.mkdir(self._spool, 0o700)
        self._queues.extend(ctx.Queue(maxsize=depth) for _ in range(workers))
        # a spawned worker starts with the built-in algorithms only: it imports the modules that registered
        # the others (a plugin's), so that their streams run there too
        modules = tuple(dict.fromkeys(ALGORITHMS.get(s.algorithm).module for s in self.streams
                                      if s.algorithm in ALGORITHMS))
        self._procs.extend(ctx.Process(target=_produce, name=f"relreason-data-{j}", daemon=True,
                                       args=(self.streams, rows, start_step + j, workers, stop_step, q, self._stop,
                                             self._spool, modules))
                           for j, q in enumerate(self._queues))
        for p in self._procs:
            p.start()

    @property
    def worker_pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    def __iter__(self) -> Iterator[tuple[int, tuple[Dataset, ...]]]:
        return self

    def __next__(self) -> tuple[int, tuple[Dataset, ...]]:
        if not self._finalizer.alive:
            raise RuntimeError("this prefetcher is closed")
        if self.stop_step is not None and self._next >= self.stop_step:
            raise StopIteration
        j = (self._next - self.start_step) % self.workers
        kind, first, second = self._receive(self._queues[j], self._procs[j])
        if kind == "error":
            self.close()
            raise pickle.loads(first) from WorkerTraceback(second)
        step, path = first, second
        if step != self._next:  # cannot happen: each worker's queue is FIFO and its steps are fixed
            self.close()
            raise RuntimeError(f"data worker sent step {step}, expected {self._next}")
        with open(path, "rb") as f:
            parts = pickle.load(f)
        os.unlink(path)
        self._next += 1
        return step, tuple(_unpack(d) for d in parts)

    def _receive(self, q, proc) -> tuple:
        while True:
            try:
                return q.get(timeout=POLL_SECONDS)
            except queue.Empty:
                if proc.is_alive():
                    continue
            try:  # it may have put its last message just before exiting
                return q.get(timeout=POLL_SECONDS)
            except queue.Empty:
                code = proc.exitcode
                self.close()
                raise RuntimeError(f"the data worker exited (code {code}) before sending step {self._next}") from None

    def close(self) -> None:
        """Stops and reaps the workers and removes their files (idempotent)."""
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Prefetcher(MultiPrefetcher):
    """`MultiPrefetcher` of one stream: iterates `(step, Dataset)`."""

    def __init__(self, stream: TrainingStream, start_step: int = 0, **kwargs):
        super().__init__([stream], start_step, **kwargs)

    def __next__(self) -> tuple[int, Dataset]:  # type: ignore[override]
        step, (ds,) = super().__next__()
        return step, ds


def _produce(streams, rows, first: int, stride: int, stop_step: int | None, q, stop, spool: str,
             modules: tuple[str, ...]) -> None:
    """A worker's loop: the batches of steps first, first + stride, ... into spool files named in q, after
    importing `modules` (those that registered the streams' algorithms)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it then stops us
    parent = multiprocessing.parent_process()
    step = first
    try:
        for module in modules:
            importlib.import_module(module)
        while stop_step is None or step < stop_step:
            path = os.path.join(spool, f"{step}.pickle")
            with open(path, "wb") as f:
                pickle.dump(tuple(_pack(s.batch(step, rows)) for s in streams), f, pickle.HIGHEST_PROTOCOL)
            if not _put(q, ("batch", step, path), stop, parent, spool):
                return
            step += stride
    except BaseException as e:  # noqa: BLE001 - every failure goes to the parent
        tb = traceback.format_exc()
        try:
            error = pickle.dumps(e)
        except Exception:  # noqa: BLE001 - an exception that cannot cross processes
            error = pickle.dumps(RuntimeError(f"{type(e).__name__}: {e}"))
        _put(q, ("error", error, tb), stop, parent, spool)


def _put(q, message: tuple, stop, parent, spool: str) -> bool:
    """Puts a message once there is room; False (and nothing put) once the parent stopped us or died."""
    while not stop.is_set():
        if parent is not None and not parent.is_alive():
            shutil.rmtree(spool, ignore_errors=True)  # nobody else will
            break
        try:
            q.put(message, timeout=POLL_SECONDS)
            return True
        except queue.Full:
            continue
    q.cancel_join_thread()  # exit without flushing messages nobody will read
    return False


def _pack(ds: Dataset) -> tuple:
    """A Dataset as picklable parts (its spec is a read-only mapping, which pickle refuses)."""
    return ds.algorithm, dict(ds.spec), ds.inputs, ds.hints, ds.outputs, ds.lengths, ds.meta, ds.sizes


def _unpack(parts: tuple) -> Dataset:
    algorithm, spec, *rest = parts
    known = SPECS.get(algorithm)
    return Dataset(algorithm, known if known is not None and dict(known) == spec else MappingProxyType(spec), *rest)


def _spool_name() -> str:
    """A new spool directory's path (not yet made): in SHM_DIR when roomy, else the temporary directory. Its name
    marks it as this process's temporary (relreason.data.store), and the spools that dead processes left there
    (a training killed outright, its workers with it) are removed first."""
    where = tempfile.gettempdir()
    try:
        room = os.statvfs(SHM_DIR)
        if room.f_bavail * room.f_frsize >= SHM_MIN_FREE and os.access(SHM_DIR, os.W_OK):
            where = SHM_DIR
    except OSError:
        pass
    remove_stale_temporaries(Path(where), prefix=SPOOL_PREFIX)
    return os.path.join(where, f"{SPOOL_PREFIX}{owner_tag()}.{secrets.token_hex(8)}.tmp")


def _shutdown(procs, queues, stop, spool: str) -> None:
    stop.set()
    deadline = time.monotonic() + JOIN_SECONDS
    for p in procs:
        if p.pid is None:  # never started
            continue
        while p.is_alive() and time.monotonic() < deadline:
            for q in queues:  # a worker blocked on a full queue (or flushing it at exit) needs a reader
                _drain(q)
            p.join(0.05)
        if p.is_alive():
            p.terminate()
            p.join(1.0)
        if p.is_alive():
            p.kill()
            p.join()
    for q in queues:
        q.cancel_join_thread()
        q.close()
    shutil.rmtree(spool, ignore_errors=True)


def _drain(q) -> None:
    try:
        while True:
            q.get_nowait()
    except (queue.Empty, OSError, EOFError):
        pass
