"""`relreason reproduce`: the published tables as a command, ours beside the paper's figures."""

from __future__ import annotations

import json

import pytest

from fake_runs import results_json
from typer.testing import CliRunner

from relreason.cli.main import app
from relreason.studies.cells import plan_cells
from relreason.studies.tables import TABLES

runner = CliRunner()
WIDE = {"COLUMNS": "400"}  # rich wraps tables to the terminal: keep each row on one line


def test_list_shows_every_table_with_its_cells_and_measured_cost(tmp_path):
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"rt-table19": {"hardware": "Test CPU", "cells": {
        "rt on bellman_ford": {"seconds": 13320.0}, "mpnn on bellman_ford": {"seconds": 1500.0}}},
        "clrs30": {"hardware": "Test CPU", "cells": {"mpnn on bellman_ford": {"seconds": 1800.0},
                                                     "pgn on bellman_ford": {"seconds": 1200.0}}}}))
    res = runner.invoke(app, ["reproduce", "--list", "--costs", str(costs)], env=WIDE)
    assert res.exit_code == 0, res.output
    for name in TABLES.names():
        assert name in res.output
    assert "25 min (mpnn on bellman_ford) to 3.7 h (rt on bellman_ford)" in res.output and "Test CPU" in res.output
    assert "210" in res.output  # rt-table19: 7 models x 30 algorithms per seed
    data = json.loads(runner.invoke(app, ["reproduce", "--list", "--costs", str(costs), "--json"]).stdout)
    assert [t["table"] for t in data["tables"]] == TABLES.names()
    rows = {t["table"]: t for t in data["tables"]}
    # clrs30 at its paper's 3 seeds: (1800 s + 1200 s) x 30 tasks x 3 seeds = 270,000 s = 75.0 h
    assert rows["clrs30"]["total_seconds"] == 270000.0
    assert rows["clrs30"]["at paper seeds (predicted)"].startswith("75.0 h (each column's bellman_ford cell")
    # a table with a column not measured has no total, and says which column
    assert rows["rt-table19"]["total_seconds"] is None
    assert rows["rt-table19"]["at paper seeds (predicted)"] == "- (deep sets not measured)"
    missing = runner.invoke(app, ["reproduce", "--list", "--costs", str(tmp_path / "nowhere.json")])
    assert missing.exit_code == 1 and "does not exist" in missing.output
    # --list costs every column: a --models it would not honour is refused, never ignored
    subset = runner.invoke(app, ["reproduce", "new-processors", "--models", "rnar", "--list", "--costs", str(costs)])
    assert subset.exit_code == 1 and "does not take --models" in subset.output


def test_list_shows_the_shipped_costs_from_any_directory(tmp_path):
    """The measured costs are package data (relreason/studies/costs.json): `reproduce --list` run outside
    the repository finds them, and every table's total at its paper's seeds is their sum."""
    from relreason.studies.sweep import costs_file

    from tests.cli.cli_run import relreason, succeeds

    shipped = json.loads(costs_file().read_text())
    data = json.loads(succeeds(relreason("reproduce", "--list", "--json", cwd=tmp_path)))
    rows = {t["table"]: t for t in data["tables"]}
    assert set(rows) == set(TABLES.names()) and set(shipped) - {"seed_groups"} == set(rows)  # and the group ratios
    for name, row in rows.items():
        assert row["measured"] and row["measured"] == shipped[name]["cells"], name
        assert "not measured" not in row["one cell (measured)"], name
        study = TABLES.get(name)
        if name in ("mueller2024", "new-processors"):  # no published seed count: no total
            assert row["total_seconds"] is None and "seed count is not known" in row["at paper seeds (predicted)"]
            continue
        seeds = {v.label: max([p.seeds for (label, _), p in study.figures.items() if label == v.label]
                              or [study.averages[v.label].seeds if v.label in study.averages else study.seeds])
                 for v in study.variants}
        # each column's mean over the tasks it was measured on (bellman_ford; lobster for rt-lobster; a text
        # table: its own tasks)
        mean = {label: [c["seconds"] for key, c in shipped[name]["cells"].items() if key.startswith(f"{label} on ")]
                for label in seeds}
        want = sum(sum(mean[label]) / len(mean[label]) * row["tasks"] * n for label, n in seeds.items())
        assert row["total_seconds"] == pytest.approx(want, abs=0.1), name
    assert "rt-table19" in succeeds(relreason("reproduce", "--list", cwd=tmp_path))  # the table, too


