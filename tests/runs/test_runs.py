"""Run discovery, status, fallbacks and seed aggregation (relreason.runs) on synthetic run folders."""

from __future__ import annotations

import csv
import io
import json
import statistics

import pytest
from fake_runs import dead_pid, live_lock, make_ablation, make_run, write_json

from relreason.errors import RelreasonError
from relreason.eval.metric_kinds import METRICS, resolve_metric
from relreason.runs.comparison import Cell, GroupBy, compare
from relreason.runs.discovery import discover_runs, load_runs
from relreason.runs.grouping import group_runs
from relreason.runs.records import Status, read_run
from relreason.runs.run_tables import render_comparison, run_rows
from relreason.runs.stats import Summary as Stat


def registry_metric(task):
    return ("relative_loss", True) if task.startswith("lobster") else ("clrs", False)


def test_discovery_finds_runs_and_ablation_cells_not_checkpoints(tmp_path):
    make_run(tmp_path / "runs", "a", mtime=1000)
    make_run(tmp_path / "runs", "nested/b", mtime=3000)
    make_ablation(tmp_path / "runs", "abl", {("rt", "bfs"): [0.5]})
    (tmp_path / "runs" / "a" / ".last.x.tmp").mkdir()  # a checkpoint being written
    write_json(tmp_path / "runs" / "a" / ".last.x.tmp" / "config.json", {"config": {}})
    runs = discover_runs(tmp_path / "runs")
    names = [r.name for r in runs]
    assert sorted(names) == ["a", "abl/rt/bfs/seed0/run", "nested/b"]
    assert names.index("nested/b") < names.index("a")  # newest first
    cell = next(r for r in runs if r.name.startswith("abl"))
    assert (cell.ablation, cell.variant, cell.model, cell.seed) == ("abl", "rt", "rt", 0)


def test_a_run_folder_given_directly_is_listed_under_its_own_name(tmp_path):
    d = make_run(tmp_path, "solo")
    assert [r.name for r in discover_runs(d)] == ["solo"]


@pytest.mark.parametrize("lock, status", [
    (None, Status.INTERRUPTED),
    ("live", Status.RUNNING),
    ("dead", Status.INTERRUPTED),
    ("elsewhere", Status.INTERRUPTED),  # a record nobody holds: another host's finished process
    ("pid0", Status.INTERRUPTED),
])
def test_status_of_unfinished_runs_follows_the_lock(tmp_path, lock, status):
    locks = {None: None, "live": live_lock(), "dead": {**live_lock(), "pid": dead_pid()},
             "elsewhere": {**live_lock(), "host": "not-" + live_lock()["host"]}, "pid0": {**live_lock(), "pid": 0}}
    d = make_run(tmp_path, "r", finished=False, lock=locks[lock])
    assert read_run(d).status is status


def test_finished_wins_over_a_live_lock_and_a_corrupt_lock_is_not_running(tmp_path):
    assert read_run(make_run(tmp_path, "f", lock=live_lock())).status is Status.FINISHED
    d = make_run(tmp_path, "c", finished=False)
    (d / ".lock").write_text("{not json")
    assert read_run(d).status is Status.INTERRUPTED


def test_unfinished_run_reports_progress_from_its_validations(tmp_path):
    d = make_run(tmp_path, "r", vals=(0.2, 0.9, 0.4), finished=False, every=100)
    with open(d / "metrics.jsonl", "a") as f:
        f.write('{"event": "val", "exam')  # a line cut by a kill
    r = read_run(d, metric_of=registry_metric)
    assert (r.examples, r.best_val, r.best_examples, r.test) == (200, 0.9, 100, None)


def test_lower_is_better_picks_the_minimum_while_running(tmp_path):
    d = make_run(tmp_path, "r", task="lobster", vals=(0.9, 0.3, 0.5), finished=False, every=10)
    r = read_run(d, metric_of=registry_metric)
    assert r.metric.name == "relative_loss" and (r.best_val, r.best_examples) == (0.3, 10)


