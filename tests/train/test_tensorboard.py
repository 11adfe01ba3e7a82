"""TensorBoard event files (`train.log=tensorboard`, relreason.tracking): written in the run directory,
read back with TensorBoard's own EventAccumulator, equal to metrics.jsonl (which they leave unchanged),
and each step logged once across a kill and resume. Skipped, with the install line, only where the
tensorboard package is missing (scripts/setup.sh installs it, so CI runs these)."""

from __future__ import annotations

import importlib.util
import json
import sys

import numpy as np
import pytest

from relreason.config import build_config, run_deviation
from relreason.errors import RelreasonError
from relreason.schedules import learning_rate
from relreason.train import run, session
from relreason.train.resume import resume_config

from stop_requests import sessions_with_a_lost_checkpoint

TINY = ["model.hidden=8", "train.batch_size=4", "train.train_examples=40", "train.eval_every_examples=16",
        "data.train_num=16", "data.train_size=5", "data.val_size=5", "data.test_size=5", "data.val_num=4",
        "data.test_num=4", "train.lr_schedule=cosine", "train.warmup_examples=8"]


@pytest.fixture
def tensorboard_installed():
    if importlib.util.find_spec("tensorboard") is None:
        pytest.skip("tensorboard is not installed: pip install 'relreason[tensorboard]'")
    import tensorboard  # noqa: F401  (a broken install fails here, in the test)


def config(data, *extra):
    return build_config("mpnn", "bfs", None, TINY + [f"data.data_dir={data}", *extra])


def scalars(run_dir) -> dict[str, list[tuple[int, float]]]:
    """Every scalar series of a run directory's event files, as TensorBoard shows them (purges applied)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})  # 0: keep every event
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def records(run_dir, event):
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in lines if r["event"] == event]


def f32(x) -> float:
    return float(np.float32(x))  # event files store float32


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    """One run with train.log=tensorboard and the same run without it."""
    if importlib.util.find_spec("tensorboard") is None:
        pytest.skip("tensorboard is not installed: pip install 'relreason[tensorboard]'")
    tmp = tmp_path_factory.mktemp("tb")
    run(config(tmp / "data", "train.log=tensorboard"), out=tmp / "runs", name="tb", show_progress=False)
    run(config(tmp / "data"), out=tmp / "runs", name="plain", show_progress=False)
    return tmp / "runs"


def test_event_files_hold_what_metrics_jsonl_holds(logged):
    d = logged / "tb"
    assert len(list(d.glob("events.out.tfevents.*"))) == 1
    got = scalars(d)
    vals = records(d, "val")
    assert got["val/score"] == [(r["examples"], f32(r["score"])) for r in vals]
    for group in ("outputs", "hints"):
        for name in vals[0][group]:
            assert got[f"val/{group}/{name}"] == [(r["examples"], f32(r[group][name])) for r in vals]
    loss = dict(got["train/loss"])
    assert [f32(r["loss"]) for r in vals[1:]] == [loss[r["examples"]] for r in vals[1:]]
    (test,) = records(d, "test")
    assert got["test/score"] == [(40, f32(test["score"]))]
    cfg = config("unused").train
    assert got["train/lr"] == [(4 * (k + 1), f32(learning_rate(cfg, 4 * k))) for k in range(10)]


def test_metrics_jsonl_is_unchanged_by_the_tracker(logged):
    def strip(rs):
        return [{k: v for k, v in r.items() if k != "time"} for r in rs]

    for event in ("val", "test"):
        assert strip(records(logged / "tb", event)) == strip(records(logged / "plain", event))
    assert not list((logged / "plain").glob("events.out.tfevents.*"))


def test_a_resumed_run_logs_every_step_once(logged, tmp_path, monkeypatch):
    """Session 1 stops at 8 examples (its checkpoint); session 2 trains on to 32 and stops there, but its
    checkpoint is lost (last/ put back to session 1's, as after a kill -9); session 3 resumes from 8. The
    event stream then equals the uninterrupted run's: session 2's steps after 8 were purged, not doubled."""
    data, runs = logged.parent / "data", tmp_path / "runs"
    d = runs / "tb"

    def session_2_logged_past_8():
        assert dict(scalars(d)["train/loss"]).keys() >= {12, 16, 32}

    sessions_with_a_lost_checkpoint(monkeypatch, config(data, "train.log=tensorboard"), runs, "tb",
                                    tmp_path / "spare", session_2_logged_past_8)
    assert len(list(d.glob("events.out.tfevents.*"))) == 3
    got, want = scalars(d), scalars(logged / "tb")
    assert got.keys() == want.keys()
    for tag in want:
        assert got[tag] == want[tag], tag


def test_switching_the_tracker_on_is_no_protocol_change_and_may_come_on_resume(logged):
    cfg = build_config("mpnn", "bfs", None, ["train.log=tensorboard"])
    assert cfg.sources["train.log"].startswith("--set")
    assert run_deviation(cfg) == run_deviation(build_config("mpnn", "bfs", None, []))  # --set, yet no departure
    assert resume_config(logged / "plain", ["train.log=tensorboard"]).train.log == "tensorboard"


def test_unknown_tracker_is_refused():
    with pytest.raises(RelreasonError, match="train.log must be one of none, tensorboard, wandb, or several "
                                             r"comma-separated \(tensorboard,wandb\), got 'mlflow'"):
        config("unused", "train.log=mlflow")


def test_missing_tensorboard_is_one_line_before_anything_is_written(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # `import tensorboard` now raises ImportError
    with pytest.raises(RelreasonError) as e:
        run(config(tmp_path / "data", "train.log=tensorboard"), out=tmp_path / "runs", name="r", show_progress=False)
    assert e.value.message == "train.log=tensorboard needs the tensorboard package"
    assert e.value.hint.startswith("pip install 'relreason[tensorboard]'")
    assert not (tmp_path / "runs").exists()


def test_the_tracker_is_closed_when_training_fails(tmp_path, monkeypatch, tensorboard_installed):
    import relreason.tracking as tracking

    closed, close = [], tracking.TensorBoardTracker.close

    def watched(self):
        closed.append(True)
        close(self)

    monkeypatch.setattr(tracking.TensorBoardTracker, "close", watched)
    monkeypatch.setattr(session, "learning_rate", lambda t, e: (_ for _ in ()).throw(RuntimeError("boom")))
    with pytest.raises(RuntimeError, match="boom"):
        run(config(tmp_path / "data", "train.log=tensorboard"), out=tmp_path / "runs", name="r", show_progress=False)
    assert closed == [True]
