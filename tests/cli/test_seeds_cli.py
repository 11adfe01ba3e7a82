"""`--seeds` means the same in every command that takes it (relreason.cli.common.parse_seeds): a count N is
seeds 0..N-1, a list (or a range) is those seeds; anything else is one error line, before anything runs."""

from __future__ import annotations

import json

import pytest

from cli_run import invoke, ok, one_line_error
from relreason.cli.common import parse_seeds

# every command with --seeds, as a command line that stops before training when --seeds is bad
COMMANDS = {
    "train": ["train", "mpnn", "bfs", "--recipe", "quick"],
    "ablate": ["ablate", "single-layer", "--tasks", "bfs", "--status", "--json"],
    "reproduce": ["reproduce", "clrs30", "--models", "mpnn", "--tasks", "bfs", "--status", "--json"],
}


@pytest.mark.parametrize("text, seeds", [("3", (0, 1, 2)), ("1", (0,)), ("0,4,7", (0, 4, 7)), ("7,0", (7, 0)),
                                         ("4-6", (4, 5, 6)), ("0-1,5", (0, 1, 5)), (" 2 ", (0, 1))])
def test_a_count_or_a_list(text, seeds):
    assert parse_seeds(text) == seeds


BAD = [("0", "a count is at least 1"), ("-1", "a count is at least 1"), ("1,1", "lists seed 1 more than once"),
       ("0-2,2", "lists seed 2 more than once"), ("a", "'a' is not a seed"), ("1,", "'' is not a seed"),
       ("3-1", "ends before it starts"), ("1-x", "'1-x' is not a range"), (f"{2**32}-{2**32}", "above the largest")]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("text, why", BAD)
def test_bad_seeds_are_one_error_line_in_every_command(command, text, why, tmp_path):
    one_line_error(invoke(*COMMANDS[command], "--seeds", text, "--out", tmp_path / "out"), f"--seeds {text!r}", why)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["ablate", "reproduce"])
@pytest.mark.parametrize("text, seeds", [("2", [0, 1]), ("0,4,7", [0, 4, 7])])
def test_studies_plan_a_cell_per_seed_in_its_seed_dir(command, text, seeds, tmp_path):
    cells = json.loads(ok(invoke(*COMMANDS[command], "--seeds", text, "--out", tmp_path / "out")))["cells"]
    variants = len(cells) // len(seeds)
    assert sorted(c["seed"] for c in cells) == sorted(seeds * variants)
    assert {c["run"].split("/")[-2] for c in cells} == {f"seed{k}" for k in seeds}


def test_studies_default_to_three_seeds(tmp_path):
    for command in ("ablate", "reproduce"):
        cells = json.loads(ok(invoke(*COMMANDS[command], "--out", tmp_path / "out")))["cells"]
        assert {c["seed"] for c in cells} == {0, 1, 2}, command


@pytest.mark.parametrize("text, seeds", [("3", [0, 1, 2]), ("0,4,7", [0, 4, 7]), ("5-5", [5])])
def test_train_trains_the_seeds_as_one_group(text, seeds, tmp_path, monkeypatch):
    """`train --seeds 3` is seeds 0, 1, 2 (before, it was seed 3 alone), one run directory each."""
    import relreason.train.seed_group as seed_group

    got = {}

    def fake_group(cfg, group_seeds, out, names, **kwargs):
        got["seeds"], got["names"] = list(group_seeds), list(names)
        return []

    monkeypatch.setattr(seed_group, "run_group", fake_group)
    ok(invoke(*COMMANDS["train"], "--seeds", text, "--name", "g", "--out", tmp_path, "--json"))
    assert got == {"seeds": seeds, "names": [f"g-s{k}" for k in seeds]}


def test_reproduce_list_costs_the_count(tmp_path):
    """`reproduce TABLE --list` prices the number of seeds: a count and a list of as many cost the same."""
    def listed(text):
        return json.loads(ok(invoke("reproduce", "rt-table19", "--tasks", "core8", "--seeds", text, "--list",
                                    "--json")))["tables"][0]

    three, listed_three = listed("3"), listed("0,4,7")
    assert three["seeds"] == listed_three["seeds"] == 3
    assert three["total_seconds"] == listed_three["total_seconds"]
