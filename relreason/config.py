"""Typed configuration: defaults < recipe (YAML diff) < `--set section.key=value` overrides.

A run's configuration has four sections:
- `data`: which splits to train and test on (canonical CLRS-30 sizes by default);
- `model`: the encode-process-decode options (`relreason.models.config.ModelConfig`);
- `processor`: the options of the selected processor (its registered config dataclass, whose
  defaults are its paper's settings);
- `train`: optimisation and the validation schedule.

Everything a user writes is validated against the dataclasses before anything is built: unknown
keys and wrong types are all reported at once, each with its path (`train.lr: expected float, got 'x'`).
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import yaml

from relreason.errors import RelreasonError

RECIPE_DIR = Path(__file__).parent / "recipes"


@dataclass
class DataConfig:
    train_size: int = 16  # CLRS-30 trains on n = 16
    train_num: int = 1000  # CLRS-30 canonical train split (the RT paper uses 10,000)
    val_size: int = 16  # validation is in-distribution, as in the benchmark
    test_size: int = 64  # the OOD test size of CLRS-30
    data_dir: str = "data"  # canonical splits are generated once and cached here


@dataclass
class TrainConfig:
    batch_size: int = 32  # reference default
    lr: float = 1e-3  # reference Adam learning rate
    grad_clip: float = 1.0  # global-norm clipping, reference default
    train_examples: int = 320_000  # 10,000 steps x batch 32, the reference schedule
    eval_every_examples: int = 1_600  # every 50 steps x batch 32, as the reference
    eval_batch_size: int = 32  # evaluation batch; does not change the scores
    seed: int = 42  # model init, batch order and every noise draw derive from it
    device: str = "auto"  # auto | cpu | cuda
    threads: int = 0  # torch intra-op threads; 0 leaves torch's default


SECTIONS = ("data", "model", "processor", "train")


def _model_config_cls():
    from relreason.models.config import ModelConfig

    return ModelConfig


@dataclass
class Config:
    """A resolved run configuration (what `--print-config` shows and checkpoints store)."""

    model_name: str  # processor registry name, e.g. "mpnn", "rt"
    task: str  # algorithm (or task) name, e.g. "bellman_ford"
    data: DataConfig = field(default_factory=DataConfig)
    model: Any = None  # ModelConfig
    processor: Any = None  # the processor's config dataclass
    train: TrainConfig = field(default_factory=TrainConfig)
    recipe: str | None = None

    def to_dict(self) -> dict:
        return {"model_name": self.model_name, "task": self.task, "recipe": self.recipe,
                **{s: to_plain(getattr(self, s)) for s in SECTIONS}}


def to_plain(obj: Any) -> Any:
    """Dataclasses/enums -> plain YAML/JSON values."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (list, tuple)):
        return [to_plain(x) for x in obj]
    return obj


