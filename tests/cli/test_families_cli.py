"""`--graph` on generate, train and eval end to end: family splits on disk, a run trained and tested on
a family, evaluation on other families (one label, or a table by family and size), and every misuse
as a one-line error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_run import invoke, ok, one_line_error, tiny_sets
from relreason.data.store import load_dataset


def test_generate_a_family_split_and_show_it(tmp_path):
    out = ok(invoke("generate", "bfs", "--split", "test", "--num", "3", "--graph", "ws:k=4,p=0.1", "--out", tmp_path))
    path = tmp_path / "bfs" / "custom_n64_s3_k3.ws_k=4_p=0.1.safetensors"  # 3 of the test split
    assert out.strip() == str(path)
    ds = load_dataset(path)
    assert ds.meta["graph"] == "ws:k=4,p=0.1" and (len(ds), ds.n) == (3, 64)
    shown = ok(invoke("show", path))
    assert "graph" in shown and "ws:k=4,p=0.1" in shown
    assert json.loads(ok(invoke("show", path, "--json")))["graph"] == "ws:k=4,p=0.1"
    plain = tmp_path / "plain"
    ok(invoke("generate", "bfs", "--split", "val", "--graph", "clrs", "--out", plain))  # the benchmark's own
    assert "graph" not in json.loads(ok(invoke("show", plain / "bfs" / "val.safetensors", "--json")))


@pytest.mark.parametrize("args, message", [
    (["insertion_sort", "--graph", "ws"], "insertion_sort draws no graph"),
    (["bfs", "--graph", "wss"], "unknown graph family 'wss'"),
    (["bfs", "--graph", "ws:k=5"], "must be an even integer"),
    (["bfs", "--graph", "er,ws"], "this command takes one"),
    (["lobster", "--graph", "ws"], "applies to the graph algorithms"),
    (["bfs", "--text", "--graph", "ws"], "not to --text"),
    (["bfs", "--size", "6", "--num", "2", "--seed", "0", "--graph", "ws:k=8"], "needs at least 9 nodes"),
])
def test_generate_misuse_is_a_one_line_error(tmp_path, args, message):
    one_line_error(invoke("generate", *args, "--out", tmp_path), message)
    assert not any(tmp_path.rglob("*.safetensors"))


def test_train_print_config_records_the_family():
    out = ok(invoke("train", "mpnn", "bfs", "--graph", "ws:p=0.1,k=4", "--print-config"))
    assert "graph: 'ws:k=4,p=0.1'  # --set" in out and "graph_splits: [test]" in out
    assert "graph_splits:" not in ok(invoke("train", "mpnn", "bfs", "--print-config"))  # unused without a graph


@pytest.mark.parametrize("args, message", [
    (["mpnn", "core8", "--graph", "ws"], "draw no graph"),
    (["mpnn", "lobster", "--graph", "ws"], "lobster is a lobster task"),
    (["text_transformer", "text:bfs", "--graph", "ws"], "text task"),
    (["mpnn", "bfs", "--graph", "er,ws"], "this command takes one"),
    (["mpnn", "bfs", "--graph", "ws:k=8", "--set", "data.test_size=6"], "needs at least 9 nodes"),
])
def test_train_misuse_is_a_one_line_error(args, message):
    one_line_error(invoke("train", *args, "--print-config"), message)


@pytest.fixture(scope="module")
def family_run(tmp_path_factory):
    """A tiny bfs run whose test split is drawn from ws (train and validation: the benchmark's)."""
    root = tmp_path_factory.mktemp("family")
    res = invoke("train", "mpnn", "bfs", "--recipe", "quick", *tiny_sets(root / "data"), "--set", "data.test_size=9",
                 "--graph", "ws:k=4,p=0.1", "--out", root / "runs", "--name", "ws", "--json")
    return root, json.loads(ok(res))


def test_a_run_tests_on_its_family_and_records_it(family_run):
    root, result = family_run
    assert result["test_label"] == "test, n=9, ws:k=4,p=0.1, 4 samples"
    config = json.loads((Path(result["run"]) / "best" / "config.json").read_text())["config"]
    assert config["data"]["graph"] == "ws:k=4,p=0.1" and config["data"]["graph_splits"] == ["test"]
    files = sorted(p.name for p in (root / "data" / "bfs").iterdir())
    assert any(".ws_k=4_p=0.1." in f and f.startswith("custom_n9_s3") for f in files)
    assert all(".ws_" not in f for f in files if f.startswith(("custom_n5_s1", "custom_n5_s2")))  # train, val
    again = json.loads(ok(invoke("eval", result["run"], "--json")))
    assert again["graph"] == "ws:k=4,p=0.1" and again["score"] == pytest.approx(result["test"]["score"])


def test_eval_on_another_family_labels_it(family_run):
    _, result = family_run
    res = json.loads(ok(invoke("eval", result["run"], "--graph", "tree", "--ood", "8", "--json")))
    assert res["graph"] == "tree" and res["label"] == "test, n=8, tree, 4 samples"
    assert json.loads(ok(invoke("eval", result["run"], "--graph", "clrs", "--json")))["graph"] is None
    table = ok(invoke("eval", result["run"], "--graph", "delaunay", "--ood", "8"))
    assert "test, n=8, delaunay, 4 samples" in table


def test_eval_a_list_of_families_is_one_table_by_family_and_size(family_run):
    _, result = family_run
    text = ok(invoke("eval", result["run"], "--graph", "clrs,tree,ws:k=4,p=0.2", "--ood", "10"))
    assert "by graph family and size" in text and "n=10" in text
    for name in ("clrs", "tree", "ws:k=4,p=0.2"):
        assert name in text
    res = json.loads(ok(invoke("eval", result["run"], "--graph", "clrs,tree", "--ood", "10", "--json")))
    assert [(r["graph"], r["size"], r["num"]) for r in res["rows"]] == [("clrs", 10, 4), ("tree", 10, 4)]
    assert res["rows"][1]["label"] == "test, n=10, tree, 4 samples"
    single = json.loads(ok(invoke("eval", result["run"], "--graph", "tree", "--ood", "10", "--json")))
    assert single["score"] == pytest.approx(res["rows"][1]["score"])  # a cell is the single evaluation


@pytest.mark.parametrize("args, message", [
    (["--graph", "clrs,tree", "--hints"], "--hints does not go with a list"),
    (["--graph", "tree,tree"], "more than once"),
    (["--graph", "wss"], "unknown graph family"),
    (["--graph", "ws:k=8", "--ood", "6"], "needs at least 9 nodes"),
])
def test_eval_misuse_is_a_one_line_error(family_run, args, message):
    _, result = family_run
    one_line_error(invoke("eval", result["run"], *args), message)


def test_list_graphs_names_every_family_and_its_parameters():
    rows = json.loads(ok(invoke("list", "graphs", "--json")))["graphs"]
    assert [r["name"] for r in rows] == ["clrs", "er", "ws", "delaunay", "ba", "sbm", "grid", "tree"]
    ws = next(r for r in rows if r["name"] == "ws")
    assert ws["parameters"]["k"]["default"] == "4|6|8" and "SALSA-CLRS" in ws["parameters"]["p"]["meaning"]


@pytest.mark.parametrize("spelled", ["gforgetnet", "G-ForgetNet", "g_forgetnet"])
def test_train_takes_a_model_name_spelled_with_other_case_dashes_and_underscores(spelled):
    """`relreason train gforgetnet bellman_ford` (issue 31's spelling) trains the registered g_forgetnet: its
    config, and so its run directory and records, name g_forgetnet."""
    out = ok(invoke("train", spelled, "bellman_ford", "--print-config"))
    assert out.startswith("model_name: g_forgetnet\n") and "recipe: g_forgetnet\n" in out
