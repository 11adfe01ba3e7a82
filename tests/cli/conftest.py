"""A tiny training run shared by the CLI tests that read runs (trained once per session), and its `eval --json`."""

from __future__ import annotations

import json

import pytest
from cli_run import UMASK, relreason, succeeds, tiny_sets


@pytest.fixture(scope="session")
def trained(tmp_path_factory):
    """(root, the `train --json` result, the CompletedProcess) of `train mpnn bfs --recipe quick` on
    tiny settings, under umask UMASK."""
    root = tmp_path_factory.mktemp("cli")
    res = relreason("train", "mpnn", "bfs", "--recipe", "quick", *tiny_sets(root / "data"), "--out", root / "runs",
                    "--name", "tiny", "--json", umask=UMASK)
    return root, json.loads(succeeds(res)), res


@pytest.fixture(scope="session")
def trained_eval(trained):
    """`relreason eval RUN --json` of the shared run, as parsed JSON: its best checkpoint on its test split.
    Run once (a process of its own costs seconds); the tests that read it check different things of it."""
    _, result, _ = trained
    return json.loads(succeeds(relreason("eval", result["run"], "--json")))