def test_metric_fallbacks(tmp_path):
    recorded = read_run(make_run(tmp_path, "new", task="lobster", metric="relative_loss"))
    assert recorded.metric.name == "relative_loss" and recorded.metric.lower_is_better
    old = make_run(tmp_path, "old", task="lobster", metric=None)
    assert read_run(old, metric_of=registry_metric).metric == METRICS.get("relative_loss")
    unknown = read_run(old)  # no record and no registry: said so, never guessed
    assert unknown.metric.name == "unknown" and unknown.metric.lower_is_better is None
    assert "direction unknown" in unknown.metric.describe()
    assert resolve_metric("new_metric", True).describe() == "new_metric, lower is better"


def test_missing_and_corrupt_files_give_fallbacks_not_crashes(tmp_path):
    d = make_run(tmp_path, "no-config", seed=3)
    (d / "config.json").unlink()
    r = read_run(d)  # results.json alone still says what the run was
    assert (r.model, r.task, r.seed, r.status) == ("mpnn", "bfs", 3, Status.FINISHED)
    d = make_run(tmp_path, "bad-results")
    (d / "results.json").write_text("{cut")
    r = read_run(d)
    assert r.status is Status.FINISHED and r.test is None and any("results.json is corrupt" in p for p in r.problems)
    d = make_run(tmp_path, "bare", finished=False)
    (d / "metrics.jsonl").unlink()
    r = read_run(d)
    assert (r.examples, r.best_val) == (None, None)
    assert run_rows([r])[0]["best val"] == "-"


def test_not_a_run_directory(tmp_path):
    make_run(tmp_path / "runs", "a")
    with pytest.raises(RelreasonError, match="not a run directory") as e:
        read_run(tmp_path / "runs")
    assert "--runs" in e.value.hint  # it holds runs: say how to use them
    with pytest.raises(RelreasonError, match="not a run directory"):
        read_run(tmp_path / "runs" / "a" / "best")  # a checkpoint
    with pytest.raises(RelreasonError, match="not a run directory"):
        read_run(tmp_path / "missing")


def test_no_runs_found(tmp_path):
    with pytest.raises(RelreasonError, match="no runs found"):
        discover_runs(tmp_path)
    with pytest.raises(RelreasonError, match="not a directory"):
        discover_runs(tmp_path / "missing")


def test_load_runs_counts_each_directory_once(tmp_path):
    a = make_run(tmp_path / "runs", "a")
    make_run(tmp_path / "runs", "b")
    runs = load_runs([a, str(a) + "/"], tmp_path / "runs")
    assert sorted(r.path.name for r in runs) == ["a", "b"]


@pytest.mark.parametrize("scores", [(0.8, 0.9), (0.7, 0.8, 0.95), (0.6,)])
def test_seeds_aggregate_as_mean_and_sample_std(tmp_path, scores):
    for seed, s in enumerate(scores):
        make_run(tmp_path, f"mpnn-bfs-s{seed}", seed=seed, test=s)
    groups, _ = group_runs(discover_runs(tmp_path))
    (g,) = groups
    assert g.test.n == len(scores) and g.seeds == list(range(len(scores)))
    assert g.test.mean == pytest.approx(statistics.fmean(scores))
    assert g.test.std == (pytest.approx(statistics.stdev(scores)) if len(scores) > 1 else None)  # ddof 1
    text = Cell(g.test, g.metric).text()
    want = f"{statistics.fmean(scores) * 100:.2f}"
    assert text == (want if len(scores) == 1 else f"{want} ± {statistics.stdev(scores) * 100:.2f}")


def test_refuses_to_average_different_metrics(tmp_path):
    make_run(tmp_path, "a", seed=0, metric="clrs")
    make_run(tmp_path, "b", seed=1, metric="text_clrs")
    with pytest.raises(RelreasonError, match="different metrics"):
        compare(discover_runs(tmp_path))


