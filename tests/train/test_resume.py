"""Resuming a run (relreason.train.resume): the stored configuration is the truth, the command's
changes apply only where a resume may make them (the others refused, all named), and the recipe's
deviation comes from what the run recorded."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from relreason.cli.main import app
from relreason.config import build_config, recipe_deviation
from relreason.errors import RelreasonError
from relreason.train import run
from relreason.train.checkpoint import tensors_digest
from relreason.train.workloads import build_workload, initial_weights_digest
from relreason.train.resume import (LOWERABLE_KEYS, RESUMABLE_KEYS, config_diff, lowered_deviation, resume_config,
                                    resume_refusals)

TINY = ["model.hidden=16", "train.batch_size=4", "train.train_examples=48", "train.eval_every_examples=16",
        "data.train_num=24", "data.train_size=5", "data.val_size=5", "data.test_size=7"]
runner = CliRunner()


def tiny_config(tmp_path, extra=()):
    return build_config("mpnn", "bellman_ford", None, TINY + [f"data.data_dir={tmp_path / 'data'}", *extra])


def test_config_diff_names_every_key_that_differs_with_both_values(tmp_path):
    a = tiny_config(tmp_path)
    b = tiny_config(tmp_path, ["train.lr=0.5", "model.hidden=8"])
    assert config_diff(a, a) == {}
    assert config_diff(a, b) == {"train.lr": (a.train.lr, 0.5), "model.hidden": (16, 8)}
    assert config_diff(b, a) == {"train.lr": (0.5, a.train.lr), "model.hidden": (8, 16)}


@pytest.mark.parametrize("key", RESUMABLE_KEYS)
def test_a_resume_may_change_the_resumable_keys(key):
    assert resume_refusals({key: (1, 2)}) == {}


def test_a_resume_may_lower_the_lowerable_keys_and_nothing_else():
    assert LOWERABLE_KEYS == ("train.lr",)
    assert resume_refusals({"train.lr": (0.1, 0.001)}) == {}
    refused = {"train.lr": (0.001, 0.1), "train.seed": (0, 1), "model.hidden": (16, 8), "model_name": ("mpnn", "pgn")}
    assert resume_refusals(refused) == refused
    assert resume_refusals({"train.lr": (None, 0.1)}) == {"train.lr": (None, 0.1)}  # lowered from nothing: no


def test_a_lowered_rate_is_stated_as_a_deviation_at_the_examples_it_took_effect():
    changed = {"train.lr": (0.1, 0.001), "train.train_examples": (32, 48)}
    assert lowered_deviation(changed, 320) == ["train.lr lowered from 0.1 to 0.001 at 320 examples (on resume)"]
    assert lowered_deviation({"train.train_examples": (32, 48)}, 320) == []


def test_resume_refuses_a_changed_config_and_records_an_extended_budget(tmp_path):
    run(tiny_config(tmp_path, extra=["train.train_examples=32"]), out=tmp_path / "runs", name="r", show_progress=False)
    d = tmp_path / "runs" / "r"
    with pytest.raises(RelreasonError, match="train.lr"):
        resume_config(d, ["train.lr=0.5"])
    with pytest.raises(RelreasonError, match="train.seed"):
        resume_config(d, ["train.seed=7"])
    cfg = resume_config(d, ["train.train_examples=48"])
    res = run(cfg, out=tmp_path / "runs", name="r", resume=True, show_progress=False)
    assert res.examples == 48
    events = [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()]
    resume = [e for e in events if e["event"] == "resume"]
    assert resume and resume[0]["changed"] == {"train.train_examples": [32, 48]}
    stored = json.loads((d / "results.json").read_text())
    assert stored["config"]["train"]["train_examples"] == 48 == stored["examples"]
    assert json.loads((d / "config.json").read_text())["config"] == stored["config"]
    # the weights it started from, recorded at the start and kept through the resume (not the resumed weights)
    # (initial_weights_digest: what `reproduce --committed` compares before it trains a NAR cell again)
    fresh = build_workload(tiny_config(tmp_path), torch.device("cpu")).model.state_dict()
    last = load_file(str(d / "last" / "model.safetensors"))
    assert stored["init_weights"] == tensors_digest(fresh) == initial_weights_digest(cfg) != tensors_digest(last)
    assert initial_weights_digest(tiny_config(tmp_path, extra=["train.seed=1"])) != stored["init_weights"]


def test_cli_resume_takes_the_stored_config(tmp_path):
    sets = [x for s in TINY + [f"data.data_dir={tmp_path / 'data'}", "train.train_examples=32"] for x in ("--set", s)]
    args = ["train", "mpnn", "bellman_ford", "--name", "c", "--out", str(tmp_path / "runs")]
    assert runner.invoke(app, args + sets).exit_code == 0
    # no options: continues with the run's own configuration (its recipe, its budget)
    res = runner.invoke(app, args + ["--resume"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, args + ["--resume", "--set", "train.lr=0.1"])
    assert res.exit_code == 1 and "cannot change train.lr" in res.output


def test_resume_takes_the_recipe_deviation_the_run_recorded(tmp_path):
    """The recipe is never looked up again by its label on resume: the run's config.json is the truth,
    and only a run that predates recording it reads the recipe its label names."""
    over = TINY + [f"data.data_dir={tmp_path / 'data'}", "train.train_examples=16"]
    run(build_config("mpnn", "bellman_ford", "quick", over), out=tmp_path / "runs", name="r", show_progress=False)
    d = tmp_path / "runs" / "r"
    assert resume_config(d, []).deviation == recipe_deviation("quick")
    assert resume_config(d, over, recipe="quick").deviation == recipe_deviation("quick")  # its own command
    record = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**record, "deviation": "as recorded"}))
    assert resume_config(d, []).deviation == "as recorded"
    del record["deviation"]
    (d / "config.json").write_text(json.dumps(record))
    assert resume_config(d, []).deviation == recipe_deviation("quick")
