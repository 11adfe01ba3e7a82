"""Resolving a run's configuration from layers, auditable line by line: `build_config` (and `resolve`,
which the stored configs of checkpoints and resumes go through).

    cfg = build_config("rt", "bellman_ford", recipe="quick", overrides=["train.lr=1e-4"])
    cfg.sources["train.lr"]   # "--set"

Layers, lowest first (each later one overrides; `Config.sources` records which layer set each key):
1. `default`: the dataclass defaults (the CLRS v2 defaults of the reference's clrs 2.0.3 run.py);
2. `model NAME`: what the model's paper sets unlike the CLRS defaults (e.g. the RT decodes pointers
   from edges);
3. `task NAME`: what the task needs (e.g. lobsters: no hints, many processor iterations);
4. `recipe NAME`: a YAML recipe (a diff; `inherit:` chains recipes, `inherit: paper` means the
   paper recipe of the model and task being trained). Without `--recipe` the paper recipe that the
   model's entry declares for the task's kind (relreason.models.entry: `rt` for CLRS tasks,
   `lobster_rt` for lobsters) is used, `default` where it declares none. A recipe may scope diffs
   to models or tasks (`models: {rt: {...}}`, `tasks: {lobster: {...}}`), and its line comments are
   the sources `--print-config` shows. Installed plugins add recipes (`RECIPES`, relreason.plugins);
5. `ablation NAME`: the variant's delta (ablate only);
6. `--set`: command-line overrides.

Everything is validated against the dataclasses before anything is built: unknown keys and wrong
types are all reported at once with their path (`train.lr: expected a number, got 'x'`; the types are
checked by relreason.typecheck), and range checks reject values no run can use (never replaced by
defaults).
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import yaml

from relreason.config.recipes import PAPER, paper_recipe, read_recipe, recipe_deviation
from relreason.config.schema import SECTIONS, Config, TrainConfig, validate
from relreason.config.strict_yaml import IntegerTooLong, load_yaml
from relreason.errors import RelreasonError
from relreason.protocol import NOT_PROTOCOL_KEYS
from relreason.tasks import data_config_class, expand_tasks, task_defaults, task_kind
from relreason.typecheck import YAML, Mismatch, check
from relreason.typecheck import kind as kind_of_type


@dataclass
class Layer:
    """One source of configuration values, with the comments that justify them."""

    label: str  # "recipe rt", "--set", ...
    tree: dict  # {section: {key: value}}
    comments: dict[tuple[str, ...], str] = field(default_factory=dict)  # key path -> line comment


MULTITASK = "multitask"  # the recipe scope (`tasks: {multitask: ...}`) applied to every multi-task run


def recipe_layers(recipe: str, model: str, task: str, kind: str, _seen: tuple[str, ...] = ()) -> list[Layer]:
    """The layers of a recipe, its `inherit:` chain first, scoped `models:` / `tasks:` diffs after its own."""
    if recipe == PAPER:
        recipe = paper_recipe(model, task)
    if recipe in _seen:
        raise RelreasonError(f"recipe {recipe!r} inherits from itself through {' -> '.join(_seen)}", "break the cycle")
    data, comments = read_recipe(recipe)
    name = Path(recipe).stem if recipe.endswith((".yaml", ".yml")) else recipe
    layers: list[Layer] = []
    parent = data.get("inherit")
    if parent is not None:
        layers += recipe_layers(str(parent), model, task, kind, _seen + (recipe,))
    own = {k: v for k, v in data.items() if k in SECTIONS}
    layers.append(Layer(f"recipe {name}", own, comments))

    scopes = [("models", model), ("tasks", task), ("tasks", kind)]
    if len(expand_tasks(task)) > 1 and kind != "text":  # text groups: the `text` scope sizes them per size
        scopes.append(("tasks", MULTITASK))  # any multi-task NAR run (a group or a comma list)
    for scope, key in scopes:
        scoped = data.get(scope) or {}
        if not isinstance(scoped, dict):
            raise RelreasonError(f"recipe {name}: `{scope}:` must map names to config diffs", "see relreason/recipes/quick.yaml")
        if key in scoped:
            sub = {(p[2:]): c for p, c in comments.items() if p[:2] == (scope, key)}
            layers.append(Layer(f"recipe {name} ({key})", scoped[key] or {}, sub))
    return layers


def run_deviation(cfg: "Config") -> str | None:
    """How a run departs from its recipe's protocol: the recipe's own statement (`cfg.deviation`, read
    when the config was built, never looked up again by the recipe's label), then every value `--set`
    changed on top of it (except NOT_PROTOCOL_KEYS). None when neither."""
    parts = [cfg.deviation] if cfg.deviation else []
    plain = cfg.to_dict()
    changed = [f"{key}={plain[section][name]}" for key, source in cfg.sources.items()
               if source.startswith("--set") and key not in NOT_PROTOCOL_KEYS and key.count(".") == 1
               for section, name in [key.split(".")]]
    if changed:
        parts.append("changed with --set over the recipe: " + ", ".join(changed))
    return "; ".join(parts) or None


def _type_name(tp: Any) -> str:
    """How a configuration message names a union of types: "float or null"."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if args and len(args) < len(typing.get_args(tp)):
        return " or ".join(_type_name(a) for a in args) + " or null"
    return getattr(tp, "__name__", str(tp)).replace("typing.", "")


def _wrong_type(m: Mismatch) -> str:
    """The message of a value of the wrong type: "train.lr: expected a number, got 'x'"."""
    union = typing.get_origin(m.tp) in (Union, types.UnionType)
    return f"{m.path}: expected {_type_name(m.tp) if union else kind_of_type(m.tp)}, got {m.value!r}"


def apply_updates(obj: Any, updates: dict, prefix: str, errors: list[str]) -> Any:
    """Returns a copy of dataclass `obj` with `updates` applied, validating keys and types."""
    if not isinstance(updates, dict):
        errors.append(f"{prefix}: expected a mapping of keys to values, got {updates!r}")
        return obj
    hints = typing.get_type_hints(type(obj))
    names = {f.name for f in dataclasses.fields(obj)}
    changes = {}
    for key, value in updates.items():
        path = f"{prefix}.{key}"
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1)
            errors.append(f"{path}: unknown key" + (f" (did you mean {prefix}.{close[0]}?)" if close else
                                                    f" (known: {', '.join(sorted(names))})"))
            continue
        changes[key] = check(value, hints[key], path, lambda m: errors.append(_wrong_type(m)), YAML)
    if not changes:
        return obj
    try:
        return dataclasses.replace(obj, **changes)
    except RelreasonError as e:  # a dataclass's own range check (__post_init__)
        errors.append(e.message)
        return obj


