"""Result files and RESULTS.md are generated from finished cells (relreason.studies.results, relreason.studies.results_report), never typed."""

from __future__ import annotations

import json

import pytest

from fake_runs import results_json
from typer.testing import CliRunner

from relreason.cli.main import app
from relreason.studies.cells import nar_cells, plan_cells
from relreason.studies.results import collect_results
from relreason.studies.results_report import write_report
from relreason.studies.tables import TABLES


def _finish(cell, score: float, seconds: float = 3600.0, threads: int = 1, command: str | None = "") -> None:
    """A finished cell as `train` leaves it: results.json with the resolved config, hardware and time (and the
    command that ran it: "" for a `reproduce` command of its task, None where none was recorded)."""
    cfg = cell.config.to_dict()
    cfg["train"]["threads"] = threads
    cell.run_dir.mkdir(parents=True)
    (cell.run_dir / "results.json").write_text(results_json(
        cfg, score, seconds=seconds, best_val=0.99, hardware=["Test CPU (2 cores), 1 torch thread, cpu"],
        command=f"relreason reproduce ibarz2022 --tasks {cell.task}" if command == "" else command))


def _start(cell) -> None:
    """An unfinished cell as `train` leaves it: a last checkpoint at 96,000 examples and the run's config."""
    (cell.run_dir / "last").mkdir(parents=True)
    (cell.run_dir / "last" / "trainer_state.json").write_text(json.dumps(
        {"step": 3000, "examples": 96000, "best_val": 0.5, "best_examples": 64000, "seconds": 1800.0,
         "hardware": ["Test CPU"]}))
    (cell.run_dir / "config.json").write_text(json.dumps({"relreason": "0.1.0", "config": cell.config.to_dict(),
                                                          "command": "c"}))


def test_results_md_shows_ours_beside_the_paper_with_hardware_time_and_progress(tmp_path):
    study = TABLES.get("ibarz2022")
    for cell, score in zip(plan_cells(study, ["bellman_ford"], (0, 1, 2), None, tmp_path / "rep", []),
                           (0.97, 0.975, 0.98)):
        _finish(cell, score)
    (quick,) = plan_cells(study, ["bfs"], (0,), "quick", tmp_path / "rep", [])
    _finish(quick, 0.5, seconds=120)
    (partial,) = plan_cells(study, ["dfs"], (0,), None, tmp_path / "rep", [])
    _start(partial)

    written = collect_results(tmp_path / "rep", tmp_path / "results")
    assert len(written) == 5 and (tmp_path / "results" / "cells" / "triplet_gmpnn" / "triplet_gmpnn" / "bellman_ford"
                                  / "seed2.json").is_file()
    assert collect_results(tmp_path / "rep", tmp_path / "results") == []  # nothing changed: nothing rewritten
    assert write_report(tmp_path / "results", tmp_path / "RESULTS.md") == 1
    md = (tmp_path / "RESULTS.md").read_text()
    # ours 97.50 ± 0.50 over 3 (variance of the mean 0.25 / 3 = 0.08333, df 2); the paper's ± 0.19 over 10 is
    # undefined: as a std, v = 0.0361 / 10 = 0.00361 and Welch's df = 0.08694^2 / (0.08333^2 / 2 + 0.00361^2 / 9)
    # = 2.176, half t(0.975, 2.176) x sqrt(0.08694) = 1.175; as a standard error (std 0.60, v 0.0361), df 3.94
    # and half 0.965: the std reading is the wider, so it is kept. [-1.07, +1.29] is not inside ±1: inconclusive
    assert ("| bellman_ford | triplet-gmpnn | 97.50 ± 0.50 | 3 of 10 | 97.39 ± 0.19 (± undefined, 10 seeds) | +0.11 "
            "| [-1.07, +1.29], df 2.2; published ± undefined, read as a std (the wider interval) "
            "| inconclusive |") in md
    assert ("| bfs | triplet-gmpnn | 50.00 | 1 of 10 | 99.73 ± 0.04 (± undefined, 10 seeds) | - | - "
            "| not comparable: recipe quick") in md
    # the average: only bellman_ford compares (bfs is not the protocol), against the paper's figure for it
    assert ("| average | triplet-gmpnn | 97.50 | 1 task: bellman_ford; left out (not comparable): bfs | 97.39 (its "
            "figures for the same tasks) | +0.11 | [-1.07, +1.29]") in md
    assert "Verdict margin: ±1 percentage point." in md and "*95% CI of diff*, Welch's 95% interval" in md
    assert ("| triplet-gmpnn | bellman_ford | 2 | 98.00 | 1.00 h | Test CPU (2 cores), 1 torch thread, cpu | "
            "`relreason reproduce ibarz2022 --models triplet_gmpnn --tasks bellman_ford --seeds 3 --set train.threads=1` "
            "| `relreason reproduce ibarz2022 --tasks bellman_ford` |") in md  # its thread count: the same sums
    assert "| triplet_gmpnn | triplet_gmpnn | dfs | 0 | 96,000 of 320,000 | 50.00 | 30.0 min | Test CPU |" in md


