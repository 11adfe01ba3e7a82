"""The run directory defined once (relreason.rundir): its records round-trip, results.json files
without a schema version (the first committed result files) read as version 1, a bad field is one line
naming the file and the field, and a real training writes exactly what the module reads."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from relreason.cli.main import app
from relreason.errors import RelreasonError
from relreason.rundir import (SCHEMA_VERSION, FieldError, ResumeRow, RunDir, RunRecord, RunResults, TestRow,
                              TestScores, TrainerState, ValidationRow, find_run_dirs, parse_row, read_metrics,
                              read_results, read_run_record, read_trainer_state, row_json, validations)

REPO = Path(__file__).resolve().parents[1]
COMMITTED = sorted((REPO / "results" / "cells").glob("*/*/*/seed*.json"))


def results(**changes) -> RunResults:
    """A finished single-task run's summary, as the loop writes it."""
    base = dict(relreason="0.1.0", model="mpnn", task="bfs", tasks=["bfs"], seed=0, recipe="quick",
                deviation="quick: a smaller budget", command="relreason train mpnn bfs --recipe quick", metric="clrs",
                lower_is_better=False, steps=10, examples=320, processes=1, seconds=12.5, hardware=["Test CPU"],
                train_seconds=11.0, best_val=0.75, best_examples=160, test_size=64, test_label="test, n=64, 32 samples",
                test=TestScores(score=0.5, outputs={"pi": 0.5}, hints={"pi_h": 0.25}), per_task={},
                config={"model_name": "mpnn", "task": "bfs", "train": {"seed": 0}}, plugins=[])
    return RunResults(**{**base, **changes})


def test_results_round_trip_and_carry_the_schema_version(tmp_path):
    res = results()
    path = tmp_path / "results.json"
    path.write_text(res.to_json())
    data = json.loads(path.read_text())
    assert list(data)[0] == "schema_version" and data["schema_version"] == SCHEMA_VERSION == 2
    assert read_results(path) == res and read_results(tmp_path) == res  # the file, or its run directory
    multi = results(test=TestScores(score=0.6, outputs={"bfs": 0.6}, hints={}, per_task={"bfs": {"score": 0.6}}),
                    per_task={"bfs": {"score": 0.6, "outputs": {"pi": 0.6}}})
    assert RunResults.from_dict(json.loads(multi.to_json())) == multi
    assert "per_task" not in res.to_dict()["test"]  # a single-task test block holds no per_task, as ever
    plugin = [{"kind": "model", "name": "max_gnn", "distribution": "relreason-example-plugin", "version": "0.1.0"}]
    assert read_results(tmp_path).plugins == [] and "plugins" in data  # written, even when all built in
    assert RunResults.from_dict(json.loads(results(plugins=plugin).to_json())).plugins == plugin
    assert "plugins" not in results(plugins=None).to_dict()  # files written before the key stay as they were


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: "/".join(p.parts[-4:]))
def test_committed_result_files_read_with_every_value(path):
    """Those written before schema_version existed read as version 1; the later ones as theirs."""
    raw = json.loads(path.read_text())
    res = read_results(path)
    assert res.schema_version == raw.get("schema_version", 1)
    back = res.to_dict()
    if "schema_version" not in raw:
        del back["schema_version"]
    assert back == raw


def test_a_first_release_file_reads_with_the_later_fields_unset(tmp_path):
    """Version 1 files written before `metric`, `per_task`, `hardware`... existed."""
    later = {f.name for f in dataclasses.fields(RunResults) if f.metadata.get("since") == 2}
    first = {k: v for k, v in results().to_dict().items() if k not in later | {"schema_version"}}
    res = RunResults.from_dict(first)
    assert res.schema_version == 1 and res.metric is None and res.per_task == {} and res.hardware is None
    with pytest.raises(FieldError, match="field 'tasks' is missing"):  # a version-2 file must hold them
        RunResults.from_dict({**first, "schema_version": 2})


@pytest.mark.parametrize("name, value, shown, problem", [
    ("examples", "320", "examples", "must be an integer"),
    ("examples", True, "examples", "must be an integer"),
    ("seconds", None, "seconds", "must be a number"),
    ("best_val", "high", "best_val", "must be a number or null"),
    ("test", 0.5, "test", "must be a JSON object"),
    ("test.score", "x", "test.score", "must be a number or null"),
    ("test.outputs", [], "test.outputs", "must be a JSON object"),
    ("hardware", ["cpu", 3], "hardware[1]", "must be a string"),
    ("plugins", ["relreason-example-plugin"], "plugins[0]", "must be a JSON object"),
    ("per_task", {"bfs": 0.5}, "per_task.bfs", "must be a JSON object"),
    ("per_task", {"bfs": {"score": "x"}}, "per_task.bfs.score", "must be a number or null"),
    ("config", None, "config", "is missing"),
    ("schema_version", 3, "schema_version", "written by a newer relreason"),
    ("schema_version", "2", "schema_version", "must be a positive integer"),
])
def test_a_bad_field_is_one_line_naming_the_file_and_the_field(tmp_path, name, value, shown, problem):
    data = results().to_dict()
    if name.startswith("test."):
        data["test"][name.split(".")[1]] = value
    elif problem == "is missing":
        del data[name]
    else:
        data[name] = value
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    with pytest.raises(FieldError) as e:
        read_results(path)
    assert e.value.message == f"{path}: field {shown!r} {e.value.problem}" and problem in e.value.problem
    assert "\n" not in str(e.value) and isinstance(e.value, RelreasonError)


