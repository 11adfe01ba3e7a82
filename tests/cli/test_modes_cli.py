"""A mode of a command (`reproduce --verify`, `ablate --list`, `results --no-collect`, ...) refuses the options it
does not read (relreason.cli.common.refuse_unread): none is dropped silently."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from relreason.cli.main import app

runner = CliRunner()

CELL = ["clrs30", "--models", "mpnn", "--tasks", "bfs", "--seeds", "1"]


@pytest.mark.parametrize("command, named", [
    (["reproduce", *CELL, "--verify", "--set", "train.threads=1"], "--verify does not read --set"),
    (["reproduce", *CELL, "--verify", "--recipe", "quick", "--jobs", "2"], "--verify does not read --recipe, --jobs"),
    (["reproduce", *CELL, "--verify", "--committed", "results"], "--verify does not read --committed"),
    (["reproduce", *CELL, "--verify", "--no-train", "--margin", "2"], "--verify does not read --no-train, --margin"),
    (["reproduce", *CELL, "--status", "--verify"], "--status does not read --verify"),
    (["reproduce", *CELL, "--status", "--committed", "results"], "--status does not read --committed"),
    (["reproduce", "clrs30", "--tasks", "bfs", "--list", "--set", "train.train_examples=10"],
     "--list does not read --set"),
    (["reproduce", *CELL, "--no-train", "--jobs", "2", "--pack", "off"], "--no-train does not read --jobs, --pack"),
    (["reproduce", *CELL, "--costs", "costs.json"], "a training run does not read --costs"),
    (["reproduce", *CELL, "--verify-validations", "4"], "a training run does not read --verify-validations"),
    (["reproduce", *CELL, "--results", "elsewhere"], "a training run does not read --results"),
    (["results", "--no-collect", "--from", "reproduce"], "--no-collect does not read --from"),
    (["export", "a-run", "--results", "md", "--out", "bundle"], "--results does not read --out"),
    (["train", "mpnn", "bfs", "--seed-strategy", "loop"], "a single run (no --seeds) does not read --seed-strategy"),
    (["ablate", "--list", "--partial"], "--list does not read --partial"),
    (["ablate", "single-layer", "--tasks", "bfs", "--status", "--jobs", "2"], "--status does not read --jobs"),
])
def test_a_mode_refuses_the_options_it_would_drop(tmp_path, monkeypatch, command, named):
    """Each mode of `reproduce` and `ablate` (--list, --status, --verify, --no-train, training), of `results`
    (--no-collect), of `export` (--results) and of `train` (one run) reads some of the options: one it does not
    read is refused, never silently dropped (--verify re-trains each cell under the config its result file
    stored, so a --set there changed nothing)."""
    monkeypatch.chdir(tmp_path)  # nothing may be written; were it, here
    res = runner.invoke(app, command)
    assert res.exit_code == 1 and f"Error: {named}: " in res.output and "Traceback" not in res.output, res.output
    assert not list(tmp_path.iterdir())
