"""Ablations: every registered one runs; cells are read back only under the same config; paper-style tables."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from relreason.cli.main import app
from relreason.config import to_plain
from relreason.errors import RelreasonError
from relreason.runs.stats import t975
from relreason.studies.ablations import ABLATIONS
from relreason.studies.cells import plan_cells
from relreason.studies.report import size_breakdown, study_table
from relreason.studies.sweep import SweepOptions, run_ablation

runner = CliRunner()


def tiny(tmp_path) -> list[str]:
    return ["model.hidden=24", "train.batch_size=2", "train.train_examples=2", "train.eval_every_examples=2",
            "data.train_num=4", "data.train_size=4", "data.val_size=4", "data.test_size=5", "data.val_num=2",
            "data.test_num=2", f"data.data_dir={tmp_path / 'data'}"]


def _family(name: str) -> str:
    from relreason.models.catalog import find_model

    return find_model(ABLATIONS.get(name).variants[0].model)[0].value


@pytest.mark.parametrize("name", [n for n in ABLATIONS.names() if _family(n) == "nar"])  # text: tests/train/test_text_workload.py
def test_every_ablation_runs_one_step_per_variant(tmp_path, name):
    sweep = run_ablation(name, SweepOptions(tasks="bellman_ford", seeds=(0,), out=tmp_path / "abl",
                                             sets=tuple(tiny(tmp_path)), show_progress=False), log=lambda m: None)
    result = sweep.result
    abl = ABLATIONS.get(name)
    assert [c["variant"] for c in result["cells"]] == [v.label for v in abl.variants]
    written = json.loads((sweep.tables / "results.json").read_text())
    assert sweep.stem == "results" and written["cells"] == result["cells"]  # every cell finished: tables written
    rows, columns = study_table(result)
    ours = {r["model"]: r["ours"] for r in rows if r["task"] == "bellman_ford"}
    assert list(ours) == [v.label for v in abl.variants] and "-" not in ours.values()
    assert_each_variant_ran_its_delta(abl.variants, result["cells"])


def assert_each_variant_ran_its_delta(variants, cells) -> None:
    """Each variant's run stored (results.json and the checkpoint's config.json) its model and every key
    of its delta, and no two variants ran the same config: labels alone would pass an ablation whose
    delta never reached the model."""
    configs = []
    for variant, cell in zip(variants, cells):
        run_dir = Path(cell["run"])
        results = json.loads((run_dir / "results.json").read_text())
        checkpoint = json.loads((run_dir / "last" / "config.json").read_text())
        assert results["model"] == checkpoint["model"] == variant.model, (variant.label, results["model"])
        for stored in (results["config"], checkpoint["config"]):
            for section, values in variant.delta.items():
                for key, value in values.items():
                    assert stored[section][key] == to_plain(value), (variant.label, f"{section}.{key}", stored[section][key])
        configs.append(json.dumps([variant.model, results["config"]], sort_keys=True))
    assert len(set(configs)) == len(configs), "two variants ran the same model and config"


def test_each_variant_uses_its_models_paper_recipe(tmp_path):
    cells = plan_cells(ABLATIONS.get("no-edges"), ["bellman_ford"], (0,), None, tmp_path, [])
    assert [c.config.recipe for c in cells] == ["rt", "transformer"]
    assert cells[0].config.train.batch_size == 4 and cells[0].config.sources["train.batch_size"].startswith("recipe rt")
    dat = plan_cells(ABLATIONS.get("dat-sensory-only"), ["bellman_ford"], (0,), None, tmp_path, [])
    heads = [(c.config.processor.n_heads_sa, c.config.processor.n_heads_ra) for c in dat]
    assert heads == [(4, 4), (8, 0)]  # the paper's single-kind baseline keeps the 8 heads
    rel = plan_cells(ABLATIONS.get("dat-relational-only"), ["bellman_ford"], (0,), None, tmp_path, [])
    assert [(c.config.processor.n_heads_sa, c.config.processor.n_heads_ra) for c in rel] == [(4, 4), (0, 8)]


def test_set_cannot_override_what_the_ablation_varies(tmp_path):
    study = ABLATIONS.get("no-edge-updates")
    with pytest.raises(RelreasonError, match="processor.edge_updates"):
        plan_cells(study, ["bellman_ford"], (0,), None, tmp_path, ["processor.edge_updates=true"])
    with pytest.raises(RelreasonError, match="train.seed"):
        plan_cells(study, ["bellman_ford"], (0,), None, tmp_path, ["train.seed=3"])


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


def test_table_shows_ours_beside_the_papers_figures_with_welchs_interval_and_the_verdict():
    """Ours as mean ± sample std (ddof 1) with "k of n" seeds, the published figure with its seeds, the
    difference with Welch's 95% interval and the verdict; the average row over the tasks that compare."""
    cells = [{"task": t, "variant": v, "score": s, "comparable": True} for t, v, s in
             [("bellman_ford", "rt", 0.90), ("bellman_ford", "rt", 0.96), ("bellman_ford", "rt without edge updates",
                                                                           0.50),
              ("bellman_ford", "rt without edge updates", 0.52), ("b", "rt", 0.7), ("b", "rt", 0.7),
              ("b", "rt without edge updates", 0.3), ("b", "rt without edge updates", 0.3)]]
    result = {"variants": ["rt", "rt without edge updates"], "tasks": ["bellman_ford", "b"], "lower_is_better": False,
              "seeds": 2, "cells": cells,
              "figures": [{"variant": "rt", "task": "bellman_ford", "mean": 94.24, "pm": 1.5, "seeds": 20,
                           "spread": "std"},
                          {"variant": "rt without edge updates", "task": "bellman_ford", "mean": 91.03, "pm": 2.3,
                           "seeds": 20, "spread": "std"}],
              "averages": [{"variant": "rt", "mean": 81.30, "pm": None, "seeds": 20}]}
    rows, columns = study_table(result)
    assert columns == ["task", "model", "ours", "seeds", "paper", "diff", "95% CI of diff", "verdict"]
    # rt: 93.00 ± 4.24 (ddof 1: sqrt(18)) over 2, paper 94.24 ± 1.5 over 20: v = 18 / 2 + 2.25 / 20 = 9.1125,
    # df = 9.1125^2 / (9^2 / 1 + 0.1125^2 / 19) = 1.025; the interval spans 0 and far beyond ±1
    rt = rows[0]
    half = t975(9.1125 ** 2 / (81 + 0.1125 ** 2 / 19)) * math.sqrt(9.1125)
    assert rt == {"task": "bellman_ford", "model": "rt", "ours": "93.00 ± 4.24", "seeds": "2 of 20",
                  "paper": "94.24 ± 1.50 (20 seeds)", "diff": "-1.24",
                  "95% CI of diff": f"[{-1.24 - half:+.2f}, {-1.24 + half:+.2f}], df 1.0", "verdict": "inconclusive"}
    # 51.00 ± 1.41 against 91.03 ± 2.3: v = 1 + 0.2645, the interval lies far below 0
    assert rows[1]["ours"] == "51.00 ± 1.41" and rows[1]["verdict"] == "lower"
    assert rows[2]["paper"] == "-" and rows[2]["diff"] == rows[2]["verdict"] == "-"
    # the average compares only tasks with a published figure: b has none, so it is named as left out
    assert rows[4] == {**rt, "task": "average", "ours": "93.00", "paper": "94.24 (its figures for the same tasks)",
                       "seeds": "1 task: bellman_ford; left out (no published figure): b"}
    line = ABLATIONS.get("no-edge-updates").paper_line()
    assert "Table 17" in line and "81.30" in line and "53.99" in line