def test_results_command_writes_the_report(tmp_path):
    study = TABLES.get("ibarz2022")
    (cell,) = plan_cells(study, ["bfs"], (0,), None, tmp_path / "rep", [])
    _finish(cell, 0.99)
    res = CliRunner().invoke(app, ["results", "--from", str(tmp_path / "rep"), "--results", str(tmp_path / "res"),
                                   "--md", str(tmp_path / "R.md")])
    assert res.exit_code == 0, res.output
    assert ("| bfs | triplet-gmpnn | 99.00 | 1 of 10 | 99.73 ± 0.04 (± undefined, 10 seeds) | -0.73 | - "
            "| no verdict: one seed of ours, the difference is not meaningful |") in (tmp_path / "R.md").read_text()
    missing = CliRunner().invoke(app, ["results", "--from", str(tmp_path / "nothing")])
    assert missing.exit_code == 1 and "holds no cells" in missing.output
    res = CliRunner().invoke(app, ["results", "--no-collect", "--results", str(tmp_path / "res"), "--md",
                                   str(tmp_path / "R.md"), "--margin", "2.5"])
    assert res.exit_code == 0 and "Verdict margin: ±2.5 percentage points." in (tmp_path / "R.md").read_text()


def test_a_cell_whose_command_was_not_recorded_says_so(tmp_path):
    """A cell trained by the Python API (or a script that did not pass its command on) names no command: its
    row says "not recorded", never a made-up one."""
    (cell,) = plan_cells(TABLES.get("ibarz2022"), ["bfs"], (0,), None, tmp_path / "rep", [])
    _finish(cell, 0.99, command=None)
    res = CliRunner().invoke(app, ["results", "--from", str(tmp_path / "rep"), "--results", str(tmp_path / "res"),
                                   "--md", str(tmp_path / "R.md")])
    assert res.exit_code == 0, res.output
    assert "--seeds 1 --set train.threads=1` | not recorded | " in (tmp_path / "R.md").read_text()


@pytest.mark.parametrize("margin", ["-1", "0", "nan", "inf"])
def test_a_bad_margin_is_a_one_line_error_before_anything_is_read(tmp_path, margin):
    # tiny settings: were the margin checked only when the table is printed, the cell would train (quickly)
    tiny = [x for s in ("train.train_examples=2", "train.eval_every_examples=2", "data.train_num=4", "data.val_num=2",
                        "data.test_num=2", f"data.data_dir={tmp_path / 'data'}") for x in ("--set", s)]
    out = tmp_path / "out"
    for args in (["results", "--from", str(out)], ["reproduce", "ibarz2022", "--tasks", "bfs", "--out", str(out), *tiny],
                 ["ablate", "no-edge-updates", "--tasks", "bfs", "--out", str(out), *tiny]):
        res = CliRunner().invoke(app, [*args, "--margin", margin])
        assert res.exit_code == 1, (args, res.output)
        assert res.output.startswith(f"Error: --margin {float(margin)} must be a positive number"), res.output
        assert "Traceback" not in res.output and not out.exists()  # nothing trained, nothing written


def test_a_cell_of_another_tables_protocol_stays_in_that_table(tmp_path):
    """clrs30's MPNN cells are not shown in rt-table19's MPNN column (whose protocol is rt_table2)."""
    from relreason.studies.results import cell_files
    from relreason.studies.results_report import table_result

    (cell,) = plan_cells(TABLES.get("clrs30"), ["bfs"], (0,), None, tmp_path / "rep", [], ["mpnn"])
    _finish(cell, 0.99)
    collect_results(tmp_path / "rep", tmp_path / "results")
    files = cell_files(tmp_path / "results")
    assert table_result(TABLES.get("rt-table19"), files) is None
    (row,) = table_result(TABLES.get("clrs30"), files)["cells"]
    assert row["variant"] == "mpnn" and row["comparable"]


