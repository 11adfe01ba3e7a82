"""Scores by graph family x size (relreason.eval.grid): every cell evaluated once, tabulated one row per family."""

from __future__ import annotations

from relreason.eval.grid import grid_rows, grid_table


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
