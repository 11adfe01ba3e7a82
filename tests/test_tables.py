"""Published tables as data (relreason.studies.tables): the figures are consistent with the papers' own
averages, every name they use is registered, and cells are marked comparable only at the protocol."""

from __future__ import annotations

import pytest
from fake_runs import results_json

from relreason.models.catalog import find_model
from relreason.studies.ablations import ABLATIONS
from relreason.studies.cells import cell_state, plan_cells
from relreason.studies.tables import TABLES
from relreason.tasks import TASKS, expand_tasks


@pytest.mark.parametrize("name", TABLES.names())
def test_every_table_names_registered_models_and_tasks(name):
    study = TABLES.get(name)
    tasks = expand_tasks(study.tasks)
    for v in study.variants:
        find_model(v.model)
    assert {t for _, t in study.figures} <= set(tasks) and all(t in TASKS for t in tasks)
    assert {v for v, _ in study.figures} | set(study.averages) <= {v.label for v in study.variants}


@pytest.mark.parametrize("name", TABLES.names())
def test_per_task_figures_average_to_the_published_average(name):
    """A typo in one of the per-task figures shows up as a mismatch with the paper's own average row
    (the paper averages unrounded scores: 0.02 covers that, e.g. Table 15's node-pointer column averages to
    81.015 against its printed 81.00; a slipped digit moves an 8-task mean by 0.1 / 8 or more)."""
    study = TABLES.get(name)
    tasks = expand_tasks(study.tasks)
    for label, published in study.averages.items():
        figures = [study.figures[(label, t)].mean for t in tasks if (label, t) in study.figures]
        if len(figures) < len(tasks):
            continue  # an average the paper prints without per-task figures (Table 9)
        assert sum(figures) / len(figures) == pytest.approx(published.mean, abs=0.02), label


def test_core_node_figures_are_the_papers_table_16():
    """Table 16: RT *with* a core node 57.65, *without* (concatenation, the paper's choice) 57.57."""
    abl = ABLATIONS.get("core-node")
    core = next(v for v in abl.variants if v.delta == {"processor": {"global_vector": "core"}})
    cat = next(v for v in abl.variants if not v.delta)
    assert abl.averages[core.label].mean == 57.65 and abl.averages[cat.label].mean == 57.57
    assert abl.figures[(core.label, "mst_kruskal")].mean == 75.59 and abl.figures[(cat.label, "mst_kruskal")].mean == 64.91
    assert expand_tasks(abl.tasks) == ["binary_search", "find_maximum_subarray_kadane", "graham_scan", "heapsort",
                                       "kmp_matcher", "mst_kruskal", "task_scheduling"]


def test_cells_are_comparable_only_at_the_protocol(tmp_path):
    study = TABLES.get("rt-table19")
    (paper,) = plan_cells(study, ["bellman_ford"], (0,), None, tmp_path, [], ["rt"])
    assert paper.comparable and paper.config.recipe == "rt" and paper.config.train.train_examples == 320_000
    assert paper.directory == tmp_path / "cells" / "rt" / "rt" / "bellman_ford" / "seed0"
    (machine,) = plan_cells(study, ["bellman_ford"], (0,), None, tmp_path, ["train.threads=1", "train.device=cpu"],
                            ["rt"])
    assert machine.comparable  # where and how fast it runs is not the protocol
    (quick,) = plan_cells(study, ["bellman_ford"], (0,), "quick", tmp_path, [], ["rt"])
    assert not quick.comparable and "recipe quick" in quick.why_not
    (lr,) = plan_cells(study, ["bellman_ford"], (0,), None, tmp_path, ["train.lr=0.001"], ["rt"])
    assert not lr.comparable and lr.why_not == "train.lr differs from the protocol (rt)"
    (same,) = plan_cells(study, ["bellman_ford"], (0,), None, tmp_path, ["train.lr=0.00025"], ["rt"])
    assert same.comparable  # a --set of the protocol's own value is the protocol
    copy = tmp_path / "rt.yaml"  # a recipe file named like the protocol but with other values
    copy.write_text("inherit: rt\ntrain:\n  lr: 0.001\n")
    (path,) = plan_cells(study, ["bellman_ford"], (0,), str(copy), tmp_path, [], ["rt"])
    assert not path.comparable and "train.lr" in path.why_not
    (v1,) = plan_cells(study, ["quickselect"], (0,), None, tmp_path, [], ["rt"])
    assert v1.comparable and v1.config.model.drop_hints == ("pivot",)  # the fork's v1 data: no pivot hint
    (matcher,) = plan_cells(study, ["naive_string_matcher"], (0,), None, tmp_path, [], ["rt"])
    assert matcher.comparable and matcher.config.data.matcher_v1_splits == ("train", "val", "test")  # v1's, drawn
    (tr,) = plan_cells(TABLES.get("rt-table13"), ["bellman_ford"], (0,), None, tmp_path, [], ["transformer"])
    assert not tr.comparable and "re-tuned" in tr.why_not


def test_tables_of_one_configuration_share_their_cells(tmp_path):
    a = plan_cells(TABLES.get("rt-table19"), ["bellman_ford"], (0,), None, tmp_path, [], ["rt"])[0]
    b = plan_cells(TABLES.get("rt-table17"), ["bellman_ford"], (0,), None, tmp_path, [])
    assert b[0].directory == a.directory and b[0].config.to_dict() == a.config.to_dict()
    assert b[1].directory.parent.parent.name == "rt+processor.edge_updates=false"


def test_a_cell_finished_with_other_threads_is_the_same_cell(tmp_path):
    (cell,) = plan_cells(TABLES.get("ibarz2022"), ["bfs"], (0,), None, tmp_path, [])
    stored = cell.config.to_dict()
    stored["train"]["threads"] = 1
    cell.run_dir.mkdir(parents=True)
    (cell.run_dir / "results.json").write_text(results_json(stored))
    assert cell_state(cell) == "done"
    stored["train"]["lr"] = 0.01
    (cell.run_dir / "results.json").write_text(results_json(stored))
    assert cell_state(cell) == "stale"


@pytest.mark.parametrize("name", TABLES.names())
def test_each_published_plus_minus_is_read_as_its_paper_defines_it(name):
    """The RT paper's ± is the std over its 20 seeds (Tables 13-18, Appendix D); Ibarz et al. do not define
    theirs (Table 2, quoting the CLRS-30 baselines too): undefined, read the way that is harder to agree with.
    Every figure carries the paper's seed count, which the verdict's interval needs."""
    from relreason.runs.stats import Spread

    study = TABLES.get(name)
    for (label, task), fig in study.figures.items():
        want = Spread.STD if study.source.startswith("Diao & Loynd") else Spread.UNDEFINED
        assert fig.spread is want and fig.seeds == {Spread.STD: 20}.get(want, fig.seeds) and fig.seeds, (label, task)
    if name in ("clrs30", "ibarz2022"):
        assert {f.seeds for f in study.figures.values()} == {3 if name == "clrs30" else 10}


@pytest.mark.parametrize("registry", ["tables", "ablations"])
def test_no_column_label_names_another_columns_model(registry):
    """`--models` takes a model (its columns) or a label (that column alone): a label that named another column's
    model would make `--models` pick both."""
    reg = TABLES if registry == "tables" else ABLATIONS
    for name in reg.names():
        study = reg.get(name)
        models = {v.model for v in study.variants}
        assert not [v.label for v in study.variants if v.label != v.model and v.label in models], name