def test_an_average_the_paper_printed_alone_is_compared_only_over_every_task_from_our_side():
    """Table 9 style: no per-task figures, a published average without spread; ours over both tasks (each
    ± 2 over 5 seeds, v 0.8): the mean's variance (0.8 + 0.8) / 4 = 0.4, df (0.4^2) / (2 x 0.2^2 / 4) = 8."""
    a, b = 0.95 - 0.02 * math.sqrt(2), 0.95 + 0.02 * math.sqrt(2)  # with 0.95 x 3: mean 95, sample std 2
    cells = [{"task": t, "variant": "mpnn", "score": s + shift} for t, shift in (("x", 0.0), ("y", -0.1))
             for s in (a, b, 0.95, 0.95, 0.95)]
    result = {"variants": ["mpnn"], "tasks": ["x", "y"], "lower_is_better": False, "seeds": 5, "cells": cells,
              "averages": [{"variant": "mpnn", "mean": 89.0, "pm": None, "seeds": 20}]}
    avg = study_table(result)[0][-1]
    half = 2.306004 * math.sqrt(0.4)  # t(0.975, 8)
    assert avg["ours"] == "90.00" and avg["paper"] == "89.00 (20 seeds)" and avg["diff"] == "+1.00"
    assert avg["95% CI of diff"] == (f"[{1 - half:+.2f}, {1 + half:+.2f}], df 8.0; interval from ours only: "
                                     "published spread not printed")
    assert avg["verdict"] == "inconclusive" and avg["seeds"] == "2 tasks: x, y"
    one = study_table({**result, "cells": cells[:-4]})[0][-1]  # y has one seed: no comparison with the paper's
    assert one["paper"] == "-" and one["verdict"] == "-" and one["seeds"] == "1 task: x; left out (one seed): y"


