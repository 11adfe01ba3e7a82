"""Every registered task trains (two steps) and evaluates end to end, from tiny splits."""

from __future__ import annotations

import math

import pytest

from relreason.config import build_config
from relreason.tasks import TASKS

TINY_DATA = {  # per task kind: the smallest splits that still exercise everything
    "clrs": ["data.train_num=8", "data.train_size=5", "data.val_size=5", "data.test_size=6"],
    "lobster": ["data.train_num=8", "data.val_num=4", "data.test_num=4", "data.test_backbone=6"],
}


@pytest.mark.parametrize("task", [t for t in TASKS.names() if TASKS.get(t).kind in TINY_DATA])
def test_train_two_steps_and_evaluate(tmp_path, task):
    from relreason.train import run

    cfg = build_config("mpnn", task, "default", [
        "model.hidden=8", "train.batch_size=4", "train.train_examples=8", "train.eval_every_examples=8",
        *TINY_DATA[TASKS.get(task).kind], f"data.data_dir={tmp_path / 'data'}"])
    res = run(cfg, out=tmp_path / "runs", name="r", show_progress=False)
    assert res.steps == 2
    assert res.test and math.isfinite(res.test["score"])
    assert set(res.test["outputs"]) == {f.name for f in TASKS.get(task).spec.values() if f.stage.value == "output"}