def _coerce(value: Any, tp: Any, path: str, errors: list[str]) -> Any:
    """Checks/coerces one value against a type annotation; appends an error message on failure."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            sub: list[str] = []
            out = _coerce(value, arg, path, sub)
            if not sub:
                return out
        errors.append(f"{path}: expected {_type_name(tp)}, got {value!r}")
        return value
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            errors.append(f"{path}: expected a list, got {value!r}")
            return value
        (arg, *_) = typing.get_args(tp) or (Any,)
        return tuple(_coerce(v, arg, f"{path}[{i}]", errors) for i, v in enumerate(value))
    if tp is Any:
        return value
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            errors.append(f"{path}: expected one of {[m.value for m in tp]}, got {value!r}")
            return value
    if tp is bool:
        if isinstance(value, bool):
            return value
        errors.append(f"{path}: expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        errors.append(f"{path}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        errors.append(f"{path}: expected a number, got {value!r}")
        return value
    if tp is str:
        if isinstance(value, str):
            return value
        errors.append(f"{path}: expected a string, got {value!r}")
        return value
    return value


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp)).replace("typing.", "")


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
            import difflib

            close = difflib.get_close_matches(str(key), names, n=1)
            errors.append(f"{path}: unknown key" + (f" (did you mean {prefix}.{close[0]}?)" if close else
                                                    f" (known: {', '.join(sorted(names))})"))
            continue
        changes[key] = _coerce(value, hints[key], path, errors)
    return dataclasses.replace(obj, **changes) if changes else obj


def find_recipe(recipe: str) -> Path:
    """A recipe name (`quick`, `rt`) in relreason/recipes/, or a path to a YAML file."""
    path = Path(recipe)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise RelreasonError(f"recipe file {recipe} does not exist", "give a recipe name or an existing YAML path")
        return path
    candidate = RECIPE_DIR / f"{recipe}.yaml"
    if not candidate.is_file():
        import difflib

        names = recipe_names()
        close = difflib.get_close_matches(recipe, names, n=2)
        hint = (f"did you mean {' or '.join(close)}? " if close else "") + f"known recipes: {', '.join(names)}"
        raise RelreasonError(f"unknown recipe {recipe!r}", hint)
    return candidate


def recipe_names() -> list[str]:
    return sorted(p.stem for p in RECIPE_DIR.glob("*.yaml"))


def load_recipe(recipe: str, _seen: tuple[str, ...] = ()) -> dict:
    """A recipe's config tree. `inherit: NAME` takes another recipe as the base of this one's diff."""
    path = find_recipe(recipe)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise RelreasonError(f"recipe {path} is not valid YAML: {str(e).splitlines()[0]}", "fix the file") from None
    if not isinstance(data, dict):
        raise RelreasonError(f"recipe {path} must be a mapping of sections", f"sections: {', '.join(SECTIONS)}")
    parent = data.pop("inherit", None)
    if parent is None:
        return data
    if parent in _seen or parent == recipe:
        raise RelreasonError(f"recipe {path} inherits from itself through {parent!r}", "break the cycle")
    return merge(load_recipe(str(parent), _seen + (recipe,)), data)


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
            value = yaml.safe_load(raw) if raw.strip() else ""
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


def build_config(model_name: str, task: str, recipe: str | None = None, overrides: list[str] | dict | None = None,
                 base: dict | None = None) -> Config:
    """Resolves defaults < the processor's and the task's own defaults < recipe < overrides into a
    validated Config (all errors reported at once)."""
    from relreason.models.processors import PROCESSORS
    from relreason.tasks import TASKS

    entry = PROCESSORS.get(model_name)
    task_entry = TASKS.get(task)
    tree = merge({"model": dict(entry.model_defaults)}, {k: dict(v) for k, v in task_entry.defaults.items()}, base or {}, load_recipe(recipe) if recipe else {},
                 overrides if isinstance(overrides, dict) else parse_overrides(overrides or []))
    errors: list[str] = []
    for section in tree:
        if section not in SECTIONS:
            errors.append(f"{section}: unknown section (known: {', '.join(SECTIONS)})")
    cfg = Config(model_name, task, DataConfig(), _model_config_cls()(), entry.config(), TrainConfig(), recipe)
    for section in SECTIONS:
        if section in tree:
            setattr(cfg, section, apply_updates(getattr(cfg, section), tree[section], section, errors))
    if errors:
        raise RelreasonError("invalid configuration: " + "; ".join(errors),
                             "see `relreason train --print-config` for every key and its type")
    validate(cfg)
    return cfg


def validate(cfg: Config) -> None:
    """Range checks that types alone cannot express."""
    problems = []
    t = cfg.train
    for key in ("batch_size", "train_examples", "eval_every_examples", "eval_batch_size"):
        if getattr(t, key) <= 0:
            problems.append(f"train.{key} must be positive")
    if t.lr <= 0:
        problems.append("train.lr must be positive")
    if t.device not in ("auto", "cpu", "cuda") and not t.device.startswith("cuda:"):
        problems.append(f"train.device {t.device!r} must be auto, cpu or cuda")
    for key in ("train_size", "val_size", "test_size"):
        if getattr(cfg.data, key) < 2:
            problems.append(f"data.{key} must be at least 2")
    if problems:
        raise RelreasonError("invalid configuration: " + "; ".join(problems), "fix the recipe or --set values")


def config_from_dict(d: dict) -> Config:
    """Rebuilds a Config stored in a checkpoint's config.json."""
    tree = {s: d.get(s, {}) for s in SECTIONS}
    return build_config(d["model_name"], d["task"], None, tree)


def config_yaml(cfg: Config) -> str:
    return yaml.safe_dump(cfg.to_dict(), sort_keys=False)
