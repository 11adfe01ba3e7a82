"""Configuration: precedence defaults < recipe < --set, strict validation with key paths."""

from __future__ import annotations

import pytest

from relreason.config import RECIPE_DIR, build_config, config_yaml, paper_recipe, parse_overrides, recipe_names
from relreason.errors import RelreasonError
from relreason.models.catalog import model_names

TASK = "bellman_ford"


def test_defaults_are_the_reference_protocol():
    cfg = build_config("mpnn", TASK, "default")
    assert (cfg.model.hidden, cfg.train.lr, cfg.train.grad_clip, cfg.train.batch_size) == (128, 1e-3, 1.0, 32)
    assert cfg.train.train_examples == 10_000 * 32


def test_precedence_recipe_then_set(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("train:\n  lr: 0.0005\n  batch_size: 8\n")
    cfg = build_config("mpnn", TASK, str(recipe), ["train.lr=2e-4"])
    assert cfg.train.lr == 2e-4 and cfg.train.batch_size == 8


@pytest.mark.parametrize("overrides, path", [
    (["train.lrr=1"], "train.lrr: unknown key (did you mean train.lr?)"),
    (["train.lr=abc"], "train.lr: expected a number"),
    (["train.batch_size=2.5"], "train.batch_size: expected an integer"),
    (["model.hint_mode=sometimes"], "model.hint_mode"),
    (["bogus.key=1"], "bogus: unknown section"),
    (["processor.no_such_option=1"], "processor.no_such_option: unknown key"),
])
def test_bad_values_name_their_path(overrides, path):
    with pytest.raises(RelreasonError) as e:
        build_config("mpnn", TASK, None, overrides)
    assert path in e.value.message


def test_all_errors_reported_at_once():
    with pytest.raises(RelreasonError) as e:
        build_config("mpnn", TASK, None, ["train.lrr=1", "train.batch_size=x"])
    assert "train.lrr" in e.value.message and "train.batch_size" in e.value.message


@pytest.mark.parametrize("item", ["nonsense", "a.b.c=1", "=3"])
def test_malformed_set(item):
    with pytest.raises(RelreasonError):
        parse_overrides([item])


def test_unknown_recipe_and_model():
    with pytest.raises(RelreasonError, match="unknown recipe"):
        build_config("mpnn", TASK, "quik")
    with pytest.raises(RelreasonError, match="unknown model"):
        build_config("mpn", TASK)


@pytest.mark.parametrize("recipe", recipe_names())
def test_every_recipe_is_valid_and_opens_with_its_command(recipe):
    first = (RECIPE_DIR / f"{recipe}.yaml").read_text().splitlines()[0]
    assert first.startswith("# relreason train "), first
    model, task = first.split()[3:5]
    assert model in model_names()
    build_config(model, task, recipe)


@pytest.mark.parametrize("model, task, recipe", [
    ("rt", "bellman_ford", "rt"), ("et", "bellman_ford", "et"), ("dat", "insertion_sort", "dat"),
    ("triplet_gmpnn", "bfs", "triplet_gmpnn"), ("transformer", "bfs", "transformer"), ("mpnn", "bfs", "default"),
    ("rt", "lobster", "lobster_rt"), ("gat", "lobster", "lobster_gat"), ("gcn", "lobster_weighted", "lobster_gcn"),
    ("mpnn", "lobster", "default"), ("triplet_gmpnn", "core8", "triplet_gmpnn"),
])
def test_without_recipe_the_paper_recipe_is_used(model, task, recipe):
    assert paper_recipe(model, task) == recipe
    cfg = build_config(model, task)
    assert cfg.recipe == recipe
    assert cfg.to_dict() == build_config(model, task, recipe).to_dict()


def test_print_config_names_the_source_of_every_key():
    cfg = build_config("rt", TASK, None, ["train.seed=3"])
    assert cfg.sources["train.lr"].startswith("recipe rt: ")  # with the recipe's own comment
    assert cfg.sources["train.seed"] == "--set"
    assert "processor.heads" not in cfg.sources  # the processor's own defaults are its paper's
    assert build_config("et", TASK, "et_cpu").sources["model.pointer_decoding"] == "model et"  # et.yaml sets it
    text = config_yaml(cfg, sources=True)
    lines = [x for x in text.splitlines() if x.startswith("  ")]
    assert lines and all("  # " in x for x in lines)  # every key says where it came from
    assert "  seed: 3  # --set" in text
    assert "  batch_size: 32  # default" not in text
    lobster = config_yaml(build_config("rt", "lobster"), sources=True)
    assert "train_size" not in lobster and "test_size" not in lobster  # node sizes do not apply to lobsters
    assert "model lobster_rt" not in lobster and "task lobster" in lobster


def test_quick_keeps_the_paper_protocol_and_says_it_deviates():
    from relreason.config import recipe_deviation

    quick, paper = build_config("rt", TASK, "quick"), build_config("rt", TASK)
    assert quick.train.lr == paper.train.lr and quick.train.batch_size == paper.train.batch_size
    assert quick.train.train_examples < paper.train.train_examples
    assert "smoke" in recipe_deviation("quick")


@pytest.mark.parametrize("item, message", [
    ("data.train_size=0", "data.train_size"), ("data.test_size=-3", "data.test_size"),
    ("data.train_num=0", "data.train_num"), ("data.val_num=-1", "data.val_num"),
    ("train.grad_clip=0", "train.grad_clip"), ("train.grad_clip=-1", "train.grad_clip"),
    ("train.lr=0", "train.lr"), ("train.lr=-1e-3", "train.lr"), ("train.lr=.nan", "train.lr"),
    ("train.lr=.inf", "train.lr"), ("train.threads=-1", "train.threads"), ("train.seed=-1", "train.seed"),
    ("train.batch_size=0", "train.batch_size"), ("train.train_examples=0", "train.train_examples"),
    ("train.eval_batch_size=0", "train.eval_batch_size"), ("train.device=gpu", "train.device"),
    ("data.stream_sizes=[]", "data.stream_sizes"), ("model.hidden=0", "model.hidden"),
])
def test_values_no_run_can_use_are_rejected_never_defaulted(item, message):
    with pytest.raises(RelreasonError) as e:
        build_config("mpnn", TASK, None, [item])
    assert message in e.value.message


def test_no_clipping_is_expressible():
    assert build_config("mpnn", TASK, None, ["train.grad_clip=null"]).train.grad_clip is None


def test_lobster_data_section_has_no_node_sizes():
    with pytest.raises(RelreasonError, match="data.train_size: unknown key"):
        build_config("gcn", "lobster", None, ["data.train_size=5"])


def test_text_and_graph_models_do_not_mix():
    with pytest.raises(RelreasonError, match="cannot train on"):
        build_config("mpnn", "text:insertion_sort")


def test_multi_task_strings_of_one_kind_only():
    cfg = build_config("triplet_gmpnn", "bfs,dfs", "default")
    assert cfg.tasks == ["bfs", "dfs"]
    with pytest.raises(RelreasonError, match="mix kinds"):
        build_config("mpnn", "bfs,lobster")


def test_run_deviation_names_every_protocol_change_over_the_recipe():
    from relreason.config import recipe_deviation, run_deviation

    # a seed and a thread count are no protocol change: only the recipe's own statement is printed
    assert run_deviation(build_config("mpnn", "bellman_ford", recipe="default", overrides=[
        "train.seed=3", "train.threads=1"])) == recipe_deviation("default")
    dev = run_deviation(build_config("rt", "bellman_ford", overrides=["train.train_examples=8000", "train.seed=1"]))
    assert dev.startswith(recipe_deviation("rt"))
    assert dev.endswith("changed with --set over the recipe: train.train_examples=8000")
    kernels_only = ["processor.compiled_kernels=false", "processor.chunk_mb=8"]  # same maths, other kernels
    assert run_deviation(build_config("et", "bellman_ford", overrides=kernels_only)) == recipe_deviation("et")


@pytest.mark.parametrize("text, message", [
    # "billion laughs": six levels of nine aliases stand for 9**6 values (nine levels: 4e9, gigabytes), here
    # in the scope of a model not trained, which nothing else reads
    ("train:\n  lr: 0.1\nmodels:\n  other:\n    a0: &a0 [x, x, x, x, x, x, x, x, x]\n"
     + "".join(f"    a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 7)),
     r"its aliases expand to [\d,]+ values, more than the 100,000"),
    ("train:\n  lr: 0.1\n  batch_size: 4\n  lr: 0.2\n", r"key 'lr' is given twice \(lines 2 and 4\)"),
])
def test_recipes_refuse_expanding_aliases_and_repeated_keys(tmp_path, text, message):
    path = tmp_path / "r.yaml"
    path.write_text(text)
    with pytest.raises(RelreasonError, match=f"recipe {path} is not valid YAML: {message}"):
        build_config("mpnn", "bfs", str(path))
