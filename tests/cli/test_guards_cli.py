"""Options and guards of `train`, `eval`, `export` and `show` through the real entry point, each
checked for what it does (not only that it exits 0): Ctrl-C stops `train` with exit code 130 and a
checkpoint to resume from, `--print-config` trains nothing, `--device` and `eval --split/--set` are
applied, `eval` reads a `last/` checkpoint, bad values are one-line errors, RELREASON_DEBUG=1 shows
the traceback, and a reader that leaves (`relreason show FILE | head -1`) ends the command quietly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from child_hold import hold_env, release, trainer_state, wait_held
from cli_run import ENTRY, fails, relreason, succeeds, tiny_sets


def test_ctrl_c_stops_train_with_exit_130_and_a_checkpoint_to_resume(tmp_path):
    args = ["train", "mpnn", "bfs", *tiny_sets(tmp_path / "data", ("train.train_examples=16",)),
            "--out", tmp_path / "runs", "--name", "r"]
    env = hold_env(tmp_path, examples=4, env={**os.environ, "RELREASON_PROGRESS": "0"})
    proc = subprocess.Popen([*ENTRY, *map(str, args)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        wait_held(tmp_path, proc)  # at its validation at 4 examples (of 16)
        proc.send_signal(signal.SIGINT)
        release(tmp_path)
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    assert "interrupted: saved" in stderr and "--resume" in stderr and "Traceback" not in stderr
    run_dir = tmp_path / "runs" / "r"
    assert trainer_state(run_dir)["examples"] == 8  # the step under way finished and was saved
    assert not (run_dir / "results.json").exists() and stdout == ""
    resumed = json.loads(succeeds(relreason(*args, "--resume", "--json")))
    assert resumed["examples"] == 16 and resumed["test"]


def test_print_config_shows_every_source_and_trains_nothing(tmp_path):
    text = succeeds(relreason("train", "mpnn", "bfs", "--recipe", "quick", "--seed", "3", "--device", "cpu",
                              *tiny_sets(tmp_path / "data", ("train.lr=0.5",)), "--out", tmp_path / "runs",
                              "--name", "x", "--print-config"))
    lines = text.splitlines()
    assert lines[:3] == ["model_name: mpnn", "task: bfs", "recipe: quick"]
    for line in ("  lr: 0.5  # --set", "  seed: 3  # --set", "  device: cpu  # --set", "  hidden: 8  # --set"):
        assert line in lines, line
    assert any(x.startswith("  eval_every_examples: 4  # --set") for x in lines)
    assert not (tmp_path / "runs").exists() and not (tmp_path / "data").exists()


def test_an_unknown_device_is_a_one_line_error(tmp_path, trained):
    fails(relreason("train", "mpnn", "bfs", "--device", "tpu", *tiny_sets(tmp_path / "data"),
                    "--out", tmp_path / "runs", "--name", "d"), 1,
          "train.device 'tpu' must be auto, cpu, cuda or cuda:N")
    assert not (tmp_path / "runs" / "d" / "last").exists()
    _, result, _ = trained
    fails(relreason("eval", result["run"], "--device", "tpu"), 1, "unknown device 'tpu'")


def test_eval_split_val_and_set_are_applied(trained, trained_eval):
    _, result, _ = trained
    val = json.loads(succeeds(relreason("eval", result["run"], "--split", "val", "--json")))
    assert (val["split"], val["size"], val["num"]) == ("val", 5, 4)  # the run's val split (cli_run.TINY)
    test = trained_eval  # `eval RUN --json`: the test split by default
    assert (test["split"], test["size"], test["num"]) == ("test", 6, 4)
    fewer = json.loads(succeeds(relreason("eval", result["run"], "--split", "val", "--set", "data.val_num=2",
                                          "--json")))
    assert (fewer["split"], fewer["num"]) == ("val", 2)
    fails(relreason("eval", result["run"], "--set", "data.bogus=1"), 1, "data.bogus")


def test_eval_reads_a_last_checkpoint(trained, trained_eval):
    _, result, _ = trained
    run = Path(result["run"])
    last = json.loads(succeeds(relreason("eval", run / "last", "--json")))
    best = trained_eval  # `eval RUN --json`
    assert Path(last["checkpoint"]) == run / "last" and Path(best["checkpoint"]) == run / "best"
    assert best["score"] == pytest.approx(result["test"]["score"])  # run/ means its best/


def test_export_results_in_an_unknown_format_is_a_one_line_error(trained):
    _, result, _ = trained
    res = relreason("export", result["run"], "--results", "yaml")
    fails(res, 1, "unknown results format 'yaml'")
    assert "md, csv, json, latex" in res.stderr and res.stdout == ""


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    """A 3-example dataset file."""
    root = tmp_path_factory.mktemp("show")
    succeeds(relreason("generate", "bfs", "--split", "val", "--size", "5", "--num", "3", "--out", root))
    (path,) = (root / "bfs").glob("*.safetensors")
    return path


@pytest.mark.parametrize("index", ["3", "-1"])
def test_show_index_out_of_range(dataset, index):
    res = relreason("show", dataset, "--index", index)
    fails(res, 1, f"--index {index} is out of range")
    assert "Hint: the file has 3 examples (0..2)" in res.stderr and res.stdout == ""


def test_relreason_debug_shows_the_traceback():
    env = {**os.environ, "RELREASON_PROGRESS": "0", "RELREASON_DEBUG": "1"}
    res = subprocess.run([*ENTRY, "train", "mpnn", "bellmanford", "--print-config"], env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 1
    assert "Traceback (most recent call last)" in res.stderr and "RelreasonError" in res.stderr
    assert "bellmanford" in res.stderr


def test_a_reader_that_leaves_ends_the_command_quietly(dataset):
    """`relreason show FILE | head -1`: the pipe is closed before the command writes; it exits 0 and
    prints nothing (no BrokenPipeError, no "Exception ignored")."""
    read, write = os.pipe()
    os.close(read)  # the reader has left before the first write: every write fails with EPIPE
    env = {**os.environ, "RELREASON_PROGRESS": "0"}
    try:
        res = subprocess.run([*ENTRY, "show", str(dataset)], stdout=write, stderr=subprocess.PIPE, env=env, text=True,
                             timeout=300)
    finally:
        os.close(write)
    assert res.returncode == 0 and res.stderr == "", res.stderr


def test_a_closed_pipe_in_a_shell_pipeline(dataset):
    """The same through a real `| head -1` (pipefail: relreason's own exit status). Whether a write
    meets the closed pipe here depends on timing; the test above makes it certain."""
    cmd = " ".join([sys.executable, "-m", "relreason", "show", str(dataset), "|", "head", "-1"])
    res = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "RELREASON_PROGRESS": "0"})
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert len(res.stdout.splitlines()) == 1


def test_eval_sparse_sets_model_sparse(trained):
    """`--sparse` is `--set model.sparse=...`: `never` is the dense path `auto` takes on these small
    graphs; `always` runs the MPNN on edge lists, messages along the edges only (another model: other scores)."""
    _, result, _ = trained
    default = json.loads(succeeds(relreason("eval", result["run"], "--json", "--hints")))
    off = json.loads(succeeds(relreason("eval", result["run"], "--sparse", "never", "--json", "--hints")))
    on = json.loads(succeeds(relreason("eval", result["run"], "--sparse", "always", "--json", "--hints")))
    assert off == default
    assert (on["outputs"], on["hints"]) != (off["outputs"], off["hints"])
    fails(relreason("eval", result["run"], "--sparse", "sometimes"), 1, "model.sparse: unknown value 'sometimes'")
