"""Exports to other libraries (relreason.data.interop): a CLRS-Text split read back from Parquet and from a
Hugging Face dataset equals its JSONL and names each example's stream; PyG Data rebuilt into dense arrays
equals the split's arrays. Each format's tests skip, with the install line, only where its package is
missing (scripts/setup.sh installs every extra, so CI runs them)."""

from __future__ import annotations

import importlib.util
import json
import stat
import sys

import numpy as np
import pytest
import torch

from relreason.data import generate
from relreason.data.interop import EXPORT_FORMATS, TEXT_COLUMNS, export_data, lost_features, pyg_graphs
from relreason.data.lobster import generate_lobster
from relreason.data.specs import POINTER_TYPES, Location, Stage
from relreason.data.store import current_umask, save_dataset
from relreason.data.text import load_text_split, resolve_text_split, text_examples, write_text_split
from relreason.errors import RelreasonError

EXTRAS = {"pyarrow": "hf", "datasets": "hf", "torch_geometric": "pyg"}


def needs(module: str):
    """Skips (listed by -rs) where the extra's package is missing; a broken install fails instead."""
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed: pip install 'relreason[{EXTRAS[module]}]'")


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    """A custom bfs split of two sizes (3 examples each) and a paper-preset-like piece with a skip."""
    out = tmp_path_factory.mktemp("text")
    return write_text_split(resolve_text_split("bfs", sizes="4,6", num=3, seed=5, hints=True), out)