def parse_overrides(items: list[str]) -> dict:
    """`["train.lr=1e-4", "model.hidden=64"]` -> {"train": {"lr": 1e-4}, "model": {"hidden": 64}}."""
    tree: dict = {}
    for item in items:
        if "=" not in item:
            raise RelreasonError(f"--set {item!r} is not KEY=VALUE", "e.g. --set train.lr=1e-4")
        key, raw = item.split("=", 1)
        parts = key.strip().split(".")
        if len(parts) != 2 or not all(parts):
            raise RelreasonError(f"--set key {key!r} must be SECTION.KEY", f"sections: {', '.join(SECTIONS)}")
        try:
            value = load_yaml(raw) if raw.strip() else ""
        except IntegerTooLong as e:
            raise RelreasonError(f"--set {key.strip()}: {e}", "give a number of a sensible size") from None
        except yaml.YAMLError:
            value = raw
        tree.setdefault(parts[0], {})[parts[1]] = value
    return tree


def merge(*trees: dict) -> dict:
    out: dict = {}
    for tree in trees:
        for section, values in tree.items():
            if isinstance(values, dict) and isinstance(out.get(section), dict):
                out[section] = {**out[section], **values}
            else:
                out[section] = values
    return out


def keys_of(tree: dict) -> set[str]:
    """{"section.key", ...} set by a config tree."""
    return {f"{s}.{k}" for s, values in tree.items() if isinstance(values, dict) for k in values}


# -- resolution ----------------------------------------------------------------------------------