def test_the_larger_diagnostic_test_is_ten_times_the_protocols_but_at_most_4096_samples():
    from relreason.studies.results import diagnostic_test_num

    assert [diagnostic_test_num(n) for n in (32, 400, 1024, 2048, 5000)] == [320, 4000, 4096, 4096, 5000]


def test_model_selection_reads_the_validations_and_tests_the_last_checkpoint_once(tmp_path, monkeypatch):
    """The diagnostic beside the protocol: which validations reached the best score, the tested checkpoint
    the first of them, and the last checkpoint's score on the same test split (evaluated once, then read)."""
    from relreason.config import build_config
    from relreason.rundir import ValidationRow, read_metrics, read_results
    from relreason.studies.results import model_selection, validation_curve
    from relreason.train import evaluation, run

    # width 16: the larger test evaluates 320 graphs of n=64, twice (here and in model_selection), ~12 s each at 128
    cfg = build_config("mpnn", "bfs", "quick", ["train.train_examples=96", "train.eval_every_examples=16", "train.batch_size=8",
                                                 "data.val_num=4", "data.test_num=4", "train.threads=1",
                                                 "model.hidden=16"])
    out = run(cfg, out=tmp_path, name="r", show_progress=False, log=lambda m: None)
    vals = [r for r in read_metrics(out.run_dir / "metrics.jsonl") if isinstance(r, ValidationRow)]
    best = max(r.score for r in vals)
    record = model_selection(out.run_dir)
    assert record["validations"] == len(vals) == 7 and record["best_val"] == best
    assert record["at_best"] == sum(r.score == best for r in vals)
    assert record["first_best_examples"] == min(r.examples for r in vals if r.score == best) == \
        record["selected_examples"]  # the protocol keeps the first checkpoint that reached the best
    assert record["selected_test"] == out.test["score"] and record["last_examples"] == 96
    assert record["last_test"] == evaluation.evaluate_checkpoint(out.run_dir / "last")["score"]
    # the larger diagnostic test: the selected checkpoint on 10 x the benchmark's test samples, another seed
    larger = evaluation.evaluate_checkpoint(out.run_dir / "best", ood=out.test_size, num=320, seed=4)
    assert record["large_test"] == larger["score"] and record["large_test_label"] == larger["label"]
    assert "320 samples" in record["large_test_label"]
    curve = validation_curve(out.run_dir)
    assert [(p["examples"], p["score"]) for p in curve["validations"]] == [(r.examples, r.score) for r in vals]
    assert curve["code"] == read_results(out.run_dir).code and curve["code"][0]["source"]
    cached = tmp_path / "selection.json"
    cached.write_text(json.dumps(record))

    def refuse(*args, **kwargs):
        raise AssertionError("evaluated again although the record of this run was written")

    monkeypatch.setattr(evaluation, "evaluate_checkpoint", refuse)
    assert model_selection(out.run_dir, cached) == record
    cached.write_text(json.dumps({**record, "validations": 6}))  # another run's record: not reused
    with pytest.raises(AssertionError, match="evaluated again"):
        model_selection(out.run_dir, cached)


def test_a_run_that_tests_its_final_model_has_no_model_selection_to_report(tmp_path, monkeypatch):
    """train.select last: the tested checkpoint is the final one; no block says it was "the first that reached
    the best validation score", and nothing is evaluated for it."""
    from relreason.config import build_config
    from relreason.studies.results import model_selection
    from relreason.train import evaluation, run

    cfg = build_config("mpnn", "bfs", "quick", ["train.train_examples=32", "train.eval_every_examples=16",
                                                 "train.batch_size=8", "data.val_num=4", "data.test_num=4",
                                                 "model.hidden=8", "train.select=last"])
    out = run(cfg, out=tmp_path, name="r", show_progress=False, log=lambda m: None)
    monkeypatch.setattr(evaluation, "evaluate_checkpoint", lambda *a, **k: pytest.fail("evaluated"))
    assert out.best_examples == 32 and model_selection(out.run_dir) is None


