"""Configuration: precedence defaults < recipe < --set, strict validation with key paths."""

from __future__ import annotations

import pytest

from relreason.config import build_config, parse_overrides, recipe_names
from relreason.errors import RelreasonError
from relreason.models.processors import PROCESSORS

TASK = "bellman_ford"


def test_defaults_are_the_reference_protocol():
    cfg = build_config("mpnn", TASK)
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
    from relreason.config import RECIPE_DIR

    first = (RECIPE_DIR / f"{recipe}.yaml").read_text().splitlines()[0]
    assert first.startswith("# relreason train "), first
    model, task = first.split()[3:5]
    assert model in PROCESSORS
    build_config(model, task, recipe)
