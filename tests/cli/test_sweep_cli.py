"""Size sweeps end to end (`relreason eval --ood LIST`, `relreason plot --ood`): one table with every
size and its split seed, deterministic, each size the same as evaluated alone, sizes refused before
anything runs (bad text, too small, too large for the memory), with graph families one family x size
table, and the sweep kept as a file and plotted."""

from __future__ import annotations

import json

import pytest

from cli_run import invoke, ok, one_line_error, tiny_sets
from relreason.cli.train import parse_ood


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tiny bfs run (trained on n = 5, tested on n = 6) and its data directory."""
    root = tmp_path_factory.mktemp("sweep")
    res = invoke("train", "mpnn", "bfs", "--recipe", "quick", *tiny_sets(root / "data"), "--out", root / "runs",
                 "--name", "tiny", "--json")
    return json.loads(ok(res))["run"], root / "data" / "bfs"


def sweep(run_dir, *args) -> dict:
    return json.loads(ok(invoke("eval", run_dir, *args, "--json")))


def test_a_size_list_is_one_table_with_every_size_and_its_seed(run):
    run_dir, _ = run
    text = ok(invoke("eval", run_dir, "--ood", "7,9,11"))
    assert "mpnn on bfs: test by size — CLRS score" in text
    lines = [line for line in text.splitlines() if line.startswith("│")]
    assert [line.split("│")[1].strip() for line in lines] == ["7", "9", "11"]
    assert all(line.split("│")[2].strip() == "3" for line in lines)  # the test split's seed at every size
    res = sweep(run_dir, "--ood", "7,9,11")
    assert [(r["graph"], r["size"], r["nodes"], r["seed"], r["num"]) for r in res["rows"]] == [
        ("clrs", 7, 7, 3, 4), ("clrs", 9, 9, 3, 4), ("clrs", 11, 11, 3, 4)]
    assert res["train_seed"] == 42 and res["run"] == run_dir
    again = sweep(run_dir, "--ood", "7,9,11")
    assert [r["score"] for r in again["rows"]] == [r["score"] for r in res["rows"]]  # deterministic


def test_each_size_of_a_list_is_that_size_evaluated_alone(run):
    run_dir, _ = run
    res = sweep(run_dir, "--ood", "7-11:2", "--seed", "5", "--num", "3")
    assert [(r["size"], r["seed"], r["num"]) for r in res["rows"]] == [(7, 5, 3), (9, 5, 3), (11, 5, 3)]
    for row in res["rows"]:
        alone = sweep(run_dir, "--ood", row["size"], "--seed", "5", "--num", "3")
        assert "rows" not in alone and alone["label"] == row["label"]  # one size: the single evaluation's output
        assert (alone["score"], alone["outputs"]) == (row["score"], row["outputs"])
    canonical = sweep(run_dir, "--ood", "6,8")["rows"][0]  # n = 6 is the run's own test split (seed 3)
    assert canonical["score"] == sweep(run_dir)["score"]


def test_families_by_sizes_is_one_table(run):
    run_dir, _ = run
    text = ok(invoke("eval", run_dir, "--graph", "clrs,tree", "--ood", "7,9"))
    assert "by graph family and size" in text and text.count("┏") == 1  # one table
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in text.splitlines() if line.startswith("│")]
    assert [r[0] for r in rows] == ["clrs", "tree", "split seed"]
    assert rows[2][1:] == ["3", "3"] and "n=7" in text and "n=9" in text
    res = sweep(run_dir, "--graph", "clrs,tree", "--ood", "7,9")
    assert [(r["graph"], r["size"]) for r in res["rows"]] == [("clrs", 7), ("clrs", 9), ("tree", 7), ("tree", 9)]
    one = ok(invoke("eval", run_dir, "--graph", "tree", "--ood", "7,9"))  # one family: a row per size
    assert "mpnn on bfs: test by size, tree graphs" in one and one.count("┏") == 1


@pytest.mark.parametrize("text, sizes", [
    ("64", [64]), ("16,32,64", [16, 32, 64]), ("64,16", [16, 64]), ("16-64:16", [16, 32, 48, 64]),
    ("16-256:x2", [16, 32, 64, 128, 256]), ("8-11", [8, 9, 10, 11]), ("16-60:16", [16, 32, 48]), (" 8 , 10 ", [8, 10]),
])
def test_ood_grammar(text, sizes):
    assert parse_ood(text) == sizes


@pytest.mark.parametrize("args, message", [
    (["--ood", "8,x"], "'x' is not a size or a range"),
    (["--ood", "8-x"], "is not a size or a range"),
    (["--ood", "8:2"], "has a step but no range"),
    (["--ood", "12-8"], "ends before it starts"),
    (["--ood", "1,8"], "starts below 2 nodes"),
    (["--ood", "8-16:x1"], "factor below 2"),
    (["--ood", "8-16:0"], "step below 1"),
    (["--ood", "8,6-10:2"], "lists n=8 more than once"),
    (["--ood", "8,10", "--hints"], "--hints does not go with a list"),
    (["--ood", "8,10", "--graph", "ws:k=8"], "--ood 8: graph ws:k=8"),
])
def test_bad_size_lists_are_one_line_errors_before_anything_runs(run, args, message):
    run_dir, data = run
    before = sorted(p.name for p in data.iterdir())
    one_line_error(invoke("eval", run_dir, *args), message)
    assert sorted(p.name for p in data.iterdir()) == before  # no split drawn


def test_below_an_algorithms_smallest_graph():
    from relreason.config import build_config
    from relreason.data.algorithms import ALGORITHMS
    from relreason.errors import RelreasonError
    from relreason.tasks import TASKS
    from relreason.train.evaluation import check_size

    cfg = build_config("mpnn", "strongly_connected_components", "quick", [])
    assert ALGORITHMS.get("strongly_connected_components").min_size == 4
    task = TASKS.get("strongly_connected_components")
    check_size(cfg, task, 4, None, None, None)
    with pytest.raises(RelreasonError, match="--ood 3: size 3 is out of range for strongly_connected_components"):
        check_size(cfg, task, 3, None, None, None)


def test_a_size_too_large_for_the_memory_is_refused_with_the_estimate_before_any_size_runs(run, monkeypatch):
    import relreason.runtime

    run_dir, data = run
    monkeypatch.setattr(relreason.runtime, "available_memory", lambda: 64 * 2**20)  # 64 MiB
    before = sorted(p.name for p in data.iterdir())
    error = one_line_error(invoke("eval", run_dir, "--ood", "13,15,1000"), "--ood 1000: n=1000 needs ~",
                           "for one sample of mpnn at width 8", "0.06 GiB available")
    assert "GiB" in error.split("needs ~")[1].split(" for")[0]
    assert sorted(p.name for p in data.iterdir()) == before  # neither 13 nor 15 was drawn, let alone evaluated
    hint = next(line for line in invoke("eval", run_dir, "--ood", "1000").output.splitlines() if "Hint" in line)
    assert "--no-memory-check" in hint
    assert "sizes up to about" in hint  # the largest that fits, by the same estimate
    assert ok(invoke("eval", run_dir, "--ood", "13,15"))  # the sizes that fit still run
    assert ok(invoke("eval", run_dir, "--ood", "1000", "--no-memory-check"))  # not estimated: tried (it fits)


def test_saved_sweeps_plot_one_line_per_run(run, tmp_path, matplotlib_installed):
    run_dir, _ = run
    ok(invoke("eval", run_dir, "--ood", "7,9", "--save", tmp_path / "a.json"))
    ok(invoke("eval", run_dir, "--ood", "7,9", "--graph", "tree", "--seed", "4", "--save", tmp_path))
    saved = json.loads((tmp_path / "a.json").read_text())
    assert saved["kind"] == "ood_sweep" and [r["size"] for r in saved["rows"]] == [7, 9]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "ood_sweep.json"]  # nothing half-written
    out = ok(invoke("plot", "--ood", tmp_path / "a.json", "--out", tmp_path / "sizes.png")).strip()
    assert out == str(tmp_path / "sizes.png") and (tmp_path / "sizes.png").read_bytes()[:4] == b"\x89PNG"
    one_line_error(invoke("plot", "--ood", tmp_path / "a.json", tmp_path), "same checkpoint")
    one_line_error(invoke("plot", "--ood", tmp_path / "none.json"), "does not exist")
    one_line_error(invoke("plot", "--by", "model", run_dir), "--by groups the lines of size sweeps")
