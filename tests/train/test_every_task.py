"""Every registered task (graph, lobster and text) trains (two steps) and evaluates end to end, from
tiny splits. A task of a kind this file does not know fails here, so no task is silently left out."""

from __future__ import annotations

import math

import pytest

from relreason.config import build_config
from relreason.tasks import TASKS

# per task kind: (the model that trains it, the smallest settings that still exercise everything)
TINY = {
    "clrs": ("mpnn", ["model.hidden=8", "data.train_num=8", "data.train_size=5", "data.val_size=5",
                      "data.test_size=6"]),
    "lobster": ("mpnn", ["model.hidden=8", "data.train_num=8", "data.val_num=4", "data.test_num=4",
                         "data.test_backbone=6"]),
    # questions are generated in memory (no data directory); a context that holds the longest
    # question at these sizes (floyd_warshall's at 5 nodes exceeds 512 tokens)
    "text": ("text_transformer", ["model.layers=1", "model.width=16", "model.heads=2", "model.context=2048",
                                  "model.max_position=2048", "data.train_num=8", "data.val_num=2",
                                  "data.test_num=2", "data.test_sizes=[5]"]),
}
TEXT_SCORES = {"shape", "parse", "clrs"}  # TransNAR's three scores of a text answer


def test_every_kind_of_task_is_covered():
    assert {TASKS.get(t).kind for t in TASKS.names()} <= set(TINY)


@pytest.mark.parametrize("task", TASKS.names())
def test_train_two_steps_and_evaluate(tmp_path, task):
    from relreason.train import run

    kind = TASKS.get(task).kind
    model, settings = TINY[kind]
    data_dir = [] if kind == "text" else [f"data.data_dir={tmp_path / 'data'}"]
    cfg = build_config(model, task, "default", ["train.batch_size=4", "train.train_examples=8",
                                                "train.eval_every_examples=8", *settings, *data_dir])
    res = run(cfg, out=tmp_path / "runs", name="r", show_progress=False, log=lambda m: None)
    assert res.steps == 2
    assert res.test and math.isfinite(res.test["score"])
    if kind == "text":
        assert set(res.test["outputs"]) == TEXT_SCORES
    else:
        assert set(res.test["outputs"]) == {f.name for f in TASKS.get(task).spec.values()
                                            if f.stage.value == "output"}