def test_a_cell_shared_by_several_tables_is_shown_once_and_pointed_to(tmp_path):
    """The RT column of the ablation tables (13-17) is rt-table19's RT: its cell is one run, shown in full
    once; a later table that has no cell of its own says where it is, until its ablated column has one."""
    study = TABLES.get("rt-table19")
    (cell,) = plan_cells(study, ["bellman_ford"], (0,), None, tmp_path / "rep", [], ["rt"])
    _finish(cell, 0.96)
    collect_results(tmp_path / "rep", tmp_path / "results")
    assert write_report(tmp_path / "results", tmp_path / "RESULTS.md") == 1
    md = (tmp_path / "RESULTS.md").read_text()
    assert md.count("| bellman_ford | rt | 96.00 | 1 of 20 |") == 1
    assert ("## rt-table17: RT paper Table 17: RT with vs without edge updates\n\nIts finished cells so far "
            "(rt on bellman_ford) are shown under rt-table19; its other columns have none yet "
            "(`relreason reproduce rt-table17`).") in md
    (ablated,) = [c for c in plan_cells(TABLES.get("rt-table17"), ["bellman_ford"], (0,), None, tmp_path / "rep", [])
                  if c.run_dir != cell.run_dir]
    _finish(ablated, 0.90)
    collect_results(tmp_path / "rep", tmp_path / "results")
    assert write_report(tmp_path / "results", tmp_path / "RESULTS.md") == 2  # now a table of its own
    md = (tmp_path / "RESULTS.md").read_text()
    section = md.split("## rt-table17")[1].split("\n## ")[0]
    assert "| bellman_ford | rt | 96.00 |" in section and "90.00" in section


def test_a_cell_trained_before_a_protocol_setting_changed_names_that_setting():
    from relreason.studies.results_report import protocol_difference

    got, want = {"data": {"order": "seeded", "train_num": 1000}}, {"data": {"order": "sequential", "train_num": 1000}}
    assert protocol_difference("clrs30", "clrs30", got, want) == \
        'trained with data.order "seeded" where the protocol has "sequential"'
    assert protocol_difference("quick", "clrs30", got, want) == "recipe quick, not the paper's protocol"


def test_verify_re_trains_a_cells_first_validations_and_names_the_first_difference(tmp_path):
    from relreason.config import build_config
    from relreason.errors import RelreasonError
    from relreason.runtime import code_record
    from relreason.studies.results import validation_curve, verify_cell
    from relreason.train import run

    cfg = build_config("mpnn", "bfs", "quick", ["train.train_examples=64", "train.eval_every_examples=16",
                                                 "train.batch_size=8", "data.val_num=4", "data.test_num=4",
                                                 "train.threads=1", f"data.data_dir={tmp_path / 'data'}"])
    out = run(cfg, out=tmp_path, name="r", show_progress=False, log=lambda m: None)
    curve = validation_curve(out.run_dir)
    same = verify_cell(cfg, curve, 3, tmp_path / "v1")
    assert same["matches"] and same["difference"] is None and same["validations"] == 3
    assert same["code"] == code_record() and same["stored_code"] == curve["code"]
    # a committed curve the code no longer computes (here: its second validation's score changed)
    changed = {**curve, "validations": [dict(v) for v in curve["validations"]]}
    changed["validations"][1]["score"] += 0.25
    got = verify_cell(cfg, changed, 3, tmp_path / "v2")
    assert not got["matches"] and got["difference"].startswith("validation at 16 examples:")
    changed = {**curve, "validations": [dict(v) for v in curve["validations"]]}
    changed["validations"][2]["loss"] *= 1.01  # beyond the 1e-4 rounding a loss may carry across machines
    assert verify_cell(cfg, changed, 3, tmp_path / "v3")["difference"].startswith("training loss at 32 examples")
    assert verify_cell(cfg, curve, 3, tmp_path / "v1")["matches"]  # again in the same place: re-trained afresh
    with pytest.raises(RelreasonError, match="--verify-validations 1"):
        verify_cell(cfg, curve, 1, tmp_path / "v4")


def test_reproduce_verify_needs_a_committed_curve(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["reproduce", "clrs30", "--models", "mpnn", "--tasks", "bfs", "--seeds", "1",
                                   "--verify"])
    assert res.exit_code == 1 and "has a committed validation curve" in res.output and "Traceback" not in res.output