def jsonl_rows(path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_text_columns_name_each_examples_stream(text_file):
    from relreason.data.interop import text_columns

    columns, meta = text_columns(text_file)
    rows = jsonl_rows(text_file)
    assert list(columns) == list(TEXT_COLUMNS)
    for key in ("question", "answer", "algorithm", "length"):
        assert columns[key] == [r[key] for r in rows]
    assert columns["seed"] == [5] * 6 and columns["index"] == [0, 1, 2, 0, 1, 2]
    # index i of (length, seed) is the i-th example of that stream: regenerate it independently
    again = list(text_examples("bfs", 6, 5, 3, hints=True))
    assert [e.question for e in again] == columns["question"][3:]
    assert meta["pieces"] == [[4, 5, 3, 0], [6, 5, 3, 0]]


def test_text_columns_count_skipped_examples_in_the_index(tmp_path):
    from relreason.data.interop import text_columns

    request = resolve_text_split("minimum", split="val", preset="paper")
    small = type(request)(request.algorithm, "val_small", tuple(type(p)(p.length, p.seed, 2, p.skip)
                                                                for p in request.pieces[:2]), False)
    path = write_text_split(small, tmp_path)
    columns, _ = text_columns(path)
    skip = request.pieces[0].skip
    assert skip > 0 and columns["index"] == [skip, skip + 1, skip, skip + 1]


@pytest.mark.parametrize("fmt", ["parquet", "hf"])
def test_text_round_trip(text_file, tmp_path, fmt):
    needs("datasets" if fmt == "hf" else "pyarrow")
    out = export_data(text_file, fmt, tmp_path / f"bfs.{fmt}")
    if fmt == "parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(out)
        back, meta = table.to_pydict(), json.loads(table.schema.metadata[b"relreason"])
    else:
        import datasets

        ds = datasets.load_from_disk(str(out))
        back, meta = ds.to_dict(), json.loads(ds.info.description)
    rows = jsonl_rows(text_file)
    assert list(back) == list(TEXT_COLUMNS)
    assert [{k: back[k][i] for k in ("id", "question", "answer", "algorithm", "length")} for i in range(len(rows))] == rows
    assert back["seed"] == [5] * 6 and back["index"] == [0, 1, 2, 0, 1, 2]
    assert meta == json.loads(text_file.with_name(text_file.stem + ".meta.json").read_text())
    assert load_text_split(text_file).questions == back["question"]  # the input is untouched
    mode = (0o777 if out.is_dir() else 0o666) & ~current_umask()  # as a file or folder made normally
    assert stat.S_IMODE(out.stat().st_mode) == mode


def dense(graph, f, n: int, src, dst, t: int | None = None) -> np.ndarray:
    """A feature of one Data back in the split's per-sample layout, rebuilt independently of the exporter."""
    x = getattr(graph, f"{f.stage.value}_{f.name}").numpy()
    hint = f.stage is Stage.HINT
    if f.location is Location.GRAPH:
        return x[0]
    if f.location is Location.NODE:
        return np.moveaxis(x, 1, 0) if hint else x  # back to (T, n, ...)
    if hint:
        full = np.zeros((x.shape[1], n, n) + x.shape[2:], x.dtype)
        for k, (i, j) in enumerate(zip(src, dst)):
            full[:, i, j] = x[k]
        return full
    full = np.zeros((n, n) + x.shape[1:], x.dtype)
    for k, (i, j) in enumerate(zip(src, dst)):
        full[i, j] = x[k]
    return full


CASES = [("bellman_ford", "adjacency"), ("insertion_sort", "adjacency"), ("floyd_warshall", "complete"),
         ("mst_kruskal", "adjacency"), ("lcs_length", "complete")]


@pytest.mark.parametrize("algorithm,edges", CASES)
def test_pyg_data_equal_the_split(algorithm, edges):
    needs("torch_geometric")
    ds = generate(algorithm, num=3, size=6, seed=4)
    graphs = pyg_graphs(ds, edges)
    stores = {Stage.INPUT: ds.inputs, Stage.HINT: ds.hints, Stage.OUTPUT: ds.outputs}
    assert len(graphs) == len(ds)
    for b, g in enumerate(graphs):
        src, dst = g.edge_index.numpy()
        assert g.num_nodes == 6 and g.edge_index.dtype == torch.int64 and int(g.length) == ds.lengths[b]
        if edges == "complete" or "adj" not in ds.inputs:
            assert list(zip(src, dst)) == [(i, j) for i in range(6) for j in range(6)]
        else:
            assert list(zip(src, dst)) == [tuple(p) for p in np.argwhere(ds.inputs["adj"][b] != 0)]  # row-major
        for f in ds.spec.values():
            want = stores[f.stage][f.name][b]
            got = dense(g, f, 6, src, dst)
            if f.type in POINTER_TYPES:
                assert got.dtype == np.int64
                want = want.astype(np.int64)
            else:
                assert got.dtype == want.dtype, f.name
            np.testing.assert_array_equal(got, want, err_msg=f"{algorithm} {f.stage.value}.{f.name}")


def test_pyg_drops_padding_nodes_of_variable_size_graphs():
    needs("torch_geometric")
    ds = generate_lobster(4, seed=3, backbone=(4, 8))
    assert len(set(ds.sizes.tolist())) > 1  # the graphs really differ in size
    for b, g in enumerate(pyg_graphs(ds)):
        n = int(ds.sizes[b])
        assert g.num_nodes == n and g.input_node_type.shape == (n, 3)
        src, dst = g.edge_index.numpy()
        assert src.max() < n and dst.max() < n
        assert list(zip(src, dst)) == [tuple(p) for p in np.argwhere(ds.inputs["adj"][b, :n, :n] != 0)]
        np.testing.assert_array_equal(g.input_A.numpy(), ds.inputs["A"][b][src, dst])
        assert float(g.output_distance) == ds.outputs["distance"][b]


def test_a_split_batches_with_pyg():
    needs("torch_geometric")
    from torch_geometric.data import Batch

    ds = generate("dfs", num=4, size=5, seed=0)
    batch = Batch.from_data_list(pyg_graphs(ds))
    assert batch.num_graphs == 4 and batch.hint_pi_h.shape == (20, ds.max_length)
    assert batch.edge_index.max() < 20  # offset per graph by PyG


def test_adjacency_export_refuses_to_lose_edge_values():
    needs("torch_geometric")
    ds = generate("floyd_warshall", num=2, size=6, seed=0)
    assert {"D", "Pi"} <= set(lost_features(ds, "adjacency")) and lost_features(ds, "complete") == []
    with pytest.raises(RelreasonError, match="--edges complete"):
        pyg_graphs(ds, "adjacency")
    assert lost_features(generate("bellman_ford", num=2, size=6, seed=0), "adjacency") == []


def test_pyg_file_loads_back(tmp_path):
    needs("torch_geometric")
    ds = generate("bfs", num=2, size=5, seed=0)
    path = save_dataset(tmp_path / "bfs" / "test.safetensors", ds)
    out = export_data(path)  # a graph split's default format, beside it
    assert out == tmp_path / "bfs" / "test.pyg.pt"
    graphs = torch.load(out, weights_only=False)
    assert len(graphs) == 2 and torch.equal(graphs[1].output_pi, torch.from_numpy(ds.outputs["pi"][1]).long())
    assert not [p for p in out.parent.iterdir() if p.name.endswith(".tmp")]


PACKAGES = {"parquet": ("pyarrow", "hf"), "hf": ("datasets", "hf"), "pyg": ("torch_geometric", "pyg")}


def test_every_format_names_its_package():
    assert set(PACKAGES) == set(EXPORT_FORMATS.names())


@pytest.mark.parametrize("fmt", EXPORT_FORMATS.names())
def test_missing_package_is_one_line_naming_the_extra(fmt, tmp_path, text_file, monkeypatch):
    module, extra = PACKAGES[fmt]
    monkeypatch.setitem(sys.modules, module, None)  # `import module` now raises ImportError
    source = text_file if EXPORT_FORMATS.get(fmt).reads == "text" else \
        save_dataset(tmp_path / "g.safetensors", generate("bfs", num=1, size=4, seed=0))
    with pytest.raises(RelreasonError) as e:
        export_data(source, fmt, tmp_path / "out")
    assert e.value.message == f"export to {fmt} needs the {module} package"
    assert e.value.hint == f"pip install 'relreason[{extra}]'"
    assert not (tmp_path / "out").exists()