def test_a_quick_cell_prints_beside_the_published_figure_marked_not_comparable(tmp_path):
    (cell,) = plan_cells(TABLES.get("rt-table19"), ["bellman_ford"], (0,), "quick", tmp_path, [], ["rt"])
    cell.run_dir.mkdir(parents=True)
    (cell.run_dir / "results.json").write_text(results_json(cell.config.to_dict(), 0.9123, best_val=0.95,
                                                            seconds=150.0, command="relreason reproduce ..."))
    res = runner.invoke(app, ["reproduce", "rt-table19", "--models", "rt", "--tasks", "bellman_ford", "--seeds", "1",
                              "--recipe", "quick", "--out", str(tmp_path)], env=WIDE)
    assert res.exit_code == 0, res.output  # the finished cell is read back: nothing trains
    row = next(line for line in res.stdout.splitlines() if "bellman_ford" in line)
    assert "91.23" in row and "94.24 ± 1.50 (20 seeds)" in row and "not comparable: recipe quick" in row
    assert (tmp_path / "tables" / "rt-table19" / "results.md").is_file()


def test_unknown_table_and_model_are_one_line_errors(tmp_path):
    res = runner.invoke(app, ["reproduce", "rt-table20", "--out", str(tmp_path)])
    assert res.exit_code == 1 and "unknown table 'rt-table20'" in res.output and "rt-table19" in res.output
    res = runner.invoke(app, ["reproduce", "clrs30", "--models", "rt", "--out", str(tmp_path)])
    assert res.exit_code == 1 and "not a column of clrs30" in res.output
    res = runner.invoke(app, ["reproduce", "transnar-ood", "--models", "text", "--out", str(tmp_path)])
    assert res.exit_code == 1 and "its columns' labels: text transformer" in " ".join(res.output.split())
    res = runner.invoke(app, ["reproduce", "--out", str(tmp_path)])
    assert res.exit_code == 1 and "which table" in res.output


def test_shards_and_resume_work_as_in_ablate(tmp_path):
    """`--shard 1/2` trains every other cell (with --seed-batch 1 the cells are the shards' units, on any
    device); `--shard 2/2` the rest; a third call trains nothing."""
    from tests.cli.cli_run import TINY

    sets = [x for s in [*TINY, f"data.data_dir={tmp_path / 'data'}"] for x in ("--set", s)]
    args = ["reproduce", "ibarz2022", "--tasks", "bfs", "--seeds", "2", "--out", str(tmp_path / "rep"), *sets,
            "--seed-batch", "1"]
    first = runner.invoke(app, [*args, "--shard", "1/2", "--json"], env=WIDE)
    assert first.exit_code == 0, first.output
    data = json.loads(first.stdout)
    assert [c["seed"] for c in data["cells"]] == [0] and data["missing"] == ["triplet-gmpnn / bfs / seed 1"]
    assert all(not c["comparable"] and "differ from the protocol" in c["why_not"] for c in data["cells"])  # tiny
    second = runner.invoke(app, [*args, "--shard", "2/2", "--json"], env=WIDE)
    assert second.exit_code == 0, second.output
    assert [c["seed"] for c in json.loads(second.stdout)["cells"]] == [0, 1]
    results = sorted((tmp_path / "rep" / "cells").glob("triplet_gmpnn/*/bfs/seed*/run/results.json"))
    stamps = [p.stat().st_mtime_ns for p in results]
    again = runner.invoke(app, args, env=WIDE)
    assert again.exit_code == 0 and [p.stat().st_mtime_ns for p in results] == stamps  # read back, not retrained