def test_reproduce_counts_cells_committed_under_the_same_config_as_done(tmp_path, monkeypatch):
    """`reproduce --committed results`: a fresh checkout (no reproduce/) trains only the cells that results/
    does not hold under the cell's config; the committed ones are read from there into the table."""
    import relreason.studies.sweep as sweep

    study = TABLES.get("ibarz2022")
    for cell, score in zip(plan_cells(study, ["bellman_ford"], (0, 1, 2), None, tmp_path / "rep1", []),
                           (0.97, 0.98, 0.99)):
        _finish(cell, score)
    collect_results(tmp_path / "rep1", tmp_path / "results")
    # seed 2's committed result was computed under another budget: not this cell, so it trains again
    other = tmp_path / "results" / "cells" / "triplet_gmpnn" / "triplet_gmpnn" / "bellman_ford" / "seed2.json"
    data = json.loads(other.read_text())
    data["config"]["train"]["train_examples"] = 1000
    other.write_text(json.dumps(data))
    trained, logs = [], []
    monkeypatch.setattr(sweep, "run_cells", lambda name, todo, *a, **k: trained.extend(c.seed for g in todo for c in g))

    options = sweep.SweepOptions(tasks="bellman_ford", seeds=(0, 1, 2, 3), out=tmp_path / "rep2",
                                 committed=tmp_path / "results")
    done = sweep.run_table("ibarz2022", options, log=logs.append)
    assert trained == [2, 3]
    assert any("2 cell(s) already committed under" in m for m in logs), logs
    assert [(r["seed"], r["score"]) for r in done.result["cells"]] == [(0, 0.97), (1, 0.98)]
    assert done.result["cells"][0]["run"].endswith("results/cells/triplet_gmpnn/triplet_gmpnn/bellman_ford/seed0")
    assert not (tmp_path / "rep2" / "cells" / "triplet_gmpnn" / "triplet_gmpnn" / "bellman_ford" / "seed0").exists()

    trained.clear()  # without --committed every unfinished cell trains, as before
    sweep.run_table("ibarz2022", sweep.SweepOptions(tasks="bellman_ford", seeds=(0, 1, 2, 3), out=tmp_path / "rep3"),
                    log=logs.append)
    assert trained == [0, 1, 2, 3]


def test_a_committed_cell_retrained_in_part_is_not_shown_in_progress(tmp_path):
    """A fresh work tree that started a committed cell over (before --committed kept it) leaves a checkpoint
    of it: the cell is finished in results/, so it is not listed as in progress, and a stale listing goes."""
    study = TABLES.get("ibarz2022")
    (cell,) = plan_cells(study, ["bellman_ford"], (0,), None, tmp_path / "rep1", [])
    _finish(cell, 0.97)
    collect_results(tmp_path / "rep1", tmp_path / "results")
    (again,) = plan_cells(study, ["bellman_ford"], (0,), None, tmp_path / "rep2", [])
    (again.run_dir / "last").mkdir(parents=True)
    (again.run_dir / "last" / "trainer_state.json").write_text(json.dumps(
        {"step": 30, "examples": 960, "best_val": 0.5, "best_examples": 640, "seconds": 18.0, "hardware": ["Test CPU"]}))
    (again.run_dir / "config.json").write_text(json.dumps({"relreason": "0.1.0", "config": again.config.to_dict(),
                                                           "command": "c"}))
    listed = tmp_path / "results" / "progress" / "triplet_gmpnn" / "triplet_gmpnn" / "bellman_ford" / "seed0.json"
    listed.parent.mkdir(parents=True)
    listed.write_text("{}")
    assert collect_results(tmp_path / "rep2", tmp_path / "results") == []
    assert not listed.exists()
    # under another config it is a different cell in progress
    cfg = again.config.to_dict()
    cfg["train"]["train_examples"] = 1000
    (again.run_dir / "config.json").write_text(json.dumps({"relreason": "0.1.0", "config": cfg, "command": "c"}))
    assert collect_results(tmp_path / "rep2", tmp_path / "results") == [listed]


