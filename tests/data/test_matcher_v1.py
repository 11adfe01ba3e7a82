"""CLRS v1.0.0's string matcher splits (`data.matcher_v1_splits`): the data the CLRS-30, Ibarz et al. and RT
papers tested the string matchers on, and the recipes that ask for them. The splits' values against the
v1.0.0 reference are tests/data/test_faithfulness.py's."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from relreason.config import build_config
from relreason.data.algorithms.strings import MatcherSampler, sample_matcher_v1
from relreason.data.config import ClrsDataConfig, DataStream
from relreason.data.generate import cached_split, dataset_path
from relreason.errors import RelreasonError
from relreason.tasks import TASKS


def test_the_v1_sampler_puts_a_quarter_needle_on_top_of_the_haystack():
    """Hand values: v1 draws the needle (n // 4 symbols), then a haystack of n, then the embedding position
    in [0, n - n // 4), from one RandomState in that order."""
    rng = np.random.RandomState(7)
    T, P = sample_matcher_v1(rng, 16)
    ref = np.random.RandomState(7)
    needle = ref.randint(0, 4, size=4)
    haystack = ref.randint(0, 4, size=16)
    at = ref.choice(16 - 4)
    haystack[at:at + 4] = needle
    assert T.tolist() == haystack.tolist() and P.tolist() == needle.tolist()
    assert [len(x) for x in sample_matcher_v1(np.random.RandomState(0), 3)] == [3, 1]  # below 4: a needle of 1
    with pytest.raises(ValueError, match="takes no needle length"):
        MatcherSampler(length_needle=3, v1=True)(np.random.RandomState(0), 16)


@pytest.mark.parametrize("value, message", [
    (["test", "test"], "distinct splits"), (["dev"], "distinct splits of train, val, test"),
])
def test_matcher_v1_splits_are_checked(value, message):
    problems = ClrsDataConfig(matcher_v1_splits=tuple(value)).problems()
    assert any(message in p for p in problems), problems


def test_the_ibarz_stream_takes_the_v1_sampler_for_its_test_only():
    ibarz = ClrsDataConfig(stream=DataStream.IBARZ, matcher_v1_splits=("train", "test"))
    assert any("applies to the test split only" in p for p in ibarz.problems())
    assert not dataclasses.replace(ibarz, matcher_v1_splits=("test",)).problems()


def test_the_v1_sampler_is_refused_for_tasks_that_are_no_string_matcher():
    with pytest.raises(RelreasonError, match="applies to the string matchers .*bellman_ford is none of them"):
        build_config("triplet_gmpnn", "bellman_ford", "triplet_gmpnn", ["data.matcher_v1_splits=[test]"])
    # a multi-task run with a string matcher among its tasks takes it (for the string matchers alone)
    cfg = build_config("mpnn", "bfs,naive_string_matcher", None, ["data.matcher_v1_splits=[test]"])
    assert cfg.data.matcher_v1("test", "naive_string_matcher") and not cfg.data.matcher_v1("test", "bfs")


@pytest.mark.parametrize("recipe, splits", [
    ("triplet_gmpnn", ("test",)),  # Ibarz et al.: run.py tests on the CLRS30 v1.0.0 archive
    ("floydnet", ("test",)),  # inherits Triplet-GMPNN's protocol
    ("clrs30", ("train", "val", "test")),  # the CLRS-30 paper ran on the v1.0.0 dataset
    ("rt", ("train", "val", "test")), ("rt_table2", ("train", "val", "test")),  # the RT authors' v1 fork
    ("rt_untuned", ("train", "val", "test")),
    ("et", ("test",)),  # the ET fork reads the v1.0.0 archive for its test
    ("transnar_ood_nar", ()),  # the frozen NAR's own test is a diagnostic, at the benchmark's split
    ("default", ()),
])
@pytest.mark.parametrize("task", ["naive_string_matcher", "kmp_matcher"])
def test_the_papers_recipes_test_the_string_matchers_on_v1_data(recipe, splits, task):
    if recipe == "transnar_ood_nar" and task == "kmp_matcher":
        splits = ("test",)  # the study's NARs are of its four algorithms, kmp_matcher is none
    model = {"rt_table2": "mpnn", "rt_untuned": "mpnn", "clrs30": "mpnn", "rt": "rt", "et": "et",
             "floydnet": "floydnet"}.get(recipe, "triplet_gmpnn")
    assert build_config(model, task, recipe).data.matcher_v1_splits == splits


@pytest.mark.parametrize("recipe", ["triplet_gmpnn", "clrs30", "rt", "et"])
def test_other_tasks_keep_their_config_so_committed_cells_stay_the_same_cells(recipe):
    """The recipes scope the key to the string matchers: every other task's config is what it was before
    (the key at its default), so no committed cell of theirs changes identity."""
    model = {"clrs30": "mpnn", "rt": "rt", "et": "et"}.get(recipe, "triplet_gmpnn")
    for task in ("bellman_ford", "binary_search", "quickselect"):
        cfg = build_config(model, task, recipe)
        assert cfg.data.matcher_v1_splits == () and "data.matcher_v1_splits" not in cfg.sources


def test_a_run_of_the_ibarz_protocol_tests_the_string_matcher_on_80_nodes(tmp_path):
    cfg = build_config("triplet_gmpnn", "naive_string_matcher", "triplet_gmpnn",
                       [f"data.data_dir={tmp_path}", "data.test_num=3", "data.val_num=2"])
    task = TASKS.get("naive_string_matcher")
    test = task.load("test", cfg.data)
    assert test.n == 80 and len(test) == 3 and test.meta["sampler"] == "clrs v1.0.0"
    assert [p.name for p in (tmp_path / "naive_string_matcher").glob("*.clrs_v1.safetensors")] == ["custom_n64_s3_k3.clrs_v1.safetensors"]
    # the ibarz stream's validation is run.py's own (today's sampler at 20 nodes), not the archive's
    from relreason.train.workloads import ibarz_validation, split_label

    assert ibarz_validation(cfg, "naive_string_matcher", 0).n == 20
    assert split_label(test, "test") == "test, n=80, clrs v1.0.0 sampler, 3 samples"


def test_the_cache_keeps_the_two_samplers_splits_apart(tmp_path):
    """A v1 split never answers for the benchmark's, nor the benchmark's for a v1 one (files and metadata)."""
    v2 = cached_split("kmp_matcher", "test", tmp_path, num=2)
    v1 = cached_split("kmp_matcher", "test", tmp_path, num=2, v1=True)
    assert (v2.n, v1.n) == (64, 80) and "sampler" not in v2.meta
    a, b = (dataset_path(tmp_path, "kmp_matcher", "custom_n64_s3_k2", None, v) for v in (False, True))
    assert a.is_file() and b.is_file() and a != b
    b.unlink()
    a.rename(b)  # the benchmark's split under the v1 name: stale by its metadata, drawn again
    assert cached_split("kmp_matcher", "test", tmp_path, num=2, v1=True).n == 80


def test_the_larger_diagnostic_test_draws_at_the_protocols_size(monkeypatch):
    """The selection diagnostic's larger test is drawn at data.test_size (64), not at the test graphs' node
    count (80 for a v1 string matcher: --ood 80 would draw 100-node graphs)."""
    from relreason.studies.results import larger_test
    from relreason.train import evaluation

    asked = {}
    monkeypatch.setattr(evaluation, "evaluate_checkpoint",
                        lambda path, **kw: asked.update(kw) or {"score": 0.5, "label": "test, n=80"})
    res = SimpleNamespace(task="naive_string_matcher", per_task=None, test_size=80, config={"data": {"test_size": 64}})
    assert larger_test(Path("best"), res) == {"large_test": 0.5, "large_test_label": "test, n=80"}
    assert asked["ood"] == 64 and asked["num"] == 4096  # 10 x the protocol's 2,048, at most 4,096


@pytest.mark.parametrize("recipe, model, dropped", [
    ("clrs30", "mpnn", ("pivot",)), ("rt", "rt", ("pivot",)), ("rt_table2", "gat", ("pivot",)),
    ("rt_untuned", "pgn", ("pivot",)),  # v1 data: CLRS v1.0.0's quickselect records no pivot hint
    ("triplet_gmpnn", "triplet_gmpnn", ()), ("et", "et", ()),  # trained on today's samplers
])
def test_the_papers_trained_on_v1_data_drop_quickselects_pivot_hint(recipe, model, dropped):
    assert build_config(model, "quickselect", recipe).model.drop_hints == dropped
    assert build_config(model, "bellman_ford", recipe).model.drop_hints == ()  # only quickselect's scope


def test_a_dropped_hint_is_neither_read_nor_predicted():
    """The prepared spec and a batch hold no `pivot`; the other hints, their steps and the outputs are the same."""
    from relreason.data import generate
    from relreason.models.batch import Batch, prepare_spec
    from relreason.models.config import ModelConfig

    ds = generate("quickselect", num=3, size=8, seed=0)
    full, dropped = ModelConfig(), ModelConfig(drop_hints=("pivot",))
    spec = prepare_spec(ds.spec, dropped, "quickselect")
    assert "pivot" in prepare_spec(ds.spec, full, "quickselect") and "pivot" not in spec
    a, b = Batch.from_dataset(ds, full), Batch.from_dataset(ds, dropped)
    assert set(a.hints) - set(b.hints) == {"pivot"} and b.lengths.tolist() == a.lengths.tolist()
    assert all((a.hints[k] == b.hints[k]).all() for k in b.hints) and set(a.outputs) == set(b.outputs)


@pytest.mark.parametrize("sets, message", [
    (["model.drop_hints=[pivot]"], "model.drop_hints: bfs has no hint pivot"),
    (["model.drop_hints=[pred_h]"], "other than pred_h"),
    (["model.drop_hints=[u,u]"], "distinct hints"),
])
def test_drop_hints_must_name_hints_of_the_task(sets, message):
    with pytest.raises(RelreasonError, match=message):
        build_config("mpnn", "bfs", None, sets)