def test_ablation_variants_of_one_model_are_not_averaged_together(tmp_path):
    abl = make_ablation(tmp_path, "no-edge-updates", {("rt", "bfs"): [0.8, 0.9],
                                                      ("rt without edge updates", "bfs"): [0.4, 0.6]})
    make_run(abl / "rt" / "dfs" / "seed0", "run", model="rt", task="dfs", finished=False)  # still training
    groups, _ = group_runs(discover_runs(abl))
    by = {(g.label, g.task): g for g in groups}
    assert set(by) == {("rt", "bfs"), ("rt_without_edge_updates", "bfs"), ("rt", "dfs")}  # one name per variant
    assert by["rt", "bfs"].test.mean == pytest.approx(0.85)
    assert by["rt_without_edge_updates", "bfs"].test.mean == pytest.approx(0.5)
    cmp = compare(discover_runs(abl), "task")
    assert cmp.columns == ["task", "rt", "rt_without_edge_updates"]
    assert [r["task"] for r in cmp.rows] == ["bfs", "dfs"]  # no average: dfs has no test yet


def test_same_variant_name_with_different_configs_is_told_apart(tmp_path):
    make_ablation(tmp_path, "one", {("rt", "bfs"): [0.8]})
    make_ablation(tmp_path, "two", {("rt", "bfs"): [0.6]})
    d = tmp_path / "two" / "rt" / "bfs" / "seed0" / "run"
    meta = json.loads((d / "config.json").read_text())
    meta["config"]["processor"]["layers"] = 1
    write_json(d / "config.json", meta)
    labels = sorted(g.label for g in group_runs(discover_runs(tmp_path))[0])
    assert labels == ["rt: processor.layers=1", "rt: processor.layers=3"]


def test_settings_outside_ablations_are_named_by_their_config_difference(tmp_path):
    make_run(tmp_path, "a", processor={"layers": 3}, test=0.8)
    make_run(tmp_path, "b", processor={"layers": 1}, test=0.6, seed=1)
    labels = sorted(g.label for g in group_runs(discover_runs(tmp_path))[0])
    assert labels == ["mpnn [processor.layers=1]", "mpnn [processor.layers=3]"]


def test_seed_device_and_data_dir_do_not_split_a_setting(tmp_path):
    make_run(tmp_path, "a", seed=0)
    d = make_run(tmp_path, "b", seed=1)
    meta = json.loads((d / "config.json").read_text())
    meta["config"]["train"]["device"] = "cuda"
    meta["config"]["data"]["data_dir"] = "/elsewhere"
    write_json(d / "config.json", meta)
    assert len(group_runs(discover_runs(tmp_path))[0]) == 1


def fleet(tmp_path):
    """mpnn and rt on bfs and dfs, two seeds each; rt on dfs has only seed 0 finished."""
    scores = {("mpnn", "bfs"): (0.5, 0.7), ("rt", "bfs"): (0.8, 0.9), ("mpnn", "dfs"): (0.2, 0.4),
              ("rt", "dfs"): (0.6, None)}
    for (model, task), per_seed in scores.items():
        for seed, s in enumerate(per_seed):
            make_run(tmp_path, f"{model}-{task}-s{seed}", model=model, task=task, seed=seed, test=s,
                     finished=s is not None)
    return discover_runs(tmp_path)


def test_long_table_labels_metric_and_direction(tmp_path):
    cmp = compare(fleet(tmp_path))
    test_col = "OOD test (accuracy/F1 %, higher is better)"
    assert test_col in cmp.columns and "sample std" in cmp.title
    rows = {(r["model"], r["task"]): r for r in cmp.rows}
    assert rows["rt", "bfs"][test_col].text() == "85.00 ± 7.07 (n=2)"
    assert rows["rt", "dfs"][test_col].text() == "60.00 (n=1)"  # seeds differ between rows: n shown
    assert rows["rt", "dfs"]["finished"] == "1/2"
    assert any("unfinished" in n and "rt-dfs-s1" in n for n in cmp.notes)


