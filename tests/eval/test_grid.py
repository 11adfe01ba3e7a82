"""Scores by graph family x size (relreason.eval.grid): every cell evaluated once, tabulated one row per
family (or per size for one family), and kept as a sweep file."""

from __future__ import annotations

import json

import pytest

from relreason.errors import RelreasonError
from relreason.eval.grid import SWEEP_FILE, grid_rows, grid_table, read_sweep, size_table, write_sweep


def fake_score(graph: str, size: int | None) -> dict:
    n = 16 if size is None else size
    score = {"clrs": 0.9, "tree": 0.5}.get(graph.split(":")[0], 0.7) - n / 1000
    return {"graph": None if graph == "clrs" else graph, "size": n, "score": score, "num": 32,
            "label": f"test, n={n}, 32 samples", "outputs": {"pi": score}}


def test_every_family_and_size_is_one_row_families_outer():
    calls = []

    def score(graph, size):
        calls.append((graph, size))
        return fake_score(graph, size)

    rows = grid_rows(score, ["clrs", "tree", "ws:p=0.1,k=4"], [16, 64])
    assert calls == [(g, n) for g in ("clrs", "tree", "ws:p=0.1,k=4") for n in (16, 64)]
    assert [(r["graph"], r["size"]) for r in rows] == [("clrs", 16), ("clrs", 64), ("tree", 16), ("tree", 64),
                                                       ("ws:k=4,p=0.1", 16), ("ws:k=4,p=0.1", 64)]
    assert rows[0]["score"] == 0.9 - 0.016 and rows[0]["outputs"] == {"pi": rows[0]["score"]}


def test_table_has_a_row_per_family_and_a_column_per_size():
    rows = grid_rows(fake_score, ["clrs", "tree"], [None, 64])
    table, columns = grid_table(rows)
    assert columns == ["graph", "n=16", "n=64"]
    assert table == [{"graph": "clrs", "n=16": 0.9 - 0.016, "n=64": 0.9 - 0.064},
                     {"graph": "tree", "n=16": 0.5 - 0.016, "n=64": 0.5 - 0.064}]


def with_seed(graph: str, size: int | None) -> dict:
    return {**fake_score(graph, size), "seed": 3}


def test_rows_carry_the_split_seed_and_a_seed_row_can_close_the_table():
    rows = grid_rows(with_seed, ["clrs", "tree"], [16, 64])
    assert [r["seed"] for r in rows] == [3, 3, 3, 3]
    assert grid_rows(fake_score, ["clrs"], [16])[0]["seed"] is None  # an evaluation that does not say
    table, columns = grid_table(rows, seeds=True)
    assert columns == ["graph", "n=16", "n=64"]
    assert table[-1] == {"graph": "split seed", "n=16": "3", "n=64": "3"}
    assert grid_table(rows)[0] == table[:-1]  # without seeds: the table of one size, as before


def test_one_family_is_a_row_per_size():
    rows = grid_rows(with_seed, ["tree"], [8, 16, 32])
    table, columns = size_table(rows)
    assert columns == ["size", "seed", "samples", "score"]
    assert [(r["size"], r["seed"], r["samples"]) for r in table] == [(8, "3", 32), (16, "3", 32), (32, "3", 32)]
    assert table[2]["score"] == pytest.approx(0.5 - 0.032)


def test_a_size_that_is_not_a_node_count_keeps_both():
    def lobster(graph, size):  # the size asked is a backbone length; the graphs are padded to more nodes
        backbone = 20 if size is None else size  # None: the run's own, 20
        return {**with_seed(graph, size), "size": backbone + backbone // 4}

    rows = grid_rows(lobster, ["clrs"], [20, 40])
    assert [(r["size"], r["nodes"]) for r in rows] == [(20, 25), (40, 50)]
    table, columns = size_table(rows)
    assert columns == ["size", "nodes", "seed", "samples", "score"] and table[1]["nodes"] == 50
    assert grid_rows(lobster, ["clrs"], [None])[0]["size"] == 25  # the run's own size: the one evaluated


def sweep_doc(**changes) -> dict:
    doc = {"checkpoint": "runs/a/best", "run": "runs/a", "model": "mpnn", "model_label": "mpnn", "task": "bfs",
           "split": "test", "metric": "clrs", "lower_is_better": False, "train_seed": 0,
           "rows": grid_rows(with_seed, ["clrs"], [8, 16])}
    return {**doc, **changes}


def test_sweep_files_round_trip_atomically_and_into_a_run_directory(tmp_path):
    path = write_sweep(tmp_path / "s.json", sweep_doc())
    assert path == tmp_path / "s.json" and [p.name for p in tmp_path.iterdir()] == ["s.json"]  # no temporary left
    doc = read_sweep(path)
    assert doc["kind"] == "ood_sweep" and doc["schema_version"] == 1
    assert [(r["size"], r["seed"]) for r in doc["rows"]] == [(8, 3), (16, 3)]
    run = tmp_path / "run"
    run.mkdir()
    assert write_sweep(run, sweep_doc()) == run / SWEEP_FILE
    assert read_sweep(run)["task"] == "bfs"


@pytest.mark.parametrize("content, message", [
    (None, "does not exist"),
    ("{not json", "not readable JSON"),
    (json.dumps({"rows": []}), "is not a size sweep"),
    (json.dumps({"kind": "ood_sweep", "schema_version": 9}), "schema version 9"),
    (json.dumps({**sweep_doc(), "kind": "ood_sweep", "schema_version": 1, "rows": [{"size": "8"}]}), "rows must be"),
    (json.dumps({**sweep_doc(), "kind": "ood_sweep", "schema_version": 1, "metric": None}), "metric is missing"),
])
def test_a_damaged_sweep_file_is_a_one_line_error_naming_it(tmp_path, content, message):
    path = tmp_path / "s.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(RelreasonError, match=message) as e:
        read_sweep(path)
    assert str(path) in e.value.message


def test_a_sweep_file_must_be_json(tmp_path):
    with pytest.raises(RelreasonError, match="ends with .json"):
        write_sweep(tmp_path / "s.txt", sweep_doc())
