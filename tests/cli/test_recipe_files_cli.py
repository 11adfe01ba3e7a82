"""A recipe given as a YAML path, end to end through the real entry point (issue 21): train prints
the file's `deviation:`, resume (also once the file is gone), runs, compare and eval of the finished
run all work from the stored resolved config, where only the recipe's label remains. And the run's
own command with --resume added continues a killed run exactly, while a --recipe that would change
the run is refused, naming the keys that differ."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from child_hold import hold_env, trainer_state, wait_held
from cli_run import fails, invoke, ok, relreason, succeeds
from safetensors.numpy import load_file

DEVIATION = "a private smoke budget, not the paper's protocol"

# A recipe of its own, tiny: graphs of 5-6 nodes, a width of 8, a handful of examples.
RECIPE = f"""\
# relreason train mpnn bfs --recipe ./mine.yaml
inherit: paper
deviation: {DEVIATION}
train:{{lr}}
  batch_size: 4  # a few examples per step
  train_examples: {{examples}}  # seconds, not minutes
  eval_every_examples: {{every}}
model:
  hidden: 8  # tiny
data:
  train_num: 8
  train_size: 5
  val_size: 5
  test_size: 6
  val_num: 4
  test_num: 4
"""


def write_recipe(path: Path, examples: int, every: int, lr: float | None = None) -> None:
    path.write_text(RECIPE.format(examples=examples, every=every, lr="" if lr is None else f"\n  lr: {lr}"))


def train(cwd: Path, *args: str):
    return relreason("train", "mpnn", "bfs", *args, "--set", f"data.data_dir={cwd / 'data'}", "--out", "runs",
                     cwd=cwd)


def test_a_recipe_path_trains_resumes_lists_and_evaluates_after_the_file_is_gone(tmp_path):
    write_recipe(tmp_path / "mine.yaml", examples=8, every=4)
    res = train(tmp_path, "--recipe", "./mine.yaml", "--name", "a")
    succeeds(res)
    assert f"note: recipe mine: {DEVIATION}" in res.stderr
    run = tmp_path / "runs" / "a"
    results = json.loads((run / "results.json").read_text())
    assert (results["recipe"], results["deviation"], results["examples"]) == ("mine", DEVIATION, 8)
    assert json.loads((run / "config.json").read_text())["deviation"] == DEVIATION

    (tmp_path / "mine.yaml").rename(tmp_path / "moved.yaml")  # only the label "mine" remains
    res = train(tmp_path, "--name", "a", "--resume", "--set", "train.train_examples=16")
    succeeds(res)
    assert f"note: recipe mine: {DEVIATION}; changed with --set over the recipe: train.train_examples=16" \
           in res.stderr
    results = json.loads((run / "results.json").read_text())
    assert (results["recipe"], results["examples"]) == ("mine", 16) and results["deviation"].startswith(DEVIATION)

    (tmp_path / "moved.yaml").unlink()
    listed = json.loads(succeeds(relreason("runs", tmp_path / "runs", "--json")))["runs"]
    assert [(r["name"], r["status"], r["examples"]) for r in listed] == [("a", "finished", 16)]
    compared = json.loads(succeeds(relreason("compare", "--runs", tmp_path / "runs", "--json")))
    assert "mpnn" in json.dumps(compared)
    evaluated = json.loads(succeeds(relreason("eval", run, "--json")))
    assert evaluated["score"] == pytest.approx(results["test"]["score"])  # the same best weights, the same split


def weights(run_dir: Path, which: str) -> dict:
    return load_file(str(run_dir / which / "model.safetensors"))


def test_the_runs_own_command_with_resume_continues_a_killed_run_exactly(tmp_path, monkeypatch):
    # 64 examples: held at 32, killed with last/ at 16, resumed through three more validations (32, 48, 64)
    write_recipe(tmp_path / "mine.yaml", examples=64, every=16)
    command = ["--recipe", "./mine.yaml", "--seed", "3", "--name", "k"]
    # the child holds after writing its validation line at 32 examples, before that checkpoint: killed
    # there, however loaded the machine (no race with the run's end or a checkpoint swap)
    cli = [sys.executable, "-m", "relreason", "train", "mpnn", "bfs", *command, "--set",
           f"data.data_dir={tmp_path / 'data'}", "--out", "runs"]
    env = hold_env(tmp_path, examples=32, env={**os.environ, "RELREASON_PROGRESS": "0"})
    proc = subprocess.Popen(cli, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_held(tmp_path, proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    state = tmp_path / "runs" / "k" / "last" / "trainer_state.json"
    killed_at = trainer_state(tmp_path / "runs" / "k")["examples"]
    assert killed_at == 16

    # a recipe that would change the run is refused, naming what differs (--set and --seed: see
    # tests/train/test_loop.py); nothing is touched
    write_recipe(tmp_path / "other.yaml", examples=64, every=16, lr=0.01)
    other = ["--recipe", "./other.yaml", "--seed", "3", "--name", "k", "--resume"]
    fails(train(tmp_path, *other), 1, "cannot change train.lr=0.01 (the run has 0.001)")
    assert json.loads(state.read_text())["examples"] == killed_at

    res = train(tmp_path, *command, "--resume")
    succeeds(res)
    assert f"resumed runs/k at {killed_at} examples" in res.stderr and f"note: recipe mine: {DEVIATION}" in res.stderr
    # the same run, never interrupted: the same command, in this process (a reference, not what is tested)
    monkeypatch.chdir(tmp_path)
    ok(invoke("train", "mpnn", "bfs", *command[:-1], "ref", "--set", f"data.data_dir={tmp_path / 'data'}",
              "--out", "runs"))
    for which in ("last", "best"):
        a, b = weights(tmp_path / "runs" / "k", which), weights(tmp_path / "runs" / "ref", which)
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=f"{which}/{key}")