def test_the_summary_opens_the_report_with_each_columns_cells_average_verdict_device_and_compute(tmp_path):
    study = TABLES.get("ibarz2022")
    for cell, score in zip(plan_cells(study, ["bellman_ford"], (0, 1, 2), None, tmp_path / "rep", []), (0.97, 0.975, 0.98)):
        _finish(cell, score, seconds=1800.0)
    collect_results(tmp_path / "rep", tmp_path / "results")
    verify = tmp_path / "results" / "verify" / "triplet_gmpnn" / "triplet_gmpnn" / "bellman_ford"
    verify.mkdir(parents=True)
    code = {"commit": "0" * 40, "dirty": False, "source": "s", "version": "0.1.0"}
    for seed, matches in ((0, True), (1, False)):  # seed 2 not verified yet
        (verify / f"seed{seed}.json").write_text(json.dumps({"code": code, "matches": matches, "validations": 3,
                                                             "difference": None if matches else "validation at 32"}))
    write_report(tmp_path / "results", tmp_path / "RESULTS.md")
    assert "| 1 of 3; 1 differs | " in (tmp_path / "RESULTS.md").read_text()
    (verify / "seed1.json").write_text(json.dumps({"code": code, "matches": False, "validations": 3, "made_on": "cuda",
                                                   "device": "cpu", "difference": "validation at 32"}))
    write_report(tmp_path / "results", tmp_path / "RESULTS.md")  # a GPU cell that differs on the CPU: said so
    md = (tmp_path / "RESULTS.md").read_text()
    assert md.index("## Summary") < md.index("## ibarz2022")
    # 3 comparable cells of 30 tasks x the paper's 10 seeds; one task compares, so its row's figures (see the
    # test above: 97.50 against 97.39, inconclusive at ±1); one verified the same, one differing; one device;
    # 3 x 30 minutes
    assert ("| ibarz2022 | triplet-gmpnn | 3 of 300 | 97.50 over 1 task | 97.39 ± 0.19 (± undefined, 10 seeds) "
            "| inconclusive | 1 of 3; 1 differs (1 re-trained on another device kind than made it) "
            "| Test CPU (2 cores), cpu | 1.50 h |") in md


def test_a_cell_whose_code_is_not_recorded_stands_apart_and_is_trained_again(tmp_path, monkeypatch):
    """A cell written before cells recorded their code cannot be verified: out of every table and average, in a
    section of its own, and `reproduce --committed` trains it again."""
    import relreason.studies.sweep as sweep

    study = TABLES.get("ibarz2022")
    cells = plan_cells(study, ["bellman_ford"], (0, 1), None, tmp_path / "rep", [])
    _finish(cells[0], 0.97)
    cfg = cells[1].config.to_dict()
    cells[1].run_dir.mkdir(parents=True)
    (cells[1].run_dir / "results.json").write_text(results_json(cfg, 0.5, code=None, hardware=["Old CPU"]))
    collect_results(tmp_path / "rep", tmp_path / "results")
    write_report(tmp_path / "results", tmp_path / "RESULTS.md")
    md = (tmp_path / "RESULTS.md").read_text()
    table = md[md.index("## ibarz2022"):md.index("## Cells whose code is not recorded")]
    assert "| bellman_ford | triplet-gmpnn | 97.00 | 1 of 10 |" in table and "50.00" not in table
    assert "| triplet_gmpnn | triplet_gmpnn | bellman_ford | 1 | 50.00 | 0.0 min | Old CPU |" in md
    trained = []
    monkeypatch.setattr(sweep, "run_cells", lambda name, todo, *a, **k: trained.extend(c.seed for g in todo for c in g))
    sweep.run_table("ibarz2022", sweep.SweepOptions(tasks="bellman_ford", seeds=(0, 1), out=tmp_path / "rep2",
                                                    committed=tmp_path / "results"), log=lambda m: None)
    assert trained == [1]


def test_results_writes_readmes_summary_between_its_markers_and_nothing_else(tmp_path):
    from relreason.studies.results_report import README_MARKERS

    study = TABLES.get("ibarz2022")
    (cell,) = plan_cells(study, ["bellman_ford"], (0,), None, tmp_path / "rep", [])
    _finish(cell, 0.97)
    collect_results(tmp_path / "rep", tmp_path / "results")
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\nbefore\n{README_MARKERS[0]}\nstale figure 12.34\n{README_MARKERS[1]}\nafter\n")
    write_report(tmp_path / "results", tmp_path / "RESULTS.md")
    text = readme.read_text()
    assert text.startswith(f"# x\n\nbefore\n{README_MARKERS[0]}\n| table | column | cells done |")
    assert text.endswith(f"{README_MARKERS[1]}\nafter\n") and "stale figure" not in text
    assert "| ibarz2022 | triplet-gmpnn | 1 of 300 |" in text
    unmarked = "# y\nno markers here\n"
    readme.write_text(unmarked)
    write_report(tmp_path / "results", tmp_path / "RESULTS.md")
    assert readme.read_text() == unmarked