def test_a_cell_that_is_not_the_protocol_is_printed_but_never_compared():
    result = {"variants": ["rt"], "tasks": ["bellman_ford"], "lower_is_better": False, "seeds": 1,
              "cells": [{"task": "bellman_ford", "variant": "rt", "score": 0.5, "comparable": False,
                         "why_not": "recipe quick, not the protocol's rt"},
                        {"task": "bellman_ford", "variant": "rt", "score": 0.6, "comparable": False,
                         "why_not": "recipe quick, not the protocol's rt"}],
              "figures": [{"variant": "rt", "task": "bellman_ford", "mean": 94.24, "pm": 1.5, "seeds": 20,
                           "spread": "std"}]}
    (row,) = study_table(result)[0]
    assert row["ours"] == "55.00 ± 7.07" and row["paper"] == "94.24 ± 1.50 (20 seeds)"
    assert row["diff"] == row["95% CI of diff"] == "-"  # two seeds, an interval possible: never computed
    assert row["verdict"] == "not comparable: recipe quick, not the protocol's rt"


def _cli_args(tmp_path, out="abl", *extra) -> list[str]:
    # eager triangular products (the same maths): under --jobs every worker process would otherwise compile the
    # ET's fused kernels anew, ~20 s each on 2 cores (the compiled kernels: tests/models/processors/test_et.py)
    sets = [x for s in [*tiny(tmp_path), "processor.compiled_kernels=false"] for x in ("--set", s)]
    return ["ablate", "et-untied", "--tasks", "bellman_ford", "--seeds", "2", "--out", str(tmp_path / out), *sets,
            *extra]


def _stamps(tmp_path, out="abl") -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in (tmp_path / out / "et-untied").glob("*/*/seed*/run/results.json")}


@pytest.mark.slow
def test_jobs_train_the_cells_in_worker_processes(tmp_path):
    par = runner.invoke(app, _cli_args(tmp_path, "abl", "--jobs", "2", "--json"))
    assert par.exit_code == 0, par.output
    cells = json.loads(par.stdout)["cells"]
    assert len(cells) == 4 and not json.loads(par.stdout)["missing"]
    assert (tmp_path / "abl" / "et-untied" / "results.md").is_file()
    stamps = _stamps(tmp_path)
    again = runner.invoke(app, _cli_args(tmp_path, "abl", "--json"))  # one process reads every cell back
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["cells"] == cells and _stamps(tmp_path) == stamps


