"""Ablations: every registered one runs; cells are read back only under the same config; paper-style tables."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from relreason.ablations import ABLATIONS, aggregate, plan_cells, run_ablation
from relreason.cli.main import app
from relreason.errors import RelreasonError

runner = CliRunner()


def tiny(tmp_path) -> list[str]:
    return ["model.hidden=8", "train.batch_size=2", "train.train_examples=2", "train.eval_every_examples=2",
            "data.train_num=4", "data.train_size=4", "data.val_size=4", "data.test_size=5", "data.val_num=2",
            "data.test_num=2", f"data.data_dir={tmp_path / 'data'}"]


@pytest.mark.parametrize("name", ABLATIONS.names())
def test_every_ablation_runs_one_step_per_variant(tmp_path, name):
    result = run_ablation(name, ["bellman_ford"], 1, None, tmp_path / "abl", tiny(tmp_path), show_progress=False,
                          log=lambda m: None)
    abl = ABLATIONS.get(name)
    assert [c["variant"] for c in result["cells"]] == [v.label for v in abl.variants]
    rows, columns = aggregate(result)
    assert rows[-1]["task"] == ("paper" if abl.paper else "average (ours)")


def test_each_variant_uses_its_models_paper_recipe(tmp_path):
    cells = plan_cells("no-edges", ["bellman_ford"], 1, None, tmp_path, [])
    assert [c.config.recipe for c in cells] == ["rt", "transformer"]
    assert cells[0].config.train.batch_size == 4 and cells[0].config.sources["train.batch_size"].startswith("recipe rt")
    dat = plan_cells("dat-sensory-only", ["bellman_ford"], 1, None, tmp_path, [])
    heads = [(c.config.processor.n_heads_sa, c.config.processor.n_heads_ra) for c in dat]
    assert heads == [(4, 4), (8, 0)]  # the paper's single-kind baseline keeps the 8 heads
    rel = plan_cells("dat-relational-only", ["bellman_ford"], 1, None, tmp_path, [])
    assert [(c.config.processor.n_heads_sa, c.config.processor.n_heads_ra) for c in rel] == [(4, 4), (0, 8)]


def test_set_cannot_override_what_the_ablation_varies(tmp_path):
    with pytest.raises(RelreasonError, match="processor.edge_updates"):
        plan_cells("no-edge-updates", ["bellman_ford"], 1, None, tmp_path, ["processor.edge_updates=true"])
    with pytest.raises(RelreasonError, match="train.seed"):
        plan_cells("no-edge-updates", ["bellman_ford"], 1, None, tmp_path, ["train.seed=3"])


def test_cli_twice_reads_every_cell_back_and_never_mixes_budgets(tmp_path):
    sets = [x for s in tiny(tmp_path) for x in ("--set", s)]
    args = ["ablate", "et-untied", "--tasks", "bellman_ford", "--seeds", "2", "--out", str(tmp_path / "abl"), *sets]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "[et-untied]" not in first.output and "et-untied" in first.output  # the name is shown, not eaten as markup
    results = sorted((tmp_path / "abl" / "et-untied").glob("*/bellman_ford/seed*/run/results.json"))
    assert len(results) == 4
    stamps = [p.stat().st_mtime_ns for p in results]
    second = runner.invoke(app, args + ["--json"])
    assert second.exit_code == 0, second.output
    assert [p.stat().st_mtime_ns for p in results] == stamps  # read back, not retrained
    assert len(json.loads(second.stdout)["cells"]) == 4
    # another budget: the stored cells are stale and never mixed in
    other = [a if a != "train.train_examples=2" else "train.train_examples=4" for a in args]
    stale = runner.invoke(app, other)
    assert stale.exit_code == 1 and "--rerun-stale" in stale.output
    again = runner.invoke(app, other + ["--rerun-stale", "--json"])
    assert again.exit_code == 0, again.output
    assert all(c["examples"] == 4 for c in json.loads(again.stdout)["cells"])
    assert len(list((tmp_path / "abl" / "et-untied").glob("*/bellman_ford/seed*/run.stale-*"))) == 4


def test_table_shows_the_papers_figures():
    result = {"variants": ["rt", "rt without edge updates"], "tasks": ["a", "b"], "lower_is_better": False,
              "cells": [{"task": t, "variant": v, "score": s} for t, v, s in
                        [("a", "rt", 0.9), ("a", "rt without edge updates", 0.5), ("b", "rt", 0.7),
                         ("b", "rt without edge updates", 0.3)]],
              "paper": [{"variant": "rt", "value": 81.30}, {"variant": "rt without edge updates", "value": 53.99}]}
    rows, columns = aggregate(result)
    assert rows[-2] == {"task": "average (ours)", "rt": "80.00", "rt without edge updates": "40.00",
                        "diff (rt without edge updates)": "-40.00"}
    assert rows[-1] == {"task": "paper", "rt": "81.30", "rt without edge updates": "53.99",
                        "diff (rt without edge updates)": "-27.31"}
    line = ABLATIONS.get("no-edge-updates").paper_line()
    assert "Table 17" in line and "81.30" in line and "53.99" in line