def test_the_lobster_table_compares_relative_losses_lower_is_better(tmp_path):
    """rt-lobster: the RT paper's end-to-end study in its unit (relative loss, lower is better, no x100), one seed
    per model gets the difference to the paper's figure and no verdict."""
    study = TABLES.get("rt-lobster")
    assert {v.model: v.recipe for v in study.variants} == {"rt": "lobster_rt", "gat": "lobster_gat",
                                                          "gcn": "lobster_gcn"}
    for cell, loss in zip(plan_cells(study, ["lobster"], (0,), None, tmp_path / "rep", []), (0.25, 0.30, 0.40)):
        cell.run_dir.mkdir(parents=True)  # a lobster config has backbone sizes, not test_size: the size given
        (cell.run_dir / "results.json").write_text(results_json(
            cell.config.to_dict(), loss, test_size=100, metric="relative_loss", lower_is_better=True,
            hardware=["Test CPU (2 cores), 1 torch thread, cpu"]))
    collect_results(tmp_path / "rep", tmp_path / "results")
    assert write_report(tmp_path / "results", tmp_path / "RESULTS.md") == 1
    md = (tmp_path / "RESULTS.md").read_text()
    assert "| lobster | rt | 0.25 | 1 of 20 | 0.22 (20 seeds) | +0.03 | - | no verdict: one seed of ours" in md
    assert "| lobster | gcn | 0.40 | 1 of 20 | 0.45 (20 seeds) | -0.05 | - | no verdict: one seed of ours" in md
    assert "Verdict margin: ±0.02 (relative loss)." in md


def test_the_nars_a_study_reads_are_shown_under_it_with_their_scores_compute_and_verification(tmp_path):
    """The TransNAR study's NAR cells stand in none of its comparisons, but they are cells: RESULTS.md shows
    them under the study (per algorithm their best validation and test over seeds, then each cell with the
    `train` command that re-makes it alone) and the summary counts them, verified ones and compute included."""
    study = TABLES.get("transnar-ood")
    cells = plan_cells(study, ["text:bfs"], (0, 1), None, tmp_path / "rep", [])
    nars = nar_cells(cells)
    assert [n.seed for n in nars] == [0, 1]
    for nar, (best, score) in zip(nars, ((1.0, 0.99), (0.98, 0.97))):
        cfg = nar.config.to_dict()
        cfg["train"]["threads"] = 1
        nar.run_dir.mkdir(parents=True)
        (nar.run_dir / "results.json").write_text(results_json(
            cfg, score, seconds=300.0, best_val=best, test_label="test, n=64, 32 samples",
            hardware=["Test CPU (2 cores), 1 torch thread, cpu"]))
    text = next(c for c in cells if c.variant.label == "text transformer" and c.seed == 0)
    text.run_dir.mkdir(parents=True)
    (text.run_dir / "results.json").write_text(results_json(text.config.to_dict(), 0.4, test_size=12))
    collect_results(tmp_path / "rep", tmp_path / "results")
    verify = tmp_path / "results" / "verify" / "triplet_gmpnn" / "transnar_ood_nar" / "bfs"
    verify.mkdir(parents=True)
    (verify / "seed0.json").write_text(json.dumps({"code": {"commit": "1" * 40, "dirty": False, "source": "s"},
                                                   "matches": True, "validations": 3, "difference": None}))
    write_report(tmp_path / "results", tmp_path / "RESULTS.md")
    md = (tmp_path / "RESULTS.md").read_text()
    section = md[md.index("## transnar-ood"):]
    # best validations 100 and 98 (99.00 ± 1.41), tests 99 and 97 (98.00 ± 1.41), at the validation's n=16
    assert ("| bfs | triplet-gmpnn nar | 2 | 99.00 ± 1.41 | n=16 | 98.00 ± 1.41 | test, n=64, 32 samples |"
            in section), section
    assert ("| triplet-gmpnn nar | bfs | 1 | 97.00 | 5.0 min | Test CPU (2 cores), 1 torch thread, cpu | "
            "`relreason train triplet_gmpnn bfs --recipe transnar_ood_nar --set train.seed=1 --set train.threads=1` "
            "|") in section
    assert "| triplet-gmpnn nar | bfs | 0 | 99.00 |" in section and "same first 3 validations with 111111111" in section
    assert "| text:bfs | text transformer | 40.00 | 1 of 3 |" in section  # the study's own 3 seeds planned
    summary = md[md.index("## Summary"):md.index("## transnar-ood")]
    assert "| transnar-ood | triplet-gmpnn nar | 2 of 12 | - | - | - | 1 of 2 | Test CPU (2 cores), cpu | 10.0 min |" \
        in summary, summary


