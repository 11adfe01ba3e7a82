"""Which graph family an evaluation used, and the runs `--graph` cannot apply to (train.evaluation)."""

from __future__ import annotations

import pytest

from relreason.config import build_config
from relreason.errors import RelreasonError
from relreason.train.evaluation import check_graphs, evaluated_graph


@pytest.mark.parametrize("model, task, message", [
    ("mpnn", "insertion_sort", "insertion_sort draw no graph"),
    ("mpnn", "bfs,insertion_sort", "insertion_sort draw no graph"),
    ("mpnn", "lobster", "lobster is not one of them"),
    ("text_transformer", "text:bfs", "text:bfs is not one of them"),
])
def test_graph_families_are_refused_for_runs_that_draw_no_graph(model, task, message):
    with pytest.raises(RelreasonError, match=message):
        check_graphs(build_config(model, task, "default"), ["ws"])


def test_graph_families_apply_to_graph_algorithm_runs():
    check_graphs(build_config("mpnn", "bfs,dfs", "default"), ["ws", "clrs", "tree"])


def test_the_evaluated_graph_is_the_given_one_else_the_runs_for_that_split():
    cfg = build_config("mpnn", "bfs", "default", ["data.graph=ws:p=0.1,k=4"])
    assert evaluated_graph(cfg, "test", None) == "ws:k=4,p=0.1"
    assert evaluated_graph(cfg, "val", None) is None  # graph_splits: test only
    assert evaluated_graph(cfg, "val", "tree") == "tree"
    assert evaluated_graph(cfg, "test", "clrs") is None
    assert evaluated_graph(build_config("mpnn", "lobster", "default"), "test", None) is None
