"""`relreason compare` reads every run's stored config as today's code resolves it: a key added since a
run was stored (e.g. train.lr_schedule) counts with its default, so seeds trained before and after the
key existed are one setting, while a run that set it otherwise stays apart."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from relreason.cli.main import app

from fake_runs import make_run, write_json


def with_train_keys(run_dir, **keys) -> None:
    record = json.loads((run_dir / "config.json").read_text())
    record["config"]["train"].update(keys)
    write_json(run_dir / "config.json", record)


def test_seeds_stored_before_and_after_a_key_was_added_are_one_setting(tmp_path):
    make_run(tmp_path, "old", seed=0, test=0.4)  # stored before train.lr_schedule existed
    with_train_keys(make_run(tmp_path, "new", seed=1, test=0.6), lr_schedule="constant", warmup_examples=0,
                    min_lr=0.0, log="tensorboard")
    with_train_keys(make_run(tmp_path, "cosine", seed=2, test=0.9), lr_schedule="cosine")
    res = CliRunner().invoke(app, ["compare", "--runs", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    groups = json.loads(res.output)["groups"]
    assert sorted(len(g["runs"]) for g in groups) == [1, 2]
    assert sorted(sorted(g["runs"]) for g in groups) == [["cosine"], ["new", "old"]]
