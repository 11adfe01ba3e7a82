"""The training loop end to end: deterministic resume (also after kill -9), checkpoints, eval, export."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file
from typer.testing import CliRunner

from relreason.cli.main import app
from relreason.config import build_config
from relreason.train import run

from child_hold import hold_env, trainer_state, wait_held

TINY = ["model.hidden=16", "train.batch_size=4", "train.train_examples=48", "train.eval_every_examples=16",
        "data.train_num=24", "data.train_size=5", "data.val_size=5", "data.test_size=7"]
runner = CliRunner()


def tiny_config(tmp_path, model="mpnn", task="bellman_ford", extra=()):
    return build_config(model, task, None, TINY + [f"data.data_dir={tmp_path / 'data'}", *extra])


def weights(run_dir: Path, which="last") -> dict:
    return load_file(str(run_dir / which / "model.safetensors"))


def test_run_writes_checkpoints_metrics_and_results(tmp_path):
    res = run(tiny_config(tmp_path), out=tmp_path / "runs", name="r", show_progress=False)
    d = tmp_path / "runs" / "r"
    for f in ("best/model.safetensors", "best/config.json", "last/optimizer.safetensors",
              "last/trainer_state.json", "metrics.jsonl", "results.json"):
        assert (d / f).is_file(), f
    events = [json.loads(x)["event"] for x in (d / "metrics.jsonl").read_text().splitlines()]
    assert events.count("val") == 4 and events[-1] == "test"  # at 0, 16, 32, 48 examples
    assert res.examples == 48 and 0.0 <= res.test["score"] <= 1.0
    assert json.loads((d / "results.json").read_text())["test_size"] == 7


@pytest.mark.parametrize("select", ["best", "last"])
def test_the_selected_checkpoint_is_the_best_validations_or_under_select_last_the_final_one(tmp_path, select,
                                                                                           monkeypatch):
    """best: the first checkpoint with the best validation score (the reference's strict >); last: every
    validation replaces it, so best/ holds the final weights and the final test scores them. The validation
    scores here fall, then tie (0.5, 0.25, 0.25, 0.25 at 0, 16, 32, 48 examples): best keeps step 0's."""
    from relreason.train import session

    evaluate = session.Session.evaluate

    def falling(self, split, desc, draw=None):
        res = evaluate(self, split, desc, draw)
        return {**res, "score": 0.5 if draw == 0 else 0.25} if split == "val" else res

    monkeypatch.setattr(session.Session, "evaluate", falling)
    res = run(tiny_config(tmp_path, extra=[f"train.select={select}"]), out=tmp_path / "runs", name=select,
              show_progress=False)
    d = tmp_path / "runs" / select
    chosen, score = (48, 0.25) if select == "last" else (0, 0.5)
    assert (res.best_examples, res.best_val) == (chosen, score)
    assert json.loads((d / "results.json").read_text())["best_examples"] == chosen
    final, best = weights(d, "last"), weights(d, "best")
    assert all(np.array_equal(final[k], best[k]) for k in final) == (select == "last")


def test_train_select_takes_best_or_last(tmp_path):
    from relreason.errors import RelreasonError

    with pytest.raises(RelreasonError, match="train.select 'first' must be best"):
        tiny_config(tmp_path, extra=["train.select=first"])
    assert build_config("transnar", "text:insertion_sort", "transnar_ood").train.select == "last"


def test_a_run_records_the_code_that_ran_it(tmp_path, monkeypatch):
    import relreason.runtime as runtime

    run(tiny_config(tmp_path, extra=["train.train_examples=16"]), out=tmp_path / "runs", name="r", show_progress=False)
    d = tmp_path / "runs" / "r"
    code = json.loads((d / "config.json").read_text())["code"]
    assert code["source"] == runtime.source_digest() and len(code["source"]) == 16
    assert json.loads((d / "results.json").read_text())["code"] == [code]
    inside_git = subprocess.run(["git", "-C", str(Path(runtime.__file__).parent), "rev-parse", "HEAD"],
                                capture_output=True, text=True)
    if inside_git.returncode == 0:  # a checkout (CI's is): its commit, and whether the code differs from it
        assert code["commit"] == inside_git.stdout.strip() and isinstance(code["dirty"], bool)
    # a session under other code is recorded beside the first, as every machine a session ran on
    monkeypatch.setattr(runtime, "source_digest", lambda: "0" * 16)
    from relreason.train.resume import resume_config

    run(resume_config(d, ["train.train_examples=32"]), out=tmp_path / "runs", name="r", resume=True,
        show_progress=False)
    sources = [c["source"] for c in json.loads((d / "results.json").read_text())["code"]]
    assert sources == [code["source"], "0" * 16]


def test_interrupted_and_resumed_equals_uninterrupted(tmp_path):
    full = tiny_config(tmp_path)
    run(full, out=tmp_path / "a", name="r", show_progress=False)
    half = tiny_config(tmp_path, extra=["train.train_examples=32"])
    run(half, out=tmp_path / "b", name="r", show_progress=False)
    # continue the shortened run to the full budget from its last checkpoint
    state = tmp_path / "b" / "r" / "last" / "trainer_state.json"
    assert json.loads(state.read_text())["examples"] == 32
    cfg_file = tmp_path / "b" / "r" / "last" / "config.json"
    meta = json.loads(cfg_file.read_text())
    meta["config"]["train"]["train_examples"] = 48
    cfg_file.write_text(json.dumps(meta))
    run(full, out=tmp_path / "b", name="r", resume=True, show_progress=False)
    a, b = weights(tmp_path / "a" / "r"), weights(tmp_path / "b" / "r")
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_resume_after_kill_9(tmp_path):
    """A real process killed with SIGKILL mid-run resumes to the same weights as an uninterrupted run."""
    args = ["train", "mpnn", "bellman_ford", "--name", "k", "--out", str(tmp_path / "runs"),
            "--set", f"data.data_dir={tmp_path / 'data'}"]
    sets = [x for s in TINY[:-4] + ["train.train_examples=96", "train.eval_every_examples=16",
                                     "data.train_num=24", "data.train_size=5", "data.val_size=5", "data.test_size=7"]
            for x in ("--set", s)]
    cmd = [sys.executable, "-m", "relreason.cli.main", *args, *sets]
    env = {**os.environ, "RELREASON_PROGRESS": "0"}
    # the child holds after writing its validation line at 64 examples, before that checkpoint: no race
    # with the run's end or with the two renames of a checkpoint swap, however loaded the machine
    proc = subprocess.Popen(cmd, env=hold_env(tmp_path, examples=64, env=env), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert wait_held(tmp_path, proc) == 64
        assert trainer_state(tmp_path / "runs" / "k")["examples"] == 48  # a metrics line newer than last/
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    done = subprocess.run(cmd + ["--resume"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # the uninterrupted run: the same command in this process (one torch thread, as the children have)
    ref = runner.invoke(app, [*cmd[3:cmd.index("--name") + 1], "ref", *cmd[cmd.index("--name") + 2:]])
    assert ref.exit_code == 0, ref.output
    killed, ref = tmp_path / "runs" / "k", tmp_path / "runs" / "ref"
    for which in ("last", "best"):
        a, b = weights(killed, which), weights(ref, which)
        assert a.keys() == b.keys()
        for k in a:
            np.testing.assert_array_equal(a[k], b[k], err_msg=f"{which}/{k}")
    for which in ("last", "best"):  # every file of both checkpoints, not only the weights
        assert sorted(p.name for p in (killed / which).iterdir()) == sorted(p.name for p in (ref / which).iterdir())
    opt_a = load_file(str(killed / "last" / "optimizer.safetensors"))
    opt_b = load_file(str(ref / "last" / "optimizer.safetensors"))
    assert opt_a.keys() == opt_b.keys() and all(np.array_equal(opt_a[k], opt_b[k]) for k in opt_a)

    def records(d):  # every validation line, without wall-clock times
        out = [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()]
        return [{k: v for k, v in r.items() if k != "time"} for r in out if r["event"] in ("val", "test")]

    assert records(killed) == records(ref)  # no line lost or duplicated by the kill
    ra, rb = (json.loads((d / "results.json").read_text()) for d in (killed, ref))
    for key in ("seconds", "train_seconds", "command"):
        ra.pop(key), rb.pop(key)
    assert ra == rb


def test_cli_train_eval_export_and_reload(tmp_path):
    sets = [x for s in TINY + [f"data.data_dir={tmp_path / 'data'}"] for x in ("--set", s)]
    res = runner.invoke(app, ["train", "mpnn", "bellman_ford", "--name", "c", "--out", str(tmp_path / "runs"), *sets])
    assert res.exit_code == 0, res.output
    run_dir = tmp_path / "runs" / "c"
    ev = runner.invoke(app, ["eval", str(run_dir), "--ood", "7", "--json"])
    assert ev.exit_code == 0, ev.output
    first = json.loads(ev.output)
    assert first["size"] == 7 and "pi" in first["outputs"]
    ex = runner.invoke(app, ["export", str(run_dir), "--out", str(tmp_path / "bundle")])
    assert ex.exit_code == 0, ex.output
    assert (tmp_path / "bundle" / "MODEL_CARD.md").read_text().startswith("# mpnn on bellman_ford")
    again = runner.invoke(app, ["eval", str(tmp_path / "bundle"), "--ood", "7", "--json"])
    assert json.loads(again.output)["outputs"] == first["outputs"]  # same weights, same predictions
    for fmt in ("md", "csv", "json", "latex"):
        t = runner.invoke(app, ["export", str(run_dir), "--results", fmt])
        assert t.exit_code == 0 and "pi" in t.output


@pytest.mark.parametrize("args, message", [
    (["train", "mpn", "bellman_ford"], "did you mean"),
    (["train", "mpnn", "bellmanford"], "did you mean"),
    (["train", "mpnn", "bellman_ford", "--recipe", "nope"], "unknown recipe"),
    (["train", "mpnn", "bellman_ford", "--set", "train.lr=fast"], "train.lr"),
    (["train", "mpnn", "bellman_ford", "--set", "oops"], "KEY=VALUE"),
    (["eval", "/nonexistent/run"], "does not exist"),
])
def test_bad_inputs(args, message):
    res = runner.invoke(app, args)
    assert res.exit_code == 1 and message in res.output and "Traceback" not in res.output


def test_eval_rejects_bad_ood_and_corrupt_and_foreign_checkpoints(tmp_path):
    run(tiny_config(tmp_path), out=tmp_path / "runs", name="r", show_progress=False)
    d = tmp_path / "runs" / "r"
    res = runner.invoke(app, ["eval", str(d), "--ood", "1"])
    assert res.exit_code == 1 and "--ood" in res.output
    # a checkpoint of another model: config says gat-like widths differ -> strict load names the keys
    other = tmp_path / "other"
    run(tiny_config(tmp_path, extra=["model.hidden=8"]), out=tmp_path / "runs", name="o", show_progress=False)
    import shutil

    shutil.copytree(d / "best", other)
    shutil.copy2(tmp_path / "runs" / "o" / "best" / "config.json", other / "config.json")
    res = runner.invoke(app, ["eval", str(other)])
    assert res.exit_code == 1 and "does not fit" in res.output
    (other / "model.safetensors").write_bytes(b"junk")
    res = runner.invoke(app, ["eval", str(other)])
    assert res.exit_code == 1 and "corrupt" in res.output
    meta = json.loads((d / "best" / "config.json").read_text())
    meta["format"] = 99
    (d / "best" / "config.json").write_text(json.dumps(meta))
    res = runner.invoke(app, ["eval", str(d)])
    assert res.exit_code == 1 and "format" in res.output


def test_a_run_directory_has_one_writer(tmp_path):
    from relreason.errors import RelreasonError
    from relreason.runtime import RunLock, lock_holder

    run_dir = tmp_path / "runs" / "busy"
    with RunLock(run_dir):
        assert lock_holder(run_dir)["pid"] == os.getpid()
        with pytest.raises(RelreasonError, match=f"in use by process {os.getpid()}"):
            run(tiny_config(tmp_path), out=tmp_path / "runs", name="busy", show_progress=False)
    assert lock_holder(run_dir) is None


def test_a_stale_lock_of_a_dead_process_is_taken_over(tmp_path):
    run_dir = tmp_path / "runs" / "stale"
    run_dir.mkdir(parents=True)
    (run_dir / ".lock").write_text(json.dumps({"pid": 999_999_999, "host": "gone", "started": 0}))
    res = run(tiny_config(tmp_path), out=tmp_path / "runs", name="stale", show_progress=False)
    assert res.examples == 48


@pytest.mark.parametrize("name", ["a/b", "..", "../escape", ".hidden", ""])
def test_run_names_that_leave_the_runs_directory_are_refused(tmp_path, name):
    from relreason.errors import RelreasonError

    with pytest.raises(RelreasonError, match="invalid run name"):
        run(tiny_config(tmp_path), out=tmp_path / "runs", name=name, show_progress=False)


def test_recover_puts_back_a_checkpoint_caught_between_renames(tmp_path):
    from relreason.train import checkpoint as ckpt

    run(tiny_config(tmp_path), out=tmp_path / "runs", name="r", show_progress=False)
    last = tmp_path / "runs" / "r" / "last"
    old = last.with_name(".last.old")
    os.replace(last, old)  # a kill between `path -> .old` and `tmp -> path`
    ckpt.recover(last)
    assert (last / "model.safetensors").is_file() and not old.exists()
    ckpt.recover(last)  # nothing to do the second time
    assert (last / "model.safetensors").is_file()
