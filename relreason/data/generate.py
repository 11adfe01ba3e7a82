"""Running algorithms on sampled inputs: `run_algorithm` for one sample, `generate` for a split.

Samples are drawn one after the other from a single `RandomState(seed)` exactly as the reference
does, then run in chunks (each a lockstep batch), so a split's bytes depend only
on (algorithm, size, num, seed), never on the chunk size.

Graph algorithms take an optional graph family (`graph="ws:k=4,p=0.1"`, `relreason.data.families`)
in place of the benchmark's sampler: the split is then drawn from that family, recorded in its
metadata (`meta["graph"]`, the canonical text) and stored beside the benchmark's split under its own
name (`test.ws_k=4_p=0.1.safetensors`). Without one, nothing differs from the benchmark.

The string matchers take `v1=True`: the split drawn by CLRS v1.0.0's sampler (a needle of n // 4 on top of a
haystack of n: `relreason.data.algorithms.strings.sample_matcher_v1`), the CLRS30 v1.0.0 dataset's, which
the CLRS-30 and Ibarz et al. papers tested on; recorded as `meta["sampler"]` and stored as `test.clrs_v1`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np

from relreason import __version__
from relreason.data import samplers
from relreason.data.algorithms import ALGORITHMS, Algorithm, canonical_split
from relreason.data.families import GraphSpec, parse_graph
from relreason.data.specs import spec_hash, spec_to_json
from relreason.data.store import load_dataset, read_meta, write_dataset
from relreason.data.trajectory import Dataset, Trajectory
from relreason.errors import RelreasonError
from relreason.runtime import terminate_as_interrupt

MAX_SIZE = 1600  # nodes (SALSA-CLRS's largest test size); edge features are [N, N] per step, so beyond this a split does not fit in memory
MAX_NUM = 10_000_000
CHUNK_BYTES = 256 * 2**20  # target size of one chunk's arrays: bounds memory, does not change the data
# `generate` holds the whole split in memory anyway: a split up to this size is one chunk, which saves
# the copy joining chunks (half the time of Kruskal at n = 64) and a second copy of the split in memory.
IN_MEMORY_CHUNK_BYTES = 2048 * 2**20
PROBE_MARGIN = 2.0  # the probe sample's trajectory may be shorter than most: count each sample twice as large
MAX_CHUNK = 4096  # samples; wider lockstep batches gain nothing (quickselect at n = 16 loses)

V1_SAMPLER = "clrs v1.0.0"  # meta["sampler"] of a split drawn by CLRS v1.0.0's sampler (the string matchers)
V1_FILE_PART = "clrs_v1"

# Bytes per sample seen so far, per (algorithm, size, graph, v1): later splits choose their chunks without a
# probe run (which costs a whole lockstep run: bubble sort at n = 64 takes 2,016 steps for one sample).
_SAMPLE_BYTES: dict[tuple[str, int, str | None, bool], float] = {}


def run_algorithm(name: str, *inputs) -> Trajectory:
    """Runs algorithm `name` on explicit inputs (the reference function's positional arguments)."""
    batch = [np.asarray(x)[None] for x in inputs]
    return ALGORITHMS.get(name).run(*batch).trajectory(0)


def run_samples(alg: Algorithm, samples: list[tuple]) -> Dataset:
    """Runs one algorithm on a list of sampled inputs of equal size."""
    stacked = [np.stack([np.asarray(s[i]) for s in samples]) for i in range(len(samples[0]))]
    return alg.run(*stacked)


def graph_algorithms() -> list[str]:
    """The algorithms whose sampler draws a graph (those a graph family applies to)."""
    return [n for n in ALGORITHMS.names() if samplers.takes_option(ALGORITHMS.get(n).sample, "graph")]


def resolve_graph(name: str, graph: str | GraphSpec | None) -> GraphSpec | None:
    """The graph family of a request on algorithm `name`, parsed; None for the benchmark's sampler.

    Raises RelreasonError when `name` draws no graph."""
    spec = parse_graph(graph) if graph is not None else None
    if spec is not None and name not in graph_algorithms():
        raise RelreasonError(f"{name} draws no graph: graph families apply to the graph algorithms",
                             f"drop the graph, or use one of: {', '.join(graph_algorithms())}")
    return spec


def family_sampler(alg: Algorithm, graph: GraphSpec | None, v1: bool = False):
    """The algorithm's sampler, drawing its graphs from `graph` (None: the benchmark's sampler as is);
    `v1`: CLRS v1.0.0's sampler (the string matchers)."""
    sample = alg.sample if graph is None else samplers.with_options(alg.sample, graph=graph)
    return samplers.with_options(sample, v1=True) if v1 else sample


def v1_algorithms() -> list[str]:
    """The algorithms whose CLRS v1.0.0 sampler differs from today's (the string matchers)."""
    return [n for n in ALGORITHMS.names() if samplers.takes_option(ALGORITHMS.get(n).sample, "v1")]


def check_v1(name: str, v1: bool) -> None:
    """Raises RelreasonError when `v1` is asked of an algorithm whose sampler did not change since CLRS v1.0.0."""
    if v1 and name not in v1_algorithms():
        raise RelreasonError(f"{name} has no CLRS v1.0.0 sampler of its own: only the string matchers' changed",
                             f"drop the v1 sampler, or use one of: {', '.join(v1_algorithms())}")


def resolve_split(name: str, split: str | None, size: int | None, num: int | None, seed: int | None,
                  graph: str | GraphSpec | None = None, v1: bool = False) -> dict:
    """The (split, size, num, seed, graph, v1) a generation request means, validated; `graph` comes back
    as its canonical text, or None for the benchmark's sampler; `v1`: CLRS v1.0.0's string matcher sampler.

    A canonical split supplies defaults that explicit values override; without a split all three of
    size, num and seed are needed (a custom split)."""
    alg = ALGORITHMS.get(name)
    spec = resolve_graph(name, graph)
    check_v1(name, v1)
    if split is not None:
        c = canonical_split(name, split)
        # None means "the split's"; any given value is the user's, 0 included (then refused below)
        size = c.size if size is None else size
        num = c.num if num is None else num
        seed = c.seed if seed is None else seed
        custom = (size, num, seed) != (c.size, c.num, c.seed)
    else:
        missing = [k for k, v in (("size", size), ("num", num), ("seed", seed)) if v is None]
        if missing:
            raise RelreasonError(f"a custom split needs --size, --num and --seed (missing: {', '.join(missing)})",
                                 "or pass --split train|val|test")
        custom = True
    if not alg.min_size <= size <= MAX_SIZE:
        raise RelreasonError(f"size {size} is out of range for {name}", f"use {alg.min_size} <= size <= {MAX_SIZE}")
    if not 0 < num <= MAX_NUM:
        raise RelreasonError(f"num {num} must be a positive number of samples", f"use 1 <= num <= {MAX_NUM}")
    if seed < 0 or seed >= 2**32:
        raise RelreasonError(f"seed {seed} is out of range", "use 0 <= seed < 2**32")
    if spec is not None and size < spec.min_size():
        raise RelreasonError(f"graph {spec} needs at least {spec.min_size()} nodes, the split has {size}",
                             "use a larger size or smaller family parameters")
    label = split if split is not None and not custom else f"custom_n{size}_s{seed}_k{num}"
    return {"split": label, "size": int(size), "num": int(num), "seed": int(seed),
            "graph": None if spec is None else str(spec), "v1": bool(v1)}


def iter_chunks(name: str, size: int, num: int, seed: int, chunk: int | None = None,
                chunk_bytes: int = CHUNK_BYTES, graph: str | GraphSpec | None = None,
                v1: bool = False) -> Iterator[Dataset]:
    """Yields the split in consecutive chunks (memory stays bounded; the data does not depend on them).

    `chunk` is the number of samples per chunk. Lockstep algorithms run faster on wider chunks, but
    hints can be large (bubble sort at n = 64 has ~2,000 steps), so without an explicit `chunk`,
    chunks take as many samples as fit in `chunk_bytes`. The bytes per sample are the most seen for
    this algorithm and size in this process; the first time, the first sample is run alone to measure
    them (counted PROBE_MARGIN times: its trajectory may be short) and run again with its chunk.
    `graph`: a graph family for graph algorithms (None: the benchmark's sampler); `v1`: CLRS v1.0.0's sampler."""
    if chunk is not None and chunk < 1:
        raise ValueError(f"chunk = {chunk} must be a positive number of samples")
    alg = ALGORITHMS.get(name)
    spec = resolve_graph(name, graph)
    check_v1(name, v1)
    sample = family_sampler(alg, spec, v1)
    rng = np.random.RandomState(seed)
    probe: list[np.ndarray] | None = None  # the probe sample's inputs, drawn first and run again with its chunk
    key = (name, size, None if spec is None else str(spec), v1)
    if chunk is None and key not in _SAMPLE_BYTES:
        probe = samplers.draw(sample, rng, size, 1)
        part = alg.run(*probe)
        if num == 1:
            yield part
            return
        _SAMPLE_BYTES[key] = PROBE_MARGIN * _bytes_per_sample(part)
        del part
    start = 0
    while start < num:
        width = chunk or int(min(MAX_CHUNK, max(1, chunk_bytes // _SAMPLE_BYTES[key])))
        take = min(width, num - start)
        if probe is None:
            inputs = samplers.draw(sample, rng, size, take)
        elif take == 1:
            inputs = probe
        else:
            rest = samplers.draw(sample, rng, size, take - 1)
            inputs = [np.concatenate([a, b]) for a, b in zip(probe, rest)]
        probe = None
        part = alg.run(*inputs)
        _SAMPLE_BYTES[key] = max(_SAMPLE_BYTES.get(key, 0.0), _bytes_per_sample(part))
        yield part
        start += take


def _bytes_per_sample(part: Dataset) -> float:
    return sum(a.nbytes for a in part.arrays().values()) / len(part)


def split_meta(name: str, split: str, size: int, num: int, seed: int, graph: str | None = None,
               v1: bool = False) -> dict:
    """A split's metadata; `graph` (the family's canonical text) only when the split has one and `sampler`
    only for CLRS v1.0.0's, so that the benchmark's splits stay byte for byte what they were."""
    spec = ALGORITHMS.get(name).spec
    meta = {"algorithm": name, "split": split, "size": size, "num": num, "seed": seed,
            "spec": spec_to_json(spec), "spec_hash": spec_hash(spec), "relreason": __version__}
    if graph is not None:
        meta["graph"] = graph
    if v1:
        meta["sampler"] = V1_SAMPLER
    return meta


def generate(name: str, split: str | None = None, *, num: int | None = None, size: int | None = None,
             seed: int | None = None, graph: str | GraphSpec | None = None, v1: bool = False) -> Dataset:
    """Generates a split in memory: `generate(name, split="test")` or `generate(name, num=K, size=N, seed=S)`;
    `graph="ws:k=4,p=0.1"` draws a graph algorithm's graphs from that family; `v1=True` a string matcher's
    split as CLRS v1.0.0 drew it."""
    r = resolve_split(name, split, size, num, seed, graph, v1)
    ds = Dataset.concat(iter_chunks(name, r["size"], r["num"], r["seed"], chunk_bytes=IN_MEMORY_CHUNK_BYTES,
                                    graph=r["graph"], v1=r["v1"]))
    ds.meta = split_meta(name, **r)
    return ds


def dataset_path(out_dir, algorithm: str, split: str, graph: str | None = None, v1: bool = False):
    """Where a split lives on disk: `out_dir/algorithm/<split>.safetensors`, or for a graph family
    `<split>.<family text, punctuation as _>.safetensors` (`test.ws_k=4_p=0.1`), for CLRS v1.0.0's
    sampler `<split>.clrs_v1.safetensors`."""
    name = split if graph is None else f"{split}.{_file_part(graph)}"
    name = f"{name}.{V1_FILE_PART}" if v1 else name
    return Path(out_dir) / algorithm / f"{name}.safetensors"


def _file_part(graph: str) -> str:
    """A graph's canonical text as part of a file name: `:` and `,` become `_`, `|` becomes `+`
    (the metadata keeps the exact text; loading compares it)."""
    return graph.replace(":", "_").replace(",", "_").replace("|", "+")


def write_split(algorithm: str, split: str | None, size: int | None, num: int | None, seed: int | None, out_dir,
                force: bool = False, on_chunk=None, graph: str | GraphSpec | None = None, v1: bool = False):
    """Generates a split straight to disk (streamed chunk by chunk, atomic). Returns its path.

    `on_chunk(k)` is called after each chunk of k samples (progress bars); `graph`: a graph family;
    `v1`: CLRS v1.0.0's string matcher sampler."""
    r = resolve_split(algorithm, split, size, num, seed, graph, v1)
    path = dataset_path(out_dir, algorithm, r["split"], r["graph"], r["v1"])
    if path.exists() and not force:
        raise RelreasonError(f"{path} already exists", "pass --force to overwrite it")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise RelreasonError(f"cannot create {path.parent}: {e.strerror}", "choose a writable --out directory") from None

    def chunks():
        for c in iter_chunks(algorithm, r["size"], r["num"], r["seed"], graph=r["graph"], v1=r["v1"]):
            if on_chunk is not None:
                on_chunk(len(c))
            yield c

    with terminate_as_interrupt():
        write_dataset(path, chunks(), split_meta(algorithm, **r))
    return path


def cached_split(algorithm: str, split: str | None, data_dir, size: int | None = None, num: int | None = None,
                 seed: int | None = None, graph: str | GraphSpec | None = None, v1: bool = False) -> Dataset:
    """Loads a split from the on-disk cache, generating it first when missing or stale."""
    r = resolve_split(algorithm, split, size, num, seed, graph, v1)
    path = dataset_path(data_dir, algorithm, r["split"], r["graph"], r["v1"])
    want = split_meta(algorithm, **r)
    fresh = False
    if path.exists():
        try:
            have = read_meta(path)
            fresh = all(have.get(k) == want.get(k) for k in ("size", "num", "seed", "spec_hash", "graph", "sampler"))
        except RelreasonError:
            fresh = False
    if not fresh:
        write_split(algorithm, split, size, num, seed, data_dir, force=True, graph=r["graph"], v1=r["v1"])
    return load_dataset(path)
