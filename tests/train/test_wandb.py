"""Weights & Biases (`train.log=wandb`, relreason.tracking), offline (WANDB_MODE=offline, WANDB_DIR in tmp):
the run files read back (tests/wandb_records.py) hold what metrics.jsonl holds, the config with the run's
command and hardware, the cell's group / job type / name; a resumed run continues the same W&B run id and
sends every step once; beside TensorBoard (`tensorboard,wandb`). Skipped, with the install line, only where
wandb is missing (scripts/setup.sh installs it, so CI runs these)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from relreason.config import build_config
from relreason.errors import RelreasonError
from relreason.tracking import RunAbout
from relreason.train import run

from stop_requests import sessions_with_a_lost_checkpoint
from wandb_records import offline_runs, series

TINY = ["model.hidden=8", "train.batch_size=4", "train.train_examples=40", "train.eval_every_examples=16",
        "data.train_num=16", "data.train_size=5", "data.val_size=5", "data.test_size=5", "data.val_num=4",
        "data.test_num=4"]
needs_wandb = pytest.mark.skipif(importlib.util.find_spec("wandb") is None,
                                 reason="wandb is not installed: pip install 'relreason[wandb]'")


def config(data, *extra):
    return build_config("mpnn", "bfs", None, TINY + [f"data.data_dir={data}", *extra])


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """WANDB_MODE=offline with its files under tmp; returns WANDB_DIR."""
    where = tmp_path / "wandb-dir"
    where.mkdir()
    for key, value in {"WANDB_MODE": "offline", "WANDB_DIR": str(where), "WANDB_SILENT": "true",
                       "WANDB_PROJECT": "relreason-tests"}.items():
        monkeypatch.setenv(key, value)
    return where


def records(run_dir, event):
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in lines if r["event"] == event]


@needs_wandb
def test_the_offline_run_holds_metrics_config_and_the_cells_labels_beside_tensorboard(tmp_path, offline):
    about = RunAbout("mpnn / bfs / seed 0", group="single-layer", job_type="1 layer")
    run(config(tmp_path / "data", "train.log=tensorboard,wandb"), out=tmp_path / "runs", name="r",
        show_progress=False, command="relreason ablate single-layer", about=about)
    d = tmp_path / "runs" / "r"
    (w,) = offline_runs(offline)
    assert w.id == json.loads((d / "wandb.json").read_text())["id"] and w.project == "relreason-tests"
    assert (w.group, w.job_type, w.name) == ("single-layer", "1 layer", "mpnn / bfs / seed 0")
    assert w.config["model_name"] == "mpnn" and w.config["train"]["seed"] == 42 and w.config["train"]["lr"] == 1e-3
    assert w.config["run"]["command"] == "relreason ablate single-layer" and w.config["run"]["directory"] == str(d)
    assert w.config["run"]["hardware"] == json.loads((d / "results.json").read_text())["hardware"]
    vals = records(d, "val")
    assert series([w], "val/score") == [(r["examples"], r["score"]) for r in vals]
    loss = dict(series([w], "train/loss"))
    assert list(loss) == list(range(4, 41, 4)) and all(loss[r["examples"]] == r["loss"] for r in vals[1:])
    assert [step for step, _ in series([w], "train/lr")] == list(range(4, 41, 4))
    (test,) = records(d, "test")
    assert series([w], "test/score") == [(40, test["score"])]
    assert len(list(d.glob("events.out.tfevents.*"))) == 1  # and TensorBoard's event file beside it


@needs_wandb
def test_a_resumed_run_continues_the_same_wandb_run_and_sends_every_step_once(tmp_path, offline, monkeypatch):
    """As the TensorBoard test: session 1 stops at 8 examples (its checkpoint); session 2 trains on to 32 and
    stops, but its checkpoint is lost (last/ put back to session 1's, as after a kill -9); session 3 resumes
    from 8. Every session is the same W&B run; each step is sent once, the last session's from 36 on."""
    runs = tmp_path / "runs"
    d = runs / "w"
    sessions_with_a_lost_checkpoint(monkeypatch, config(tmp_path / "data", "train.log=wandb"), runs, "w",
                                    tmp_path / "spare")
    sessions = offline_runs(offline)
    assert len(sessions) == 3 and {s.id for s in sessions} == {json.loads((d / "wandb.json").read_text())["id"]}
    assert all(s.group == "" and s.job_type == "train" and s.name == "w" for s in sessions)  # a run, not a cell
    steps = [step for step, _ in series(sessions, "train/loss")]
    assert steps == list(range(4, 41, 4))  # 4, 8 | 12 ... 32 | 36, 40: none twice, none missing
    assert [step for step, _ in series(sessions[2:], "train/loss")] == [36, 40]
    assert series(sessions, "val/score")[-1] == (40, records(d, "val")[-1]["score"])
    assert [step for step, _ in series(sessions, "test/score")] == [40]


def test_trackers_are_a_comma_list_of_known_names():
    assert build_config("mpnn", "bfs", None, ["train.log=tensorboard,wandb"]).train.log == "tensorboard,wandb"
    for value, message in [("mlflow", "train.log must be one of none, tensorboard, wandb, or several "
                                      "comma-separated (tensorboard,wandb), got 'mlflow'"),
                           ("wandb,wandb", "train.log 'wandb,wandb' names a tracker twice or none with others"),
                           ("none,wandb", "names a tracker twice or none with others")]:
        with pytest.raises(RelreasonError, match=message.replace("(", r"\(").replace(")", r"\)")):
            build_config("mpnn", "bfs", None, [f"train.log={value}"])


def test_missing_wandb_is_one_line_before_anything_is_written(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` now raises ImportError
    with pytest.raises(RelreasonError) as e:
        run(config(tmp_path / "data", "train.log=tensorboard,wandb"), out=tmp_path / "runs", name="r",
            show_progress=False)
    assert e.value.message == "train.log=wandb needs the wandb package"
    assert e.value.hint.startswith("pip install 'relreason[wandb]'")
    assert not (tmp_path / "runs").exists()


def test_relreason_imports_neither_wandb_nor_submitit():
    """They are imported only where a W&B run is opened or a job submitted (a fresh interpreter: the CLI,
    training, the sweeps and the trackers all imported)."""
    code = ("import sys, relreason.cli.main, relreason.train.loop, relreason.studies.sweep, relreason.tracking; "
            "print([m for m in ('wandb', 'submitit') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
