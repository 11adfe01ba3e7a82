"""A value given on the command line is the user's, falsy ones included (issue 21): `--size 0` is not
"no --size", `--seed 0` is seed 0, `--recipe ''` is not the paper recipe. Each is used as given, or
refused with one `Error:` line naming it and one `Hint:` line, and nothing is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_run import fails, relreason, succeeds

# (arguments, what the one error line says); {tmp} is the test's directory
REFUSED = [
    (["generate", "bfs", "--split", "test", "--size", "0"], "size 0 is out of range for bfs"),
    (["generate", "bfs", "--split", "val", "--num", "0"], "num 0 must be a positive number of samples"),
    (["generate", "lobster", "--split", "test", "--seed", "-1"], "--seed -1 is out of range"),
    (["generate", "bfs", "--split", "test", "--seed", str(2**32)], f"--seed {2**32} is out of range"),
    (["train", "mpnn", "bfs", "--recipe", "", "--print-config"], "recipe '' is empty"),
    (["train", "mpnn", "bfs", "--recipe", "{tmp}", "--print-config"], "is a directory, not a YAML file"),
    (["train", "mpnn", "bfs", "--name", "", "--print-config"], "invalid run name ''"),
    (["eval", "{tmp}/no-run", "--seed", str(2**32)], f"--seed {2**32} is out of range"),
]


@pytest.mark.parametrize("args, message", REFUSED, ids=[" ".join(a[:1] + a[3:5]) for a, _ in REFUSED])
def test_a_given_value_is_never_taken_for_absent(tmp_path, args, message):
    args = [a.format(tmp=tmp_path) for a in args]
    out = ["--out", tmp_path / "out"] if args[0] == "generate" else []
    fails(relreason(*args, *out), 1, message)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args, meta", [
    (["--split", "test", "--seed", "0", "--num", "2"], {"size": 64, "num": 2, "seed": 0}),  # seed 0 is a seed
    (["--split", "val", "--size", "5", "--num", "3"], {"size": 5, "num": 3}),
])
def test_given_values_are_used(tmp_path, args, meta):
    path = Path(succeeds(relreason("generate", "bfs", *args, "--out", tmp_path)).strip())
    shown = json.loads(succeeds(relreason("show", path, "--json")))
    assert {k: shown[k] for k in meta} == meta
