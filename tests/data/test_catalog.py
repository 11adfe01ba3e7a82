"""The algorithm catalog: what a registration may declare, the live views, the task groups' order.

A registration that fails leaves nothing behind, so the bad ones are tried here in-process; a good
one would stay registered, so test_one_place.py registers its algorithm in a fresh interpreter.
"""

from __future__ import annotations

import numpy as np
import pytest

from relreason.data import samplers
from relreason.data.algorithms import (ALGORITHM_INFO, ALGORITHMS, CLRS_TEXT_LENGTHS, SPECS, StreamForm, TextForm,
                                       algorithm_groups, canonical_split, live_names, register)
from relreason.data.specs import CANONICAL_SPLITS, Location, Stage, Type
from relreason.errors import RelreasonError

# Independent references: the reference's specs.py order of the 30 (its `clrs30` task group, whose
# order seeds each task's data in a multi-task run), and the RT paper's eight core tasks.
REFERENCE_ORDER = [
    "insertion_sort", "bubble_sort", "heapsort", "quicksort", "minimum", "binary_search", "quickselect",
    "find_maximum_subarray_kadane", "activity_selector", "task_scheduling", "matrix_chain_order", "lcs_length",
    "optimal_bst", "dfs", "bfs", "topological_sort", "articulation_points", "bridges",
    "strongly_connected_components", "mst_kruskal", "mst_prim", "bellman_ford", "dijkstra", "dag_shortest_paths",
    "floyd_warshall", "naive_string_matcher", "kmp_matcher", "segments_intersect", "graham_scan", "jarvis_march"]
CORE8 = ["activity_selector", "bellman_ford", "binary_search", "find_maximum_subarray_kadane", "graham_scan",
         "insertion_sort", "matrix_chain_order", "naive_string_matcher"]

GOOD = dict(family="toys", inputs="pos N sc, key N sc", outputs="best N m1", hints="best_h N m1",
            sample=lambda rng, n: (samplers.random_sequence(rng, n),))


def _attempt(name: str = "toy_scan", **changes) -> None:
    register(name, **{**GOOD, **changes})(lambda A: None)


@pytest.mark.parametrize("name, changes, message", [
    ("Toy", {}, "snake_case"),
    ("toy_scan", {"inputs": "pos N sc, key N"}, "is not `name LOC TYPE`"),
    ("toy_scan", {"inputs": "pos X sc"}, "location is one of"),
    ("toy_scan", {"outputs": "best N bool"}, "type one of"),
    ("toy_scan", {"hints": "best_h N m1, pos N sc"}, "declared twice"),
    ("toy_scan", {"hints": "phase G cat"}, "class count"),
    ("toy_scan", {"classes": {"best": 3}}, "name no categorical"),
    ("toy_scan", {"classes": [("best", 3)]}, "classes must map"),
    ("toy_scan", {"inputs": ["pos N sc"]}, "must be a string"),
    ("toy_scan", {"eval_multiplier": 0}, "eval_multiplier must be"),
    ("toy_scan", {"min_size": 1.5}, "min_size must be"),
    ("toy_scan", {"sample": None}, "must be functions"),
    ("toy_scan", {"text": {"trace": ()}}, "TextForm"),
    ("toy_scan", {"stream": True}, "StreamForm"),
    ("toy_scan", {"groups": "core8"}, "tuple of group names"),
    ("toy_scan", {"groups": ("extras", "extras")}, "twice"),
    ("toy_scan", {"text": TextForm(trace=("i",))}, "not hints"),
    ("toy_scan", {"text": TextForm(answer_from_trace=True)}, "does not name"),
    ("toy_scan", {"text": TextForm(integer_inputs={"A"})}, "not inputs"),
    ("toy_scan", {"text": TextForm(train_lengths=(4,))}, "one of train_lengths and val_stop"),
    ("toy_scan", {"stream": StreamForm(pred_as_input=True)}, "pred_h"),
    ("sorting", {}, "already names a task group"),
    ("core8", {}, "already names a task group"),
    ("toy_scan", {"family": "bfs"}, "family 'bfs' is already"),
    ("toy_scan", {"family": "core8"}, "family 'core8' is already"),
    ("toy_scan", {"family": "clrs30"}, "family 'clrs30' is already"),
    ("toy_scan", {"groups": ("graphs",)}, "group 'graphs' is already"),
    ("toy_scan", {"groups": ("Core 8",)}, "snake_case"),
    ("toy_scan", {"outputs": "best N m1, top G sc"}, "mix scalar features (top: squared error"),
    ("toy_scan", {"metric": "clrs_mse"}, "averages its scalar outputs, and it has none"),
    ("toy_scan", {"metric": "accuracy"}, "not an output metric"),
])
def test_a_bad_registration_is_refused_naming_the_algorithm(name, changes, message):
    with pytest.raises(RelreasonError, match="cannot register algorithm") as caught:
        _attempt(name, **changes)
    assert message in str(caught.value) and repr(name) in str(caught.value)
    assert name not in ALGORITHMS and "toys" not in algorithm_groups()


