"""Our splits in other libraries' formats: CLRS-Text as Parquet or a Hugging Face dataset, graph splits as
PyTorch Geometric `Data` objects. What `relreason export-data` runs.

    export_data("data/text/bfs/paper_train.jsonl", "hf")           # -> data/text/bfs/paper_train.hf/
    export_data("data/bellman_ford/test.safetensors", "pyg")       # -> data/bellman_ford/test.pyg.pt
    graphs = pyg_graphs(load_dataset("data/bellman_ford/test.safetensors"))

Each format's package is an optional extra (`hf`: datasets and pyarrow; `pyg`: torch_geometric), imported
only inside the functions that write it; a missing one is a one-line error naming the extra.

CLRS-Text (`parquet`, `hf`): one row per JSONL line, in file order, with the columns id (the example id
`relreason score` reads), question, answer, algorithm, length (as in the JSONL) and, from the split's metadata (`<name>.meta.json`, its pieces),
seed (the sampler seed of the example's stream) and index (its 0-based position in the stream of its
(length, seed)): so every row names the exact reference example it is. The split's metadata is kept too:
as the Parquet schema's `relreason` metadata (JSON), and as the Hugging Face dataset's description.

Graph splits (`pyg`): one `torch_geometric.data.Data` per sample, a list saved with torch.save (load it
with `torch.load(path, weights_only=False)`). The mapping:
- `num_nodes`: the sample's nodes (a variable-size split, lobster, drops its padding nodes);
- `edge_index` [2, E] int64, pairs (i, j) in row-major order: with `edges="adjacency"` (the default)
  the nonzero entries of the `adj` input (CLRS sets its diagonal, so self-loops are edges), or every
  ordered pair for an algorithm without `adj` (sorting, strings, geometry, dynamic programming: the
  complete graph their processors read); with `edges="complete"` every ordered pair, self-loops included;
- every feature under `<stage>_<spec name>` (`input_A`, `hint_pi_h`, `output_pi`): node features
  [num_nodes, ...], edge features at the edges [E, ...] (entry [i, j] for edge (i, j)), graph features
  [1, ...]; hints put time second ([num_nodes, T, ...], [E, T, ...], [1, T, ...]), zero-padded to the
  split's longest trajectory T so that a split batches with `Batch.from_data_list`; `length` [1] is the
  sample's true number of hint steps. Dtypes are the dataset's (float32, float64 scalars) but pointers,
  which become int64 node indices of the sample's own graph (PyG does not offset them when batching);
  categoricals stay one-hot on the last axis.
Some algorithms have edge values on pairs that are not in `adj` (floyd_warshall's distances and
pointers, bridges' is_bridge, strongly_connected_components' A_t): exporting them with
`edges="adjacency"` would lose values, so it is refused with a hint to use `edges="complete"`.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from relreason.data.specs import POINTER_TYPES, Location, Stage
from relreason.data.store import atomic_path, current_umask, load_dataset, owned_temporary
from relreason.data.text import ExampleId, load_text_split
from relreason.data.trajectory import Dataset
from relreason.errors import RelreasonError
from relreason.registry import Registry

ADJACENCY = "adj"  # the CLRS input that marks a graph's edges (adj = (A + I) != 0)
EDGE_MODES = ("adjacency", "complete")  # `edges`: see the module docstring
TEXT_COLUMNS = ("id", "question", "answer", "algorithm", "length", "seed", "index")


def _require(module: str, what: str, extra: str) -> None:
    try:
        importlib.import_module(module)
    except ImportError:
        raise RelreasonError(f"{what} needs the {module} package",
                             f"pip install 'relreason[{extra}]'") from None


# --- CLRS-Text -------------------------------------------------------------------------------------


def text_columns(path) -> tuple[dict[str, list], dict]:
    """The columns of a CLRS-Text JSONL split (TEXT_COLUMNS, one entry per line) and its metadata.

    Raises:
        RelreasonError: the file is not a CLRS-Text split, its metadata file is missing, or the two disagree.
    """
    path = Path(path)
    split = load_text_split(path)
    meta_path = path.with_name(path.name[: -len(".jsonl")] + ".meta.json")
    if not split.meta or "pieces" not in split.meta:
        raise RelreasonError(f"{path} has no metadata ({meta_path.name}): the seed and stream index of its "
                             "examples are unknown", "regenerate the split with `relreason generate ALG --text`")
    seeds, index, sizes = [], [], []
    for length, seed, num, skip in split.meta["pieces"]:
        seeds.extend([seed] * num)
        index.extend(range(skip, skip + num))
        sizes.extend([length] * num)
    if len(seeds) != len(split) or not np.array_equal(np.asarray(sizes, dtype=np.int64), split.lengths):
        raise RelreasonError(f"{path} does not match its metadata {meta_path.name} ({len(split)} lines, "
                             f"{len(seeds)} in its pieces)", "regenerate the split with --force")
    ids = [str(ExampleId(split.algorithm, n, s, k, bool(split.meta["hints"]), split.meta["decimals"]))
           for n, s, k in zip(sizes, seeds, index)]
    columns = {"id": ids, "question": split.questions, "answer": split.answers, "algorithm": [split.algorithm] * len(split),
               "length": split.lengths.tolist(), "seed": seeds, "index": index}
    return columns, split.meta


def _arrow_table(columns: dict[str, list], meta: dict):
    import pyarrow as pa  # optional: the hf extra

    types = {"question": pa.string(), "answer": pa.string(), "algorithm": pa.string(), "length": pa.int64(),
             "seed": pa.int64(), "index": pa.int64(), "id": pa.string()}
    table = pa.table({k: pa.array(columns[k], type=types[k]) for k in TEXT_COLUMNS})
    return table.replace_schema_metadata({"relreason": json.dumps(meta)})


def write_parquet(path, out: Path) -> Path:
    """A CLRS-Text split as one Parquet file at `out` (written atomically)."""
    columns, meta = text_columns(path)  # a bad input is reported before any package is imported
    _require("pyarrow", "export to parquet", "hf")
    import pyarrow.parquet as pq  # optional: the hf extra

    table = _arrow_table(columns, meta)
    with atomic_path(out) as tmp:
        pq.write_table(table, str(tmp))
    return out


def write_hf(path, out: Path) -> Path:
    """A CLRS-Text split as a Hugging Face `datasets.Dataset` saved with `save_to_disk` into the directory
    `out` (written beside it, then renamed); `datasets.load_from_disk(out)` reads it back."""
    columns, meta = text_columns(path)
    _require("datasets", "export to hf", "hf")
    import datasets  # optional: the hf extra

    table = _arrow_table(columns, meta)
    info = datasets.DatasetInfo(description=json.dumps(meta))
    ds = datasets.Dataset(table, info=info)
    quiet = datasets.utils.are_progress_bars_disabled()
    datasets.disable_progress_bars()  # its bar would mix with ours on stderr
    try:
        with _atomic_directory(out) as tmp:
            ds.save_to_disk(str(tmp))
    finally:
        if not quiet:
            datasets.enable_progress_bars()
    return out


# --- graph splits ------------------------------------------------------------------------------------


def edge_pairs(ds: Dataset, b: int, n: int, edges: str) -> np.ndarray:
    """[n, n] bool: the pairs (i, j) of sample b that are edges under `edges` (module docstring)."""
    if edges == "adjacency" and ADJACENCY in ds.inputs:
        return ds.inputs[ADJACENCY][b, :n, :n] != 0
    return np.ones((n, n), dtype=bool)


def _node_counts(ds: Dataset) -> np.ndarray:
    return ds.sizes if ds.sizes is not None else np.full(len(ds), ds.n, dtype=np.int64)


def lost_features(ds: Dataset, edges: str) -> list[str]:
    """The edge features with a nonzero value on a pair that is no edge under `edges` (what the export
    would lose), in spec order."""
    lost = []
    stores = {Stage.INPUT: ds.inputs, Stage.HINT: ds.hints, Stage.OUTPUT: ds.outputs}
    counts = _node_counts(ds)
    for f in ds.spec.values():
        if f.location is not Location.EDGE:
            continue
        x = stores[f.stage][f.name]
        for b in range(len(ds)):
            n = int(counts[b])
            off = ~edge_pairs(ds, b, n, edges)  # (n, n)
            v = x[b][:, :n, :n][:, off] if f.stage is Stage.HINT else x[b][:n, :n][off]  # ([T,] pairs, ...)
            if np.any(v != 0):
                lost.append(f.name)
                break
    return lost


def pyg_graphs(ds: Dataset, edges: str = "adjacency") -> list:
    """The samples of `ds` as torch_geometric `Data` objects (the mapping: module docstring).

    Raises:
        RelreasonError: unknown `edges`, torch_geometric missing, or edge values off the edges (lost_features).
    """
    if edges not in EDGE_MODES:
        raise RelreasonError(f"unknown edges mode {edges!r}", f"use one of: {', '.join(EDGE_MODES)}")
    lost = lost_features(ds, edges)
    if lost:
        raise RelreasonError(f"{ds.algorithm}'s {', '.join(lost)} have values on pairs that are not edges of "
                             f"its {ADJACENCY} input: the {edges} export would lose them",
                             "export with --edges complete (every ordered pair is an edge)")
    _require("torch_geometric", "export to pyg", "pyg")
    import torch  # CLI start-up: torch loads on use
    from torch_geometric.data import Data  # optional: the pyg extra
    stores = {Stage.INPUT: ds.inputs, Stage.HINT: ds.hints, Stage.OUTPUT: ds.outputs}
    counts = _node_counts(ds)
    graphs = []
    for b in range(len(ds)):
        n = int(counts[b])
        src, dst = np.nonzero(edge_pairs(ds, b, n, edges))  # row-major (i, j)
        fields = {"num_nodes": n, "edge_index": torch.from_numpy(np.stack([src, dst]).astype(np.int64)),
                  "length": torch.tensor([int(ds.lengths[b])], dtype=torch.int64)}
        for f in ds.spec.values():
            x = stores[f.stage][f.name][b]  # one sample: ([T,] N, ...), ([T,] N, N, ...) or ([T,] ...)
            hint = f.stage is Stage.HINT
            if f.location is Location.NODE:
                x = np.moveaxis(x[:, :n], 0, 1) if hint else x[:n]  # (n, [T,] ...)
            elif f.location is Location.EDGE:
                x = np.moveaxis(x[:, src, dst], 0, 1) if hint else x[src, dst]  # (E, [T,] ...)
            else:
                x = x[None]  # (1, [T,] ...)
            if f.type in POINTER_TYPES:
                x = x.astype(np.int64)
            fields[f"{f.stage.value}_{f.name}"] = torch.from_numpy(np.ascontiguousarray(x))
        graphs.append(Data(**fields))
    return graphs


def write_pyg(path, out: Path, edges: str = "adjacency") -> Path:
    """A graph split as a list of torch_geometric `Data`, saved with torch.save at `out` (atomically)."""
    import torch  # CLI start-up: torch loads on use

    graphs = pyg_graphs(load_dataset(path), edges)
    with atomic_path(out) as tmp:
        torch.save(graphs, tmp)
    return out


# --- formats and the command's function ----------------------------------------------------------------


@dataclass(frozen=True)
class ExportFormat:
    """A target of `relreason export-data`: what it reads (a CLRS-Text `text` split or a `graph` split), the
    name the output takes beside the input (`suffix` replaces the input's), and its writer."""

    name: str
    reads: str  # "text" (.jsonl) | "graph" (.safetensors)
    suffix: str
    write: Callable[..., Path]
    summary: str


EXPORT_FORMATS: Registry[ExportFormat] = Registry("export format")
EXPORT_FORMATS.register("parquet", ExportFormat("parquet", "text", ".parquet", write_parquet,
                                                "a CLRS-Text split as one Parquet file (pyarrow; extra hf)"))
EXPORT_FORMATS.register("hf", ExportFormat("hf", "text", ".hf", write_hf,
                                           "a CLRS-Text split as a Hugging Face dataset directory (extra hf)"))
EXPORT_FORMATS.register("pyg", ExportFormat("pyg", "graph", ".pyg.pt", write_pyg,
                                            "a graph split as a list of PyTorch Geometric Data (extra pyg)"))
_READS = {".jsonl": "text", ".safetensors": "graph"}


def export_data(path, fmt: str | None = None, out=None, edges: str | None = None, force: bool = False) -> Path:
    """Writes the split at `path` in format `fmt` (EXPORT_FORMATS; by default the first registered one
    that reads the split's kind: parquet for text, pyg for graphs) to `out` (default: beside the input, its
    suffix replaced by the format's); returns where. `edges` (graph splits only): EDGE_MODES, by default
    "adjacency".

    Raises:
        RelreasonError: unknown format, a split of the wrong kind for it, `edges` given for a text format,
            an existing output without `force`, a missing package, or an unreadable split.
    """
    path = Path(path)
    kind = _READS.get(path.suffix)
    if fmt is not None:
        EXPORT_FORMATS.get(fmt)  # an unknown name is reported first, whatever the file
    if kind is None:
        raise RelreasonError(f"{path} is neither a CLRS-Text split (.jsonl) nor a graph split (.safetensors)",
                             "give a file written by `relreason generate`")
    if fmt is None:
        fmt = next(f for f in EXPORT_FORMATS.names() if EXPORT_FORMATS.get(f).reads == kind)
    target = EXPORT_FORMATS.get(fmt)
    if kind != target.reads:
        fits = [f for f in EXPORT_FORMATS.names() if EXPORT_FORMATS.get(f).reads == kind]
        raise RelreasonError(f"--format {fmt} exports {target.reads} splits; {path} is a {kind} split",
                             f"use --format {' or '.join(fits)}")
    if kind == "text" and edges is not None:
        raise RelreasonError("--edges applies to graph splits (--format pyg)", "drop --edges")
    out = Path(out) if out is not None else path.with_name(path.name[: -len(path.suffix)] + target.suffix)
    if out.exists() and not force:
        raise RelreasonError(f"{out} already exists", "pass --force to overwrite it")
    try:
        return target.write(path, out, "adjacency" if edges is None else edges) if kind == "graph" else \
            target.write(path, out)
    except PermissionError as e:
        raise RelreasonError(f"cannot write {out}: {e.strerror}", "choose a writable --out") from None


@contextmanager
def _atomic_directory(out: Path) -> Iterator[Path]:
    """Yields a temporary directory beside `out`, renamed onto it (replacing an old one) when the block
    succeeds; its name marks it as this process's temporary (relreason.data.store), so a later writer
    removes it if the process dies first."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with owned_temporary(out.parent, f".{out.name}.", ".tmp", directory=True) as tmp:
        yield tmp
        os.chmod(tmp, 0o777 & ~current_umask())  # made 0700: the folder gets a normal folder's mode
        if out.is_dir() and not out.is_symlink():
            shutil.rmtree(out)
        elif out.exists():
            out.unlink()
        os.replace(tmp, out)


__all__ = ["EXPORT_FORMATS", "EDGE_MODES", "TEXT_COLUMNS", "export_data", "pyg_graphs", "text_columns",
           "lost_features", "write_parquet", "write_hf", "write_pyg"]