def test_group_by_task_puts_models_side_by_side_with_the_papers_average(tmp_path):
    cmp = compare(fleet(tmp_path), GroupBy.TASK)
    assert cmp.columns == ["task", "mpnn", "rt"]
    rows = {r["task"]: r for r in cmp.rows}
    assert list(rows) == ["bfs", "dfs", "average"]
    assert rows["average"]["mpnn"].stat.mean == pytest.approx((0.6 + 0.3) / 2)  # mean of the task means
    assert "accuracy/F1 %, higher is better" in cmp.title


def test_group_by_model_and_seed(tmp_path):
    runs = fleet(tmp_path)
    by_model = compare(runs, "model")
    assert by_model.columns == ["model", "bfs", "dfs", "average"]
    assert [r["model"] for r in by_model.rows] == ["mpnn", "rt"]
    by_seed = compare(runs, "seed")
    assert [r["seed"] for r in by_seed.rows] == ["0", "1", "mean ± std"]
    assert by_seed.rows[1]["rt / dfs"].text() == "-"  # seed 1 of rt on dfs has no test yet


def test_mixed_metrics_get_a_metric_column_and_no_average(tmp_path):
    make_run(tmp_path, "a", task="bfs", test=0.5)
    make_run(tmp_path, "b", task="lobster", test=0.25, metric="relative_loss")
    cmp = compare(discover_runs(tmp_path), "task")
    assert "metric" in cmp.columns and "average" not in [r["task"] for r in cmp.rows]
    assert {r["metric"] for r in cmp.rows} == {"accuracy/F1 %, higher is better", "relative loss, lower is better"}
    assert {r["mpnn"].text() for r in cmp.rows} == {"50.00", "0.2500"}  # percent vs the loss itself


def test_multi_task_runs_count_per_task(tmp_path):
    make_run(tmp_path, "generalist", task="core2", test=None,
             per_task={"bfs": {"score": 0.9}, "dfs": {"score": 0.3, "metric": "clrs"}})
    cmp = compare(discover_runs(tmp_path, registry_metric), "task")
    rows = {r["task"]: r["mpnn"].text() for r in cmp.rows}
    assert rows == {"bfs": "90.00", "dfs": "30.00", "average": "60.00"}


@pytest.mark.parametrize("bad, kind", [("nodel", "group_by"), ("xlsx", "fmt")])
def test_unknown_group_by_and_format(tmp_path, bad, kind):
    runs = fleet(tmp_path)
    with pytest.raises(RelreasonError, match="unknown"):
        if kind == "group_by":
            compare(runs, bad)
        else:
            render_comparison(compare(runs), bad)


def test_renderings(tmp_path):
    cmp = compare(fleet(tmp_path), "task")
    md = render_comparison(cmp, "md")
    assert "sample std" in md and "| bfs | 60.00 ± 14.14 (n=2) | 85.00 ± 7.07 (n=2) |" in md
    latex = render_comparison(cmp, "latex")
    assert r"$\pm$" in latex and r"\begin{tabular}" in latex
    rows = list(csv.DictReader(io.StringIO(render_comparison(cmp, "csv"))))
    assert rows[0]["task"] == "bfs" and float(rows[0]["rt mean"]) == pytest.approx(85.0)
    assert float(rows[0]["rt std"]) == pytest.approx(7.07107, abs=1e-4)
    data = json.loads(render_comparison(cmp, "json"))
    assert data["std"] == "sample (ddof=1)" and len(data["groups"]) == 4


def test_stat_ignores_missing_values():
    s = Stat.of([0.5, None, float("nan"), 0.7])
    assert s.n == 2 and s.mean == pytest.approx(0.6)


