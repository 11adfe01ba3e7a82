"""The guards of `relreason.train.run` that protect a user's finished run or hours of training: a new run
never overwrites an old one, a resume never continues something other than what was trained (nothing
to resume, a smaller budget, another configuration), a run killed before its first checkpoint starts
afresh, a non-finite loss stops the run at once, and a second Ctrl-C stops without saving."""

from __future__ import annotations

import json
import math
import os
import signal
from pathlib import Path

import pytest
from safetensors.numpy import load_file

from relreason.config import build_config
from relreason.errors import RelreasonError
from relreason.train import run
from relreason.train.workloads import NarWorkload

TINY = ["model.hidden=8", "train.batch_size=4", "train.train_examples=32", "train.eval_every_examples=16",
        "data.train_num=16", "data.train_size=5", "data.val_size=5", "data.test_size=6", "data.val_num=4",
        "data.test_num=4"]


def tiny_config(tmp_path: Path, *extra: str):
    return build_config("mpnn", "bfs", None, TINY + [f"data.data_dir={tmp_path / 'data'}", *extra])


def snapshot(run_dir: Path) -> dict[str, bytes]:
    """Every file of a run directory, by path (the lock file aside): what a refused call must not touch."""
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*"))
            if p.is_file() and p.name != ".lock"}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """(tmp, run directory) of a finished tiny run, trained once for the module (tests copy it)."""
    tmp = tmp_path_factory.mktemp("guards")
    run(tiny_config(tmp), out=tmp / "runs", name="r", show_progress=False, log=lambda m: None)
    return tmp, tmp / "runs" / "r"


def copy_of(finished, tmp_path) -> Path:
    """A copy of the finished run under tmp_path/runs/r (its config keeps the module's data directory)."""
    import shutil

    dst = tmp_path / "runs" / "r"
    shutil.copytree(finished[1], dst)
    return dst


def test_training_into_an_existing_run_without_resume_is_refused(finished, tmp_path):
    run_dir = copy_of(finished, tmp_path)
    before = snapshot(run_dir)
    with pytest.raises(RelreasonError, match="already exists.*") as e:
        run(tiny_config(finished[0]), out=tmp_path / "runs", name="r", show_progress=False)
    assert "--resume" in e.value.hint
    assert snapshot(run_dir) == before  # the finished run is untouched


def test_resume_with_nothing_to_resume_is_refused(tmp_path):
    from relreason.train.loop import resume_config

    with pytest.raises(RelreasonError, match="nothing to resume"):
        run(tiny_config(tmp_path), out=tmp_path / "runs", name="never", resume=True, show_progress=False)
    with pytest.raises(RelreasonError, match="nothing to resume"):  # the CLI's path (train --resume)
        resume_config(tmp_path / "runs" / "never", [])
    assert not (tmp_path / "runs" / "never" / "last").exists()


def test_resuming_with_a_budget_below_what_was_trained_is_refused(finished, tmp_path):
    run_dir = copy_of(finished, tmp_path)
    before = snapshot(run_dir)
    smaller = tiny_config(finished[0], "train.train_examples=16")  # the run trained 32
    with pytest.raises(RelreasonError, match="trained 32 examples, more than train.train_examples=16"):
        run(smaller, out=tmp_path / "runs", name="r", resume=True, show_progress=False)
    assert snapshot(run_dir) == before


def test_run_resume_with_a_changed_configuration_is_refused(finished, tmp_path):
    """`run(resume=True)` checks the config it is given against the stored one itself (callers other than
    the CLI do not go through resume_config); only RESUMABLE_KEYS may differ."""
    run_dir = copy_of(finished, tmp_path)
    before = snapshot(run_dir)
    with pytest.raises(RelreasonError, match=r"different configuration \(model.hidden, train.lr differ\)"):
        run(tiny_config(finished[0], "train.lr=0.5", "model.hidden=16"), out=tmp_path / "runs", name="r", resume=True,
            show_progress=False)
    assert snapshot(run_dir) == before
    longer = run(tiny_config(finished[0], "train.train_examples=48"), out=tmp_path / "runs", name="r", resume=True,
                 show_progress=False, log=lambda m: None)
    assert longer.examples == 48  # the budget may grow


def test_a_run_killed_before_its_first_checkpoint_starts_afresh(tmp_path):
    """A kill during the very first validation leaves config.json and perhaps a metrics line but no
    checkpoint: nothing to resume, so the same command starts the run again (instead of refusing an
    existing directory) and drops the dead run's lines."""
    run_dir = tmp_path / "runs" / "r"
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps({"config": {}}))
    stale = {"event": "val", "step": 0, "examples": 0, "loss": None, "score": -1.0, "outputs": {}, "hints": {}}
    (run_dir / "metrics.jsonl").write_text(json.dumps(stale) + "\n" + '{"event": "val", "exam')
    res = run(tiny_config(tmp_path), out=tmp_path / "runs", name="r", show_progress=False, log=lambda m: None)
    assert res.examples == 32
    records = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["event"] for r in records] == ["val", "val", "val", "test"]  # at 0, 16, 32: no leftover
    assert all(r.get("score") != -1.0 for r in records)


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_a_non_finite_loss_stops_the_run_before_the_update(tmp_path, monkeypatch, value):
    original = NarWorkload.loss

    def loss(self, module, part, step):
        out, terms = original(self, module, part, step)
        return (out * value if step == 5 else out), terms

    monkeypatch.setattr(NarWorkload, "loss", loss)
    with pytest.raises(RelreasonError, match=f"the loss became {value} at step 5") as e:
        run(tiny_config(tmp_path), out=tmp_path / "runs", name="r", show_progress=False, log=lambda m: None)
    assert "train.lr" in e.value.hint
    last = tmp_path / "runs" / "r" / "last"
    assert json.loads((last / "trainer_state.json").read_text())["examples"] == 16  # nothing saved past it
    for k, w in load_file(str(last / "model.safetensors")).items():
        assert w.dtype.kind != "f" or (w == w).all(), k  # no NaN weight was ever written


def test_a_second_ctrl_c_stops_at_once_without_saving(tmp_path, monkeypatch):
    """One Ctrl-C: the step finishes and `last/` is saved there (tests/train/test_distributed.py). A
    second one stops mid-step: that step is half done, so `last/` stays at the previous checkpoint."""
    from relreason.train import loop

    monkeypatch.setattr(loop._StopRequests, "PATIENCE", 0.0)  # "a second Ctrl-C" without waiting 2 s
    original = NarWorkload.loss

    def loss(self, module, part, step):
        if step == 5:  # at 20 examples; the last checkpoint is at 16
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
        return original(self, module, part, step)

    monkeypatch.setattr(NarWorkload, "loss", loss)
    logged: list[str] = []
    res = run(tiny_config(tmp_path), out=tmp_path / "runs", name="r", show_progress=False, log=logged.append)
    assert res.interrupted and not res.test
    assert any("stopped without saving" in m for m in logged), logged
    run_dir = tmp_path / "runs" / "r"
    assert json.loads((run_dir / "last" / "trainer_state.json").read_text())["examples"] == 16
    assert not (run_dir / "results.json").exists()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handlers are put back