def build_config(model_name: str, task: str, recipe: str | None = None, overrides: list[str] | dict | None = None,
                 ablation: tuple[str, dict] | None = None) -> Config:
    """Resolves the layers (see the module docstring) into a validated Config.

    Args:
        recipe: a recipe name or YAML path; None means the paper recipe of (model, task).
        overrides: `--set` items (["train.lr=1e-4"]) or an equivalent tree.
        ablation: (label, delta tree) of an ablation variant, applied between recipe and overrides.
    Raises:
        RelreasonError: every invalid key, type or range at once.
    """
    family, entry = _model(model_name)
    kind = task_kind(task)
    _check_family(model_name, family, task, kind)
    recipe_name = recipe if recipe is not None else paper_recipe(model_name, task)
    layers = [Layer(f"model {model_name}", {"model": dict(getattr(entry, "model_defaults", {}))}),
              Layer(f"task {task}", task_defaults(task))]
    layers += recipe_layers(recipe_name, model_name, task, kind)
    if ablation is not None:
        layers.append(Layer(f"ablation {ablation[0]}", ablation[1]))
    over = overrides if isinstance(overrides, dict) else parse_overrides(list(overrides or []))
    layers.append(Layer("--set", over))
    label = Path(recipe_name).stem if str(recipe_name).endswith((".yaml", ".yml")) else recipe_name
    cfg = resolve(model_name, task, layers, label)
    # read from the file found now (a name or a path): the label alone may name no recipe (./mine.yaml -> mine)
    cfg.deviation = recipe_deviation(paper_recipe(model_name, task) if recipe_name == PAPER else recipe_name)
    return cfg


def resolve(model_name: str, task: str, layers: list[Layer], recipe_label: str | None) -> Config:
    """Applies `layers` over the defaults of (model, task); validates; records each key's source."""
    family, entry = _model(model_name)
    cfg = Config(model_name, task, data_config_class(task)(), *_model_sections(family, entry), TrainConfig(),
                 recipe_label)
    errors: list[str] = []
    sources: dict[str, str] = {}
    for layer in layers:
        for section, values in layer.tree.items():
            if section not in SECTIONS:
                errors.append(f"{section}: unknown section (known: {', '.join(cfg.sections())})")
                continue
            if getattr(cfg, section) is None:
                if values:
                    errors.append(f"{section}: this model has no {section} section (known: {', '.join(cfg.sections())})")
                continue
            setattr(cfg, section, apply_updates(getattr(cfg, section), values, section, errors))
            if isinstance(values, dict):
                for key in values:
                    note = layer.comments.get((section, key))
                    sources[f"{section}.{key}"] = layer.label + (f": {note}" if note else "")
    if errors:
        raise RelreasonError("invalid configuration: " + "; ".join(dict.fromkeys(errors)),
                             "see `relreason train MODEL TASK --print-config` for every key and its type")
    cfg.sources = sources
    validate(cfg)
    return cfg


def _model(name: str):
    from relreason.models.catalog import find_model  # CLI start-up: relreason.models loads torch

    return find_model(name)


def _model_sections(family, entry) -> tuple[Any, Any]:
    """(model section, processor section) defaults of a model."""
    from relreason.models.catalog import Family  # CLI start-up: relreason.models loads torch

    if family is Family.TEXT:
        return entry.config(), None
    from relreason.models.config import ModelConfig  # CLI start-up: relreason.models loads torch

    return ModelConfig(), entry.config()


def _check_family(model: str, family, task: str, kind: str) -> None:
    from relreason.models.catalog import Family  # CLI start-up: relreason.models loads torch

    if (family is Family.TEXT) != (kind == "text"):
        want = "a text: task (e.g. text:insertion_sort)" if family is Family.TEXT else "a graph task (e.g. bellman_ford)"
        raise RelreasonError(f"model {model!r} cannot train on {task!r}", f"{model} is a {family.value} model: give {want}")


def config_from_dict(d: dict) -> Config:
    """Rebuilds a Config stored in a checkpoint's config.json (every key as stored)."""
    tree = {s: d[s] for s in SECTIONS if d.get(s) is not None}
    return resolve(d["model_name"], d["task"], [Layer("stored", tree)], d.get("recipe"))


__all__ = ["Layer", "MULTITASK", "recipe_layers", "run_deviation", "apply_updates", "parse_overrides", "merge",
           "keys_of", "build_config", "resolve", "config_from_dict"]
