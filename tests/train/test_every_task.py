"""Every registered task trains (two steps) and evaluates end to end, from tiny splits."""

from __future__ import annotations

import math

import pytest

from relreason.config import build_config
from relreason.tasks import TASKS
from relreason.train import run


@pytest.mark.parametrize("task", TASKS.names())
def test_train_two_steps_and_evaluate(tmp_path, task):
    cfg = build_config("mpnn", task, None, [
        "model.hidden=8", "train.batch_size=4", "train.train_examples=8", "train.eval_every_examples=8",
        "data.train_num=8", "data.train_size=5", "data.val_size=5", "data.test_size=6",
        f"data.data_dir={tmp_path / 'data'}"])
    res = run(cfg, out=tmp_path / "runs", name="r", show_progress=False)
    assert res.steps == 2
    assert res.test and math.isfinite(res.test["score"])
    assert set(res.test["outputs"]) == {f.name for f in TASKS.get(task).spec.values() if f.stage.value == "output"}