def test_a_nar_cell_trained_otherwise_than_its_protocol_is_marked_so(tmp_path):
    study = TABLES.get("transnar-ood")
    cells = plan_cells(study, ["text:bfs"], (0,), None, tmp_path / "rep", [])
    (nar,) = nar_cells(cells)
    cfg = nar.config.to_dict()
    cfg["train"]["train_examples"] = 4800
    nar.run_dir.mkdir(parents=True)
    (nar.run_dir / "results.json").write_text(results_json(cfg, 0.9, best_val=0.95))
    text = next(c for c in cells if c.variant.label == "text transformer")
    text.run_dir.mkdir(parents=True)
    (text.run_dir / "results.json").write_text(results_json(text.config.to_dict(), 0.4, test_size=12))
    collect_results(tmp_path / "rep", tmp_path / "results")
    write_report(tmp_path / "results", tmp_path / "RESULTS.md")
    md = (tmp_path / "RESULTS.md").read_text()
    assert ("| bfs | triplet-gmpnn nar | 1 | 95.00 | n=16 | 90.00 (not the protocol: trained with train.train_examples "
            "4800 where the protocol has 9600) |") in md, md[md.index("The NARs"):]
    assert "| transnar-ood | triplet-gmpnn nar | 0 of 12; 1 not comparable |" in md


def test_the_summary_states_a_text_studys_claim_averaged_over_its_algorithms(tmp_path):
    """Once some algorithm has two seeds in both columns, the summary (and README's copy) closes with the
    study's claim: TransNAR minus the text transformer averaged over those algorithms, CLRS per distribution
    class with Welch's interval (hand: bfs +30 and insertion_sort +0 at n=14, mean +15; see the distribution table's
    average test in tests/studies/test_transnar_ood.py for the interval)."""
    study = TABLES.get("transnar-ood")
    cells = plan_cells(study, ["text:bfs", "text:insertion_sort"], (0, 1), None, tmp_path / "rep", [])
    clrs = {("transnar", "bfs"): (0.70, 0.71), ("text transformer", "bfs"): (0.40, 0.41),
            ("transnar", "insertion_sort"): (0.50, 0.52), ("text transformer", "insertion_sort"): (0.50, 0.52)}
    for c in cells:
        algorithm = c.task.removeprefix("text:")
        x = clrs[c.variant.label, algorithm][c.seed]
        per_task = {f"{algorithm}@14": {"algorithm": algorithm, "size": 14,
                                        "outputs": {"shape": 1.0, "parse": 1.0, "clrs": x}}}
        c.run_dir.mkdir(parents=True)
        (c.run_dir / "results.json").write_text(results_json(c.config.to_dict(), x, test_size=14, per_task=per_task))
    collect_results(tmp_path / "rep", tmp_path / "results")
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- results-summary: written by `relreason results`; do not edit -->\n"
                      "<!-- /results-summary -->\nrest\n")
    write_report(tmp_path / "results", tmp_path / "RESULTS.md")
    md = (tmp_path / "RESULTS.md").read_text()
    summary = md[md.index("## Summary"):md.index("## transnar-ood")]
    line = ("transnar-ood, transnar minus text transformer, average (2: bfs, insertion_sort), CLRS: OOD, extrapolation (n=14) "
            "+15.0 [+12.5, +17.5] higher.")
    assert line in summary, summary
    assert line in readme.read_text() and readme.read_text().endswith("<!-- /results-summary -->\nrest\n")


@pytest.mark.parametrize("name", TABLES.names())
def test_each_cells_remake_command_selects_its_column(name, tmp_path):
    """RESULTS.md's per-cell command names the column by `--models`: its model, or its label where another column
    has the same model (TransNAR's study: `--models 'text transformer'` re-makes that column's cell alone, where
    `--models transnar` would re-make both). Read back as `reproduce` reads it, it selects the column."""
    import shlex

    from relreason.studies.results_report import remake_models
    from relreason.tasks import expand_tasks

    study = TABLES.get(name)
    task = expand_tasks(study.tasks)[0]
    for v in study.variants:
        picked = {c.variant.label for c in plan_cells(study, [task], (0,), out=tmp_path,
                                                      models=shlex.split(remake_models(study, v)))}
        assert v.label in picked
        if sum(w.model == v.model for w in study.variants) > 1 and v.label != v.model:
            assert picked == {v.label}
