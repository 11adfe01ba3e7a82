"""One entry per model (relreason.models.entry): every model declares its facts once, beside its class
(config dataclass, description, paper, paper recipe per task kind), and everything that names them
(`relreason list models`, the default recipe of `train`) is read from that entry."""

from __future__ import annotations

import dataclasses
import re

import pytest
from torch import nn

from relreason.config import RECIPES, paper_recipe
from relreason.errors import RelreasonError
from relreason.models.catalog import Family, canonical_model, find_model, model_names, model_origin, model_rows
from relreason.models.entry import DEFAULT_RECIPE
from relreason.plugins import BUILT_IN
from relreason.tasks import TASKS

NAMES = model_names()
KINDS = {Family.NAR: ("clrs", "lobster"), Family.TEXT: ("text",)}  # the task kinds each family trains on


@pytest.mark.parametrize("name", NAMES)
def test_every_model_declares_its_facts(name):
    family, entry = find_model(name)
    assert entry.name == name and issubclass(entry.cls, nn.Module)
    assert dataclasses.is_dataclass(entry.config) and entry.config()  # the paper's defaults build as they are
    assert entry.description and entry.paper
    assert not re.search(r"\(\D*\d{4}\)$", entry.description), "the citation belongs in `paper`"
    assert set(entry.recipes) <= set(KINDS[family]), "a paper recipe for a task kind the model cannot train on"
    assert all(recipe in RECIPES for recipe in entry.recipes.values())
    assert model_origin(name) is BUILT_IN


@pytest.mark.parametrize("name", NAMES)
def test_a_recipe_named_after_a_model_is_its_paper_recipe(name):
    """The recipe files' naming convention (`rt.yaml`, `lobster_rt.yaml`) and the entries agree: no
    paper recipe is declared but missing, none is shipped but forgotten in its model's entry."""
    family, entry = find_model(name)
    for kind in KINDS[family]:
        named = name if kind in ("clrs", "text") else f"{kind}_{name}"
        assert entry.paper_recipe(kind) == (named if named in RECIPES else DEFAULT_RECIPE)


def test_train_takes_the_paper_recipe_the_entry_declares():
    kinds = {TASKS.get(t).kind: t for t in TASKS.names()}
    for name in NAMES:
        family, entry = find_model(name)
        for kind in KINDS[family]:
            assert paper_recipe(name, kinds[kind]) == entry.paper_recipe(kind)
    assert paper_recipe("rt", "lobster") == "lobster_rt" and paper_recipe("mpnn", "bfs") == DEFAULT_RECIPE


def test_list_models_reads_the_entries():
    rows = model_rows()
    assert [r["name"] for r in rows] == NAMES
    for row in rows:
        family, entry = find_model(row["name"])
        home = KINDS[family][0]
        assert row == {"name": entry.name, "family": family.value, "paper_recipe": entry.paper_recipe(home),
                       "description": f"{entry.description} ({entry.paper})", "paper": entry.paper,
                       "origin": "built-in"}


@pytest.mark.parametrize("name", NAMES)
def test_a_model_may_be_spelled_with_other_case_dashes_and_underscores(name):
    spelled = name.upper().replace("_", "-")
    assert canonical_model(spelled) == name and canonical_model(name.replace("_", "")) == name
    assert canonical_model(name) == name


def test_a_spelling_of_no_model_is_given_back_for_the_did_you_mean_error():
    assert canonical_model("gforgetnetx") == "gforgetnetx"
    with pytest.raises(RelreasonError, match="did you mean 'g_forgetnet'"):
        find_model(canonical_model("gforgetnetx"))
