"""`relreason list | generate | show` end to end, including every bad input of the data commands."""

from __future__ import annotations

import pytest

from cli_run import invoke
from relreason.data import ALGORITHMS
from relreason.data.store import load_dataset

NAME = "bellman_ford"


def test_list_algorithms_shows_every_registered_one():
    res = invoke("list", "algorithms")
    assert res.exit_code == 0
    for name in ALGORITHMS.names():
        assert name[:10] in res.output


@pytest.mark.parametrize("what", ["models", "tasks", "recipes", "ablations"])
def test_other_lists(what):
    assert invoke("list", what).exit_code == 0


def test_generate_then_show(tmp_path):
    res = invoke("generate", NAME, "--split", "val", "--out", str(tmp_path))
    assert res.exit_code == 0, res.output
    path = tmp_path / NAME / "val.safetensors"
    ds = load_dataset(path)
    assert len(ds) == 32 and ds.n == 16 and ds.meta["seed"] == 2
    shown = invoke("show", str(path))
    assert shown.exit_code == 0
    assert "bellman_ford" in shown.output and "pi_h" in shown.output and "hint steps" in shown.output


def test_generate_a_string_matchers_clrs_v1_split_then_show(tmp_path):
    res = invoke("generate", "kmp_matcher", "--split", "val", "--clrs-v1", "--out", str(tmp_path))
    assert res.exit_code == 0, res.output
    path = tmp_path / "kmp_matcher" / "val.clrs_v1.safetensors"
    ds = load_dataset(path)
    assert (len(ds), ds.n, ds.meta["size"], ds.meta["sampler"]) == (2048, 20, 16, "clrs v1.0.0")
    shown = invoke("show", str(path), "--json")
    assert shown.exit_code == 0 and '"sampler": "clrs v1.0.0"' in shown.output


def test_custom_split(tmp_path):
    res = invoke("generate", NAME, "--size", "7", "--num", "5", "--seed", "9", "--out", str(tmp_path))
    assert res.exit_code == 0, res.output
    ds = load_dataset(tmp_path / NAME / "custom_n7_s9_k5.safetensors")
    assert (len(ds), ds.n, ds.meta["seed"]) == (5, 7, 9)


@pytest.mark.parametrize("args, message", [
    (["generate", "bellmanford"], "did you mean"),
    (["generate", NAME, "--size", "1", "--num", "2", "--seed", "0"], "out of range"),
    (["generate", NAME, "--size", "100000", "--num", "2", "--seed", "0"], "out of range"),
    (["generate", NAME, "--size", "8", "--num", "0", "--seed", "0"], "positive"),
    (["generate", NAME, "--split", "bogus"], "unknown split"),
    (["generate", NAME, "--size", "8"], "custom split"),
    (["list", "bogus"], "cannot list"),
    (["generate", NAME, "--split", "test", "--clrs-v1"], "bellman_ford has no CLRS v1.0.0 sampler of its own"),
    (["generate", "lobster", "--split", "test", "--clrs-v1"], "--clrs-v1 applies to the string matchers; lobster"),
    (["generate", "naive_string_matcher", "--text", "--clrs-v1"], "--clrs-v1 applies to the string matchers' arrays"),
])
def test_bad_inputs_give_one_line_errors(tmp_path, args, message):
    res = invoke(*args, *(["--out", str(tmp_path)] if args[0] == "generate" else []))
    assert res.exit_code == 1
    assert message in res.output
    assert "Traceback" not in res.output
    assert not any(tmp_path.rglob("*.safetensors"))


def test_existing_output_needs_force(tmp_path):
    assert invoke("generate", NAME, "--split", "val", "--out", str(tmp_path)).exit_code == 0
    path = tmp_path / NAME / "val.safetensors"
    before = path.read_bytes()
    res = invoke("generate", NAME, "--split", "val", "--out", str(tmp_path))
    assert res.exit_code == 1 and "--force" in res.output
    assert path.read_bytes() == before
    assert invoke("generate", NAME, "--split", "val", "--out", str(tmp_path), "--force").exit_code == 0


def test_unwritable_output(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    res = invoke("generate", NAME, "--split", "val", "--out", str(blocker))
    assert res.exit_code == 1 and "cannot create" in res.output


@pytest.mark.parametrize("content", [b"", b"garbage", None])
def test_show_refuses_bad_files(tmp_path, content):
    path = tmp_path / "bad.safetensors"
    if content is not None:
        path.write_bytes(content)
    res = invoke("show", str(path))
    assert res.exit_code == 1 and "Error" in res.output and "Traceback" not in res.output


def test_show_truncated_file(tmp_path):
    invoke("generate", NAME, "--split", "val", "--out", str(tmp_path))
    path = tmp_path / NAME / "val.safetensors"
    path.write_bytes(path.read_bytes()[:-100])
    res = invoke("show", str(path))
    assert res.exit_code == 1 and "truncated" in res.output