def test_the_cli_reports_a_damaged_results_json_in_one_line(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "results.json").write_text(json.dumps({**results().to_dict(), "examples": "many"}))
    res = CliRunner().invoke(app, ["export", str(run), "--results", "md"])
    assert res.exit_code == 1
    errors = [line for line in res.output.splitlines() if line.startswith("Error:")]
    assert errors == [f"Error: {run / 'results.json'}: field 'examples' must be an integer, not \"many\""]
    (run / "results.json").write_text('{"cut')
    res = CliRunner().invoke(app, ["export", str(run), "--results", "md"])
    assert res.exit_code == 1 and "is corrupt" in res.output and "Traceback" not in res.output


def test_config_json_and_trainer_state_validate(tmp_path):
    record = RunRecord(relreason="0.1.0", config={"task": "bfs"}, sources={"train.seed": "--set"}, deviation=None,
                       command=None)
    (tmp_path / "config.json").write_text(record.to_json())
    back = read_run_record(tmp_path)
    assert back == record and "deviation" in back.recorded
    (tmp_path / "config.json").write_text(json.dumps({"relreason": "0.1.0", "config": {}, "command": None}))
    assert "deviation" not in read_run_record(tmp_path).recorded  # written before the recipe's deviation was
    (tmp_path / "config.json").write_text(json.dumps({"relreason": "0.1.0", "config": [], "command": None}))
    with pytest.raises(FieldError, match=r"config.json: field 'config' must be a JSON object"):
        read_run_record(tmp_path)
    state = TrainerState(step=3, examples=96, best_val=0.5, best_examples=64, seconds=2.0)
    (tmp_path / "last").mkdir()
    (tmp_path / "last" / "trainer_state.json").write_text(json.dumps(state.to_dict()))
    assert read_trainer_state(tmp_path / "last") == state
    (tmp_path / "last" / "trainer_state.json").write_text(json.dumps({**state.to_dict(), "examples": None}))
    with pytest.raises(FieldError, match="trainer_state.json: field 'examples' must be an integer"):
        read_trainer_state(tmp_path / "last")


def test_metrics_rows_round_trip_and_cut_lines_are_skipped(tmp_path):
    rows = [ValidationRow(step=0, examples=0, loss=None, score=0.1, outputs={"pi": 0.1}, hints={}, time=0.0),
            ResumeRow(examples=0, changed={"train.threads": [1, 2]}, processes=2),
            ValidationRow(step=5, examples=160, loss=0.7, score=0.6, outputs={"pi": 0.6}, hints={}, time=1.5,
                          per_task={"bfs": {"score": 0.6, "outputs": {"pi": 0.6}}}),
            TestRow(size=64, num=32, label="test, n=64", best_examples=160, score=0.5, outputs={"pi": 0.5}, hints={})]
    lines = [row_json(r) for r in rows]
    assert [parse_row(line) for line in lines] == rows
    assert json.loads(lines[0]) == {"event": "val", "step": 0, "examples": 0, "loss": None, "score": 0.1,
                                    "outputs": {"pi": 0.1}, "hints": {}, "time": 0.0}  # the format runs have written
    path = tmp_path / "metrics.jsonl"
    path.write_text("\n".join(lines + ['{"event": "val", "score": "x", "examples": 3}', '{"event": "val", "exa']))
    assert read_metrics(tmp_path) == rows and validations(read_metrics(path)) == [rows[0], rows[2]]
    assert parse_row('{"event": "something new"}') is None
    with pytest.raises(FieldError, match="field 'score' must be a number"):
        parse_row('{"event": "val", "examples": 3, "score": "x"}')


def test_the_layout(tmp_path):
    rd = RunDir(tmp_path / "runs" / "r")
    assert (rd.results.name, rd.config.name, rd.metrics.name, rd.lock.name) == \
        ("results.json", "config.json", "metrics.jsonl", ".lock")
    assert rd.best.weights == rd.path / "best" / "model.safetensors"
    assert rd.last.trainer_state == rd.path / "last" / "trainer_state.json"
    assert not rd.has_progress() and not rd.is_run()
    rd.path.mkdir(parents=True)
    rd.config.write_text(RunRecord(relreason="0.1.0", config={}, command=None).to_json())
    assert rd.is_run() and not rd.has_progress()  # killed in its first validation: may start afresh
    (rd.path / ".last.old").mkdir()
    assert rd.has_progress()
    assert RunDir(tmp_path / "abl" / "rt_tied" / "bfs" / "seed2" / "run").cell() == ("abl", "rt_tied", "bfs", 2)
    assert RunDir(tmp_path / "runs" / "r").cell() is None
    assert list(find_run_dirs(tmp_path)) == [rd.path]


def test_a_training_writes_what_the_module_reads(tmp_path):
    from relreason.config import build_config
    from relreason.train import run

    cfg = build_config("mpnn", "bfs", "quick", ["train.train_examples=64", "train.eval_every_examples=32",
                                                 "data.val_num=4", "data.test_num=4", "train.threads=1"])
    out = run(cfg, out=tmp_path, name="r", show_progress=False, log=lambda m: None)
    rd = RunDir(out.run_dir)
    res = read_results(rd.results)
    assert res.schema_version == SCHEMA_VERSION and res.examples == 64 and res.test.score == out.test["score"]
    assert read_run_record(rd.path).config == cfg.to_dict() == res.config
    assert read_run_record(rd.path).plugins == res.plugins == []  # all built in, and said so
    rows = read_metrics(rd.metrics)
    assert [r.event for r in rows] == ["val", "val", "val", "test"]
    assert [r.examples for r in validations(rows)] == [0, 32, 64]
    assert read_trainer_state(rd.last.path).examples == 64
    assert rd.best.weights.is_file() and rd.has_progress()