def test_kernel_only_options_pool_seeds_and_protocol_keys_do_not(tmp_path):
    """The ET's chunk size and compiled kernels compute the same maths: runs that differ only there are
    seeds of one setting. A protocol key (the number of layers) makes another setting."""
    make_run(tmp_path, "et-s0", model="et", seed=0, test=0.5, processor={"layers": 3, "chunk_mb": 128})
    make_run(tmp_path, "et-s1", model="et", seed=1, test=0.7,
             processor={"layers": 3, "chunk_mb": 16, "compiled_kernels": False})
    groups, _ = group_runs(discover_runs(tmp_path))
    (g,) = groups
    assert g.seeds == [0, 1] and g.test.mean == pytest.approx(0.6) and g.label == "et"
    make_run(tmp_path, "et-2layers", model="et", seed=2, test=0.9, processor={"layers": 2, "chunk_mb": 128})
    groups, _ = group_runs(discover_runs(tmp_path))
    assert sorted((g.label, g.seeds) for g in groups) == [("et [processor.layers=2]", [2]),
                                                          ("et [processor.layers=3]", [0, 1])]


def test_against_judges_each_column_by_the_comparison_every_table_uses(tmp_path):
    """`compare --against`: the difference from the reference column, Welch's interval and the verdict, the same
    numbers relreason.runs.stats.difference gives the tables of `reproduce`, `ablate` and RESULTS.md."""
    from relreason.runs.stats import Figure, Spread, Summary, difference

    for model, scores in (("mpnn", (0.90, 0.91, 0.92, 0.93)), ("rt", (0.905, 0.915, 0.925, 0.935)),
                          ("gat", (0.60,))):
        for seed, s in enumerate(scores):
            make_run(tmp_path, f"{model}-bfs-s{seed}", model=model, task="bfs", seed=seed, test=s)
    cmp = compare(discover_runs(tmp_path), "task", against="mpnn")
    assert cmp.columns == ["task", "gat", "gat − mpnn", "mpnn", "rt", "rt − mpnn"]
    (row,) = cmp.rows
    # rt - mpnn = +0.50 points; both ± 1.29 over 4 (v = 1.6667 / 4 each), df = 6: half 2.446912 x sqrt(0.8333) = 2.234
    want = difference(Summary((90.5, 91.5, 92.5, 93.5)), Figure(91.5, Summary((90., 91., 92., 93.)).std, 4,
                                                                Spread.STD), 1.0)
    assert want.df == pytest.approx(6.0) and want.interval[1] - 0.5 == pytest.approx(2.2337, abs=1e-4)
    assert row["rt − mpnn"] == f"+0.50 {want.interval_text()}: inconclusive"
    assert row["rt − mpnn"] == "+0.50 [-1.73, +2.73], df 6.0: inconclusive"
    assert row["gat − mpnn"] == "-31.50 (one seed: the difference is not meaningful)"  # one seed: no verdict
    wide = compare(discover_runs(tmp_path), "task", against="mpnn", margin=3.0)
    assert wide.rows[0]["rt − mpnn"].endswith(": agrees") and "±3" in wide.title
    assert [d["verdict"] for d in wide.differences] == [None, "agrees"]
    with pytest.raises(RelreasonError, match="not a column"):
        compare(discover_runs(tmp_path), "task", against="transformer")
    with pytest.raises(RelreasonError, match="add --group-by task"):
        compare(discover_runs(tmp_path), against="mpnn")


def test_a_non_finite_score_is_flagged_and_json_stays_json(tmp_path):
    """1e309 reads back as infinity: results.json is flagged (the score dropped), and `runs --json` prints
    JSON any reader parses (no Infinity or NaN)."""
    from typer.testing import CliRunner

    from relreason.cli.main import app

    d = make_run(tmp_path, "inf")
    text = (d / "results.json").read_text()
    (d / "results.json").write_text(text.replace('"score": 0.5', '"score": 1e309', 1))
    r = read_run(d)
    assert r.status is Status.FINISHED and r.test is None
    assert r.problems == ["results.json: field 'test.score' must be a finite number, not Infinity"]
    cli = CliRunner().invoke(app, ["runs", str(tmp_path), "--json"])
    assert cli.exit_code == 0, cli.output

    def refuse(constant):
        raise AssertionError(f"{constant} is not JSON")

    listed = json.loads(cli.stdout, parse_constant=refuse)["runs"][0]
    assert listed["test"] is None and listed["problems"] == r.problems