def test_shards_share_one_sweep_and_the_last_one_writes_the_tables(tmp_path):
    one = ("--seed-batch", "1")  # the cells are the shards' units (on a GPU, auto groups the seeds)
    first = runner.invoke(app, _cli_args(tmp_path, "abl", "--shard", "1/2", *one))
    assert first.exit_code == 0, first.output
    assert "2 of 4 cells have no results yet" in first.output and "seed 1" in first.output
    base = tmp_path / "abl" / "et-untied"
    assert len(_stamps(tmp_path)) == 2 and not (base / "results.md").exists()  # cells 0 and 2: the seed-0 ones
    partial = runner.invoke(app, _cli_args(tmp_path, "abl", "--shard", "1/2", "--partial", *one))
    assert partial.exit_code == 0 and "PARTIAL: 2 of 4 cells" in partial.output
    assert "| 1 of 2 |" in (base / "results.partial.md").read_text()
    (base / "results.partial.sizes.csv").write_text("stale")  # what a partial text sweep also leaves
    last = runner.invoke(app, _cli_args(tmp_path, "abl", "--shard", "2/2", "--json", *one))
    assert last.exit_code == 0, last.output
    assert len(json.loads(last.stdout)["cells"]) == 4 and not json.loads(last.stdout)["missing"]
    assert (base / "results.md").is_file() and not (base / "results.partial.md").exists()
    assert not (base / "results.partial.sizes.csv").exists()
    assert len(_stamps(tmp_path)) == 4


def test_a_cell_another_process_trains_is_skipped_not_waited_for(tmp_path):
    from relreason.runtime import RunLock

    cells = plan_cells(ABLATIONS.get("et-untied"), ["bellman_ford"], (0, 1), None, tmp_path / "abl", tiny(tmp_path))
    with RunLock(cells[1].run_dir):  # as if another worker or machine were training it
        sweep = run_ablation("et-untied", SweepOptions(tasks="bellman_ford", seeds=(0, 1), out=tmp_path / "abl",
                                                     sets=tuple(tiny(tmp_path)), show_progress=False),
                             log=lambda m: None)
    result = sweep.result
    assert result["missing"] == ["et tied / bellman_ford / seed 1"] and len(result["cells"]) == 3
    assert sweep.stem is None and not list(sweep.tables.glob("results*"))  # no tables while a cell is missing
    rows, _ = study_table(result)  # a partial table marks what it lacks
    assert (rows[0]["model"], rows[0]["seeds"]) == ("et tied", "1 of 2") and "±" not in rows[0]["ours"]
    assert (rows[1]["model"], rows[1]["seeds"]) == ("et untied", "2") and rows[1]["ours"].count("±") == 1


@pytest.mark.parametrize("shard, message", [("0/2", "must be in 1..2"), ("3/2", "must be in 1..2"),
                                            ("1-2", "is not I/K"), ("a/b", "is not I/K")])
def test_bad_shards_are_refused(tmp_path, shard, message):
    res = runner.invoke(app, _cli_args(tmp_path, "abl", "--shard", shard))
    assert res.exit_code == 1 and message in res.output


def test_text_cells_get_a_shape_parse_clrs_table_per_size():
    def cell(variant, seed, clrs):
        per = {f"sort@{n}": {"algorithm": "sort", "size": n, "outputs": {"shape": 1.0, "parse": 0.5, "clrs": clrs * n}}
               for n in (10, 12)}
        return {"variant": variant, "task": "text:sort", "seed": seed, "score": 0.0, "per_task": per}

    result = {"variants": ["a", "b"], "cells": [cell("a", 0, 0.01), cell("a", 1, 0.03), cell("b", 0, 0.05)]}
    rows, columns = size_breakdown(result)
    assert columns == ["algorithm", "size", "a: shape", "a: parse", "a: CLRS", "b: shape", "b: parse", "b: CLRS"]
    assert [(r["algorithm"], r["size"]) for r in rows] == [("sort", "10"), ("sort", "12")]
    assert rows[0]["a: CLRS"] == "20.0 ± 14.1" and rows[1]["b: CLRS"] == "60.0"  # sample std; one seed: none
    assert rows[0]["a: shape"] == "100.0 ± 0.0" and rows[0]["b: parse"] == "50.0"
    nar_only = {"variants": ["a"], "cells": [{"variant": "a", "task": "bfs", "seed": 0, "score": 1.0,
                                              "per_task": {"bfs": {"score": 1.0, "outputs": {"reach": 1.0}}}}]}
    assert size_breakdown(nar_only) is None