def test_a_name_is_registered_once():
    with pytest.raises(ValueError, match="registered twice"):
        _attempt("bfs")


def test_the_spec_is_parsed_from_the_registration():
    spec = SPECS["heapsort"]
    assert list(spec)[:3] == ["pos", "key", "pred"]
    phase = spec["phase"]
    assert (phase.stage, phase.location, phase.type, phase.num_classes) == (Stage.HINT, Location.GRAPH,
                                                                            Type.CATEGORICAL, 3)
    assert spec["pred"].type is Type.SHOULD_BE_PERMUTATION and spec["pred"].stage is Stage.OUTPUT
    assert all(f.num_classes == 0 for f in spec.values() if f.type is not Type.CATEGORICAL)


def test_views_follow_the_registry():
    assert list(ALGORITHM_INFO) == list(SPECS) == ALGORITHMS.names()
    assert all(ALGORITHM_INFO[n] is ALGORITHMS.get(n) and SPECS[n] is ALGORITHMS.get(n).spec for n in ALGORITHMS)
    assert "nope" not in SPECS and SPECS.get("nope") is None and 3 not in ALGORITHM_INFO
    sparse = live_names(lambda a: a.stream.sparse)
    assert "bridges" in sparse and "bfs" not in sparse and sparse <= set(ALGORITHMS.names())


def test_the_ibarz_recipe_options_are_run_py_s():
    """run.py's lists, written out: the lower edge probabilities and PRED_AS_INPUT_ALGOS (less
    bipartite_matching and find_maximum_subarray, which are not among the 30)."""
    assert set(live_names(lambda a: a.stream.sparse)) == {"articulation_points", "bridges", "mst_kruskal"}
    assert set(live_names(lambda a: a.stream.pred_as_input)) == {
        "binary_search", "minimum", "find_maximum_subarray_kadane", "matrix_chain_order", "lcs_length", "optimal_bst",
        "activity_selector", "task_scheduling", "naive_string_matcher", "kmp_matcher", "jarvis_march"}


def test_groups_keep_the_published_orders():
    groups = algorithm_groups()
    assert list(groups)[:2] == ["core8", "clrs30"]
    assert groups["core8"] == CORE8
    assert groups["clrs30"] == REFERENCE_ORDER == ALGORITHMS.names()
    families = [g for g in groups if g not in ("core8", "clrs30")]
    assert families == ["sorting", "searching", "divide_and_conquer", "greedy", "dynamic_programming", "graphs",
                        "strings", "geometry"]
    assert [n for g in families for n in groups[g]] == REFERENCE_ORDER
    assert all(ALGORITHMS.get(a).builtin for a in REFERENCE_ORDER)


@pytest.mark.parametrize("name", ALGORITHMS.names())
def test_every_benchmark_algorithm_declares_its_text_form(name):
    form = ALGORITHMS.get(name).text
    assert form is not None
    k = len(form.train_lengths)
    assert form.train_lengths == CLRS_TEXT_LENGTHS[:k] and 4 < form.val_stop <= 65


@pytest.mark.parametrize("name", ALGORITHMS.names())
def test_canonical_splits_apply_the_declared_multiplier(name):
    mult = ALGORITHMS.get(name).eval_multiplier
    assert canonical_split(name, "train") == CANONICAL_SPLITS["train"]
    for split in ("val", "test"):
        assert canonical_split(name, split).num == 32 * mult
    with pytest.raises(RelreasonError, match="unknown split"):
        canonical_split(name, "dev")


def test_a_text_form_normalizes_its_collections():
    form = TextForm(trace=["s"], integer_inputs=["A", "A"], train_lengths=np.array([4, 5]).tolist(), val_stop=6)
    assert form.trace == ("s",) and form.integer_inputs == frozenset({"A"}) and form.train_lengths == (4, 5)


def test_a_scalar_output_is_scored_as_an_error_and_the_lowest_validation_is_kept(tmp_path):
    """Issue 31: a plugin's scalar-output algorithm was recorded higher-is-better, so best-checkpoint
    selection kept the untrained model. Its headline is now the squared error, lower is better, everywhere."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).with_name("scalar_output_check.py")
    done = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["task_metric"] == got["metric"] == "clrs_mse" and got["lower_is_better"] is True
    scores = [s for _, s in got["validations"]]
    assert got["best_val"] == min(scores) and got["best_examples"] == next(e for e, s in got["validations"]
                                                                           if s == min(scores))
    assert scores[0] > min(scores)  # it learned: the untrained model (the old "best") is not kept
    assert got["measures"]["output.peak"] == "MSE ↓" and got["measures"]["score (mean of outputs)"] == "MSE ↓"
    assert got["measures"]["hint.peak_h"] == "MSE ↓"
